//! Where llama.cpp's log goes: nowhere by default (it is chatty on stderr), to stderr when
//! `TOOLRAIL_LLAMA_LOG` is set, and — while a model loads — into a per-thread buffer, so that a
//! failed load can say why in the error instead of in the terminal.

// llama.cpp's log callback is a C function receiving C strings.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::io::Write as _;
use std::sync::OnceLock;

/// Lines kept per capture; llama.cpp's reasons come last, so older lines are dropped first.
const MAX_LINES: usize = 64;

/// One captured log line.
#[derive(Clone, Debug)]
pub(crate) struct LogLine {
    /// Logged at error level.
    pub error: bool,
    /// The text, without its trailing newline.
    pub text: String,
}

thread_local! {
    static CAPTURE: RefCell<Option<Vec<LogLine>>> = const { RefCell::new(None) };
    /// What llama.cpp last resolved flash attention `auto` to on this thread (its
    /// `resolve_fused_ops` line, logged too early in a context's creation to stay among the
    /// last captured lines).
    static FLASH_ATTENTION: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Takes what llama.cpp last resolved flash attention `auto` to on this thread, if it said.
pub(crate) fn take_flash_attention() -> Option<bool> {
    FLASH_ATTENTION.with(std::cell::Cell::take)
}

/// Notes a flash attention resolution line.
fn note_flash_attention(text: &[u8]) {
    let text = String::from_utf8_lossy(text);
    if !text.contains("Flash Attention") {
        return;
    }
    let resolved = if text.contains("set to disabled") {
        Some(false)
    } else if text.trim_end().ends_with("Flash Attention enabled") {
        Some(true)
    } else {
        None
    };
    if resolved.is_some() {
        let _ = FLASH_ATTENTION.try_with(|cell| cell.set(resolved));
    }
}

/// True when `TOOLRAIL_LLAMA_LOG` asks for llama.cpp's log on stderr.
fn echo() -> bool {
    static ECHO: OnceLock<bool> = OnceLock::new();
    *ECHO.get_or_init(|| std::env::var_os("TOOLRAIL_LLAMA_LOG").is_some_and(|v| !v.is_empty()))
}

/// The callback handed to llama.cpp (and ggml). Never panics: it is called from C.
unsafe extern "C" fn on_log(
    level: llama_cpp_sys_2::ggml_log_level,
    text: *const c_char,
    _: *mut c_void,
) {
    if text.is_null() {
        return;
    }
    // SAFETY: llama.cpp passes a NUL-terminated string valid for the duration of the call.
    let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
    if echo() {
        let _ = std::io::stderr().write_all(bytes);
    }
    note_flash_attention(bytes);
    let _ = CAPTURE.try_with(|capture| {
        let Ok(mut capture) = capture.try_borrow_mut() else {
            return;
        };
        let Some(lines) = capture.as_mut() else {
            return;
        };
        let text = String::from_utf8_lossy(bytes);
        // Continuation pieces extend the previous line.
        if level == llama_cpp_sys_2::GGML_LOG_LEVEL_CONT
            && let Some(last) = lines.last_mut()
        {
            last.text.push_str(text.trim_end_matches('\n'));
            return;
        }
        if lines.len() == MAX_LINES {
            lines.remove(0);
        }
        lines.push(LogLine {
            error: level == llama_cpp_sys_2::GGML_LOG_LEVEL_ERROR,
            text: text.trim_end_matches('\n').to_owned(),
        });
    });
}

/// Routes llama.cpp's and ggml's log through [`on_log`]. Called once, with the backend.
pub(crate) fn install() {
    // SAFETY: `on_log` is a valid `extern "C"` function for the program's lifetime and ignores
    // its user data.
    unsafe { llama_cpp_sys_2::llama_log_set(Some(on_log), std::ptr::null_mut()) };
}

/// Runs `f` while capturing the log lines llama.cpp emits on this thread; returns them too.
pub(crate) fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<LogLine>) {
    let previous = CAPTURE.with(|c| c.borrow_mut().replace(Vec::new()));
    let out = f();
    let lines = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous));
    (out, lines.unwrap_or_default())
}

/// The error-level lines among captured ones, or the last three lines if there are none.
pub(crate) fn reasons(lines: &[LogLine]) -> Vec<String> {
    let errors: Vec<String> = lines
        .iter()
        .filter(|l| l.error)
        .map(|l| l.text.trim().to_owned())
        .collect();
    if !errors.is_empty() {
        return errors;
    }
    let skip = lines.len().saturating_sub(3);
    lines[skip..]
        .iter()
        .map(|l| l.text.trim().to_owned())
        .collect()
}
