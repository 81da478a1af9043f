//! toolrail: a playground and debugger for grammar-constrained tool calling with local LLMs.
//!
//! Data flows one way: tool definitions ([`tools`]) and JSON Schemas ([`schema`]) become GBNF text,
//! GBNF text becomes a compiled grammar ([`gbnf`]), and the compiled grammar drives a recognizer over
//! sets of llama.cpp-style stacks ([`engine`]). The command-line tool ([`cli`]) is a thin edge over
//! the same library, and so is the desktop app ([`app`], egui only) over the UI-free
//! [`workbench`] (workspace, analysis job, run controller).

pub mod app;
pub mod cli;
pub mod engine;
pub mod fsutil;
pub mod gbnf;
pub mod llm;
pub mod schema;
pub mod tools;
pub mod transcript;
pub mod workbench;
