//! What the commands write to standard output and standard error, in one place.
//!
//! - Every write to standard output goes through [`write_stdout`]: `write_all` then `flush`, an
//!   error naming standard output (a full disk, a closed pipe: `cli::main` ends a broken pipe
//!   quietly), and an error when standard output was closed when toolrail started (Rust's
//!   runtime then points it at `/dev/null`, so writes would succeed and vanish).
//! - Text for a person (`out!`, `outln!`, `errln!`) is made terminal-safe whole
//!   ([`toolrail_gbnf::terminal_safe`]): a tool name, a description, a model's output or a
//!   file's line cannot send terminal control sequences. The format strings themselves hold no
//!   control characters but line feeds and tabs, so escaping the whole text escapes exactly the
//!   untrusted parts.
//! - JSON ([`write_json`]) is JSON: serde writes the C0 controls as `\u00XX`; DEL and the C1
//!   controls, which JSON allows raw, are written as `\u00XX` too (the same JSON value).
//! - A grammar ([`write_data`]) is written as built: its comments are terminal-safe where they
//!   are made and its literals write control characters as GBNF escapes.
//!
//! Files the user names (`--transcript`, `--markdown`, `-o`) are data, not terminal output:
//! they keep the exact text.

use std::borrow::Cow;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set before `main` when file descriptor 1 was closed at start (see [`probe`]).
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// Records whether standard output is open. It runs before Rust's runtime starts (an entry of
/// the executable's initialisers), because the runtime reopens a closed descriptor 1 on
/// `/dev/null` and afterwards a closed output cannot be told from `>/dev/null`.
#[cfg(unix)]
extern "C" fn probe() {
    // SAFETY: `fcntl(1, F_GETFD)` only reads descriptor 1's flags; it fails with EBADF when the
    // descriptor is closed and touches no memory of ours.
    #[allow(unsafe_code)]
    let flags = unsafe { fcntl(1, F_GETFD) };
    STDOUT_CLOSED_AT_START.store(flags == -1, Ordering::Relaxed);
}

/// `fcntl`'s command that reads a descriptor's flags (1 on Linux, the BSDs and macOS).
#[cfg(unix)]
const F_GETFD: std::os::raw::c_int = 1;

#[cfg(unix)]
#[allow(unsafe_code)] // the C library's `fcntl`, declared here rather than adding a dependency
unsafe extern "C" {
    fn fcntl(fd: std::os::raw::c_int, cmd: std::os::raw::c_int, ...) -> std::os::raw::c_int;
}

/// [`probe`] as an initialiser of the executable (ELF's `.init_array`), run before `main`.
#[cfg(all(unix, not(target_vendor = "apple")))]
#[allow(unsafe_code)] // placing a function pointer in the initialiser section is unsafe to Rust
#[used]
#[unsafe(link_section = ".init_array")]
static PROBE_AT_START: extern "C" fn() = probe;

/// [`probe`] as an initialiser of the executable (Mach-O's `__mod_init_func`), run before `main`.
#[cfg(target_vendor = "apple")]
#[allow(unsafe_code)] // placing a function pointer in the initialiser section is unsafe to Rust
#[used]
#[unsafe(link_section = "__DATA,__mod_init_func")]
static PROBE_AT_START: extern "C" fn() = probe;

/// Writes `bytes` to standard output and flushes them: the one way the commands write there.
/// Fails (naming standard output) on a write error, and when standard output was closed at
/// start.
pub fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    if STDOUT_CLOSED_AT_START.load(Ordering::Relaxed) {
        return Err(closed());
    }
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// Prints clap's `--help` or `--version` text (as clap prints it: in colour on a terminal) and
/// flushes it, failing as [`write_stdout`] does.
pub fn print_help(e: &clap::Error) -> std::io::Result<()> {
    if STDOUT_CLOSED_AT_START.load(Ordering::Relaxed) {
        return Err(closed());
    }
    e.print()
        .and_then(|()| std::io::stdout().flush())
        .map_err(stdout_error)
}

/// The error for a standard output that was closed at start.
fn closed() -> std::io::Error {
    std::io::Error::other("cannot write to standard output: it is closed (nothing was written)")
}

/// A write error on standard output, saying so (its kind kept: a broken pipe stays one).
pub fn stdout_error(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

/// Text for a person on standard output, terminal-safe (see the `out!` macro).
pub fn write_text(args: std::fmt::Arguments) -> std::io::Result<()> {
    let text = args.to_string();
    write_stdout(toolrail_gbnf::terminal_safe(&text).as_bytes())
}

/// Data on standard output as it is: a grammar (see the module's notes).
pub fn write_data(text: &str) -> std::io::Result<()> {
    write_stdout(text.as_bytes())
}

/// A JSON text (from serde) on standard output, then a line feed; DEL and C1 controls escaped
/// (see [`json_terminal_safe`]).
pub fn write_json(json: &str) -> std::io::Result<()> {
    let mut text = json_terminal_safe(json).into_owned();
    text.push('\n');
    write_stdout(text.as_bytes())
}

/// A JSON text with DEL and the C1 controls written `\u00XX`. JSON allows them raw inside
/// strings (serde escapes only the C0 controls); outside strings JSON has no such character, so
/// the result is the same JSON value.
pub fn json_terminal_safe(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| c.is_control() && u32::from(c) >= 0x7f) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if c.is_control() && u32::from(c) >= 0x7f {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text for a person on standard error, terminal-safe, then a line feed (see the `errln!`
/// macro). A failed write is ignored: there is nowhere left to report it.
pub fn write_err_line(args: std::fmt::Arguments) {
    let mut text = args.to_string();
    text.push('\n');
    let _ = std::io::stderr()
        .lock()
        .write_all(toolrail_gbnf::terminal_safe(&text).as_bytes());
}

/// An error and its causes on one line, `outer: cause: …`, each cause left out when the text
/// before already says it (many errors write their cause into their own message).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_keeps_its_value_with_c1_and_del_escaped() {
        let value = serde_json::json!({"name": "x\u{1b}]0;T\u{7}\u{9b}2J\u{7f}"});
        let text = serde_json::to_string(&value).unwrap();
        let safe = json_terminal_safe(&text);
        assert!(!safe.chars().any(|c| c.is_control()), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
