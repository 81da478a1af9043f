//! One way for the tests, benches and examples to find their data.
//!
//! - In the repository: [`repo_root`], [`repo_path`] (sample schemas, golden files, fixtures).
//! - Beside it: [`shared`] and [`corpus`] (`../shared/`, the conformance corpus and the
//!   reliability reproducers; `$TOOLRAIL_SHARED_DIR` points elsewhere).
//! - Fetched or built once per machine: [`model`] (the test model, `scripts/fetch-model.sh`) and
//!   [`llama_server`] (a real llama-server, `scripts/build-llama-server.sh`).
//!
//! A lookup of something outside the repository returns its path, or, when it is missing,
//! **panics under `CI=true`** with a message naming what is missing and how to get it, and
//! otherwise says `skipped: …` on stderr and returns `None`, so that the test returns:
//!
//! ```no_run
//! let Some(dir) = toolrail_testkit::corpus("bfcl") else {
//!     return; // skipped (said on stderr); under CI=true the lookup failed the test
//! };
//! ```
//!
//! A test must never return early on missing data without going through one of these lookups:
//! under `CI=true` such a test could not fail.

use std::path::{Path, PathBuf};

/// File name of the test model (Gemma 3 270M, Q4_K_M) the tests and benches use.
pub const TEST_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

/// The llama.cpp build the real llama-server is built from (the one toolrail links).
pub const LLAMA_SERVER_BUILD: &str = "b11434";

/// Whether this is a CI run (`CI=true`), where missing data fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Something a test needs is missing: panics under `CI=true` with `what` and `how` to get it;
/// otherwise says `skipped: …` on stderr and returns `None` (the test then returns).
#[track_caller]
pub fn missing<T>(what: &str, how: &str) -> Option<T> {
    let message = format!("{what}; {how}");
    assert!(!in_ci(), "{message} (a failure under CI=true)");
    eprintln!("skipped: {message}");
    None
}

/// The value of a lookup, or a return from the test when it is `None` (the lookup has said
/// `skipped: …`, or failed the test under `CI=true`):
/// `let dir = toolrail_testkit::require!(toolrail_testkit::corpus("bfcl"));`
#[macro_export]
macro_rules! require {
    ($lookup:expr) => {
        match $lookup {
            Some(found) => found,
            None => return,
        }
    };
}

/// The repository root (where the root `Cargo.toml`, `sample_schemas/` and `crates/` are).
pub fn repo_root() -> PathBuf {
    // This crate is `crates/toolrail-testkit` in the repository.
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .nth(2)
        .map_or_else(|| here.join("../.."), Path::to_path_buf)
}

/// `relative` under the repository root (a sample schema, a golden file, a test fixture). It is
/// part of the checkout, so a missing one always panics, naming it.
#[track_caller]
pub fn repo_path(relative: &str) -> PathBuf {
    let path = repo_root().join(relative);
    assert!(
        path.exists(),
        "{} is missing from the checkout (a file of the repository)",
        path.display()
    );
    path
}

/// The shared folder beside the checkout: `$TOOLRAIL_SHARED_DIR` if set, else `../shared` next
/// to the repository root. It may not exist.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("TOOLRAIL_SHARED_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared"),
    }
}

/// `sub` (a file or folder, e.g. `reliability/F1-maxlength-1e9.schema.json`) in the shared
/// folder ([`shared_dir`]); missing: see [`missing`].
#[track_caller]
pub fn shared(sub: &str) -> Option<PathBuf> {
    let path = shared_dir().join(sub);
    if path.exists() {
        return Some(path);
    }
    missing(
        &format!("../shared/{sub} not found (looked at {})", path.display()),
        "put the shared folder (the conformance corpus) beside the checkout, \
         or set TOOLRAIL_SHARED_DIR to it",
    )
}

/// `sub` in the conformance corpus, `../shared/corpus/<sub>` (e.g. `bfcl`,
/// `llama-cpp-tests`, `maskbench/data`, `gbnf/json.gbnf`); missing: see [`missing`].
#[track_caller]
pub fn corpus(sub: &str) -> Option<PathBuf> {
    shared(&format!("corpus/{sub}"))
}

/// Where the test model should be: `$TOOLRAIL_MODEL` if set, else [`TEST_MODEL_FILE`] in
/// `$TOOLRAIL_MODEL_DIR`, else in the platform cache folder (`~/.cache/toolrail/models` on
/// Linux; where `scripts/fetch-model.sh` puts it). The same rule as the app's
/// `toolrail_llm::test_model_path` (a test there checks they agree). It may not exist.
pub fn model_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLRAIL_MODEL").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let dir = match std::env::var_os("TOOLRAIL_MODEL_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => directories::ProjectDirs::from("", "", "toolrail")
            .map_or_else(|| PathBuf::from("models"), |d| d.cache_dir().join("models")),
    };
    dir.join(TEST_MODEL_FILE)
}

/// The test model ([`model_path`]); missing: see [`missing`].
#[track_caller]
pub fn model() -> Option<PathBuf> {
    let path = model_path();
    if path.is_file() {
        return Some(path);
    }
    missing(
        &format!("test model not found at {}", path.display()),
        "run scripts/fetch-model.sh",
    )
}

/// Where the real llama-server should be: `$TOOLRAIL_LLAMA_SERVER` (the binary) if set, else
/// `llama-server` in `$TOOLRAIL_SERVER_DIR`, else in `~/.cache/toolrail/llama-server/b11434/`
/// (where `scripts/build-llama-server.sh` puts it). It may not exist.
pub fn llama_server_path() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLRAIL_LLAMA_SERVER").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let dir = match std::env::var_os("TOOLRAIL_SERVER_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".cache/toolrail/llama-server")
            .join(LLAMA_SERVER_BUILD),
    };
    dir.join("llama-server")
}

/// The real llama-server binary ([`llama_server_path`]); missing: see [`missing`].
#[track_caller]
pub fn llama_server() -> Option<PathBuf> {
    let path = llama_server_path();
    if path.is_file() {
        return Some(path);
    }
    missing(
        &format!("llama-server not found at {}", path.display()),
        "run scripts/build-llama-server.sh",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_root_holds_the_workspace_and_the_samples() {
        assert!(repo_root().join("Cargo.toml").is_file());
        assert!(repo_path("sample_schemas/weather.json").is_file());
        assert!(repo_root().join("crates/toolrail-testkit").is_dir());
    }

    #[test]
    #[should_panic(expected = "missing from the checkout")]
    fn a_missing_repository_file_panics_naming_it() {
        repo_path("no/such/file.json");
    }
}
