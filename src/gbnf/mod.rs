//! GBNF: llama.cpp grammar dialect.
