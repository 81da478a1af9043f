//! Compiles toolrail's C++ shim over llama.cpp's chat machinery (`cpp/toolrail_chat.cpp`) against
//! the llama.cpp sources llama-cpp-sys-2 vendors; it links with the `llama-common` library that
//! crate already builds.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=cpp/toolrail_chat.cpp");
    println!("cargo:rerun-if-env-changed=DEP_LLAMA_ROOT");
    let Some(root) = env::var_os("DEP_LLAMA_ROOT").map(PathBuf::from) else {
        panic!("llama-cpp-sys-2 did not export DEP_LLAMA_ROOT (its cmake output directory)");
    };
    let cache_path = root.join("build").join("CMakeCache.txt");
    let cache = match fs::read_to_string(&cache_path) {
        Ok(text) => text,
        Err(e) => panic!(
            "cannot read llama.cpp's CMake cache {}: {e}",
            cache_path.display()
        ),
    };
    let Some(source) = cache
        .lines()
        .find_map(|line| {
            line.strip_prefix("llama.cpp_SOURCE_DIR:STATIC=")
                .or_else(|| line.strip_prefix("CMAKE_HOME_DIRECTORY:INTERNAL="))
        })
        .map(PathBuf::from)
    else {
        panic!("no llama.cpp source directory in {}", cache_path.display());
    };
    if !source.join("common").join("chat.h").is_file() {
        panic!(
            "{} has no common/chat.h: not the llama.cpp toolrail's shim is written for (b11434)",
            source.display()
        );
    }
    // common/ and the root (for "src/llama-grammar.h"); never common/jinja or src/, whose
    // string.h and unicode.h would shadow other headers.
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("cpp/toolrail_chat.cpp")
        .include(&source)
        .include(source.join("common"))
        .include(source.join("include"))
        .include(source.join("ggml").join("include"))
        .include(source.join("vendor"))
        .define("NDEBUG", None)
        .opt_level(2)
        .warnings(false)
        .compile("toolrail_chat");
}
