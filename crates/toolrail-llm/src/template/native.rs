//! The C++ shim over llama.cpp's chat code (`cpp/toolrail_chat.cpp`), called in this process:
//! `extern "C"` functions exchanging C strings, each wrapped here so that the rest of the crate
//! sees Rust strings and [`TemplateError`]s.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::NonNull;

use serde::{Deserialize, Serialize};

use super::error::TemplateError;

mod ffi {
    use std::ffi::{c_char, c_int};

    /// The shim's opaque handle (templates plus an optional vocabulary-only model).
    #[repr(C)]
    pub struct ToolrailChat {
        _private: [u8; 0],
    }

    unsafe extern "C" {
        pub fn toolrail_chat_free_string(s: *mut c_char);
        pub fn toolrail_chat_open_template(
            template_src: *const c_char,
            bos: *const c_char,
            eos: *const c_char,
            out: *mut *mut ToolrailChat,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn toolrail_chat_open_gguf(
            gguf_path: *const c_char,
            template_override: *const c_char,
            out: *mut *mut ToolrailChat,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn toolrail_chat_close(handle: *mut ToolrailChat);
        pub fn toolrail_chat_apply(
            handle: *const ToolrailChat,
            request_json: *const c_char,
            out_json: *mut *mut c_char,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn toolrail_chat_parse(
            parse_json: *const c_char,
            text: *const c_char,
            text_len: usize,
            is_partial: c_int,
            out_json: *mut *mut c_char,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn toolrail_chat_sampler_check(
            handle: *const ToolrailChat,
            setup_json: *const c_char,
            refusal: *mut *mut c_char,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn toolrail_trigger_search(
            request_json: *const c_char,
            out_json: *mut *mut c_char,
            err: *mut *mut c_char,
        ) -> c_int;
        pub fn toolrail_grammar_loads(
            grammar: *const c_char,
            ok: *mut c_int,
            err: *mut *mut c_char,
        ) -> c_int;
    }
}

pub(crate) fn c_string(text: &str, what: &'static str) -> Result<CString, TemplateError> {
    CString::new(text).map_err(|e| TemplateError::Nul {
        what,
        offset: e.nul_position(),
    })
}

/// Takes ownership of a string the shim allocated.
///
/// # Safety
/// `ptr` is null or a NUL-terminated string from the shim, not freed yet.
unsafe fn take_string(ptr: *mut c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the shim returns NUL-terminated malloc'd strings (caller's contract).
    let text = unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: allocated by the shim with malloc; freed once here.
    unsafe { ffi::toolrail_chat_free_string(ptr) };
    text
}

/// Turns a shim status (0 ok, 2 an invalid request, 1 another failure) and its error string
/// into a result.
///
/// # Safety
/// `err` is null or a string from the shim, not freed yet.
unsafe fn check(status: c_int, err: *mut c_char) -> Result<(), TemplateError> {
    // SAFETY: forwarded contract.
    let message = unsafe { take_string(err) };
    let http_status = if status == 2 { 400 } else { 500 };
    if status == 0 {
        Ok(())
    } else if message.is_empty() {
        Err(TemplateError::Llama {
            message: "failed without a message".to_owned(),
            http_status,
        })
    } else {
        Err(TemplateError::Llama {
            message,
            http_status,
        })
    }
}

/// What a chat template is opened from: its text, or a GGUF (its own template or one given
/// instead, with its vocabulary).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub(crate) enum Opening {
    /// A template's text, with BOS/EOS texts (may be empty).
    Source {
        source: String,
        bos: String,
        eos: String,
    },
    /// A GGUF model's vocabulary and template (or `template` instead of its own).
    Gguf {
        model: String,
        template: Option<String>,
    },
}

/// The shim's handle: llama.cpp's templates (and vocabulary), in this process.
pub(crate) struct Native {
    handle: NonNull<ffi::ToolrailChat>,
}

// SAFETY: the handle owns its templates and model; nothing in it is tied to the creating thread,
// and `&self` methods only read it (the shim's apply/parse take const pointers).
unsafe impl Send for Native {}

impl Drop for Native {
    fn drop(&mut self) {
        // SAFETY: the handle came from an open call and is closed once.
        unsafe { ffi::toolrail_chat_close(self.handle.as_ptr()) };
    }
}

impl Native {
    /// Opens `opening` with llama.cpp in this process.
    pub(crate) fn open(opening: &Opening) -> Result<Native, TemplateError> {
        let mut out = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        let status = match opening {
            Opening::Source { source, bos, eos } => {
                let src = c_string(source, "the chat template")?;
                let bos = c_string(bos, "the BOS text")?;
                let eos = c_string(eos, "the EOS text")?;
                // SAFETY: valid C strings and out-pointers.
                unsafe {
                    ffi::toolrail_chat_open_template(
                        src.as_ptr(),
                        bos.as_ptr(),
                        eos.as_ptr(),
                        &mut out,
                        &mut err,
                    )
                }
            }
            Opening::Gguf { model, template } => {
                crate::backend()?;
                let path = c_string(model, "the model path")?;
                let over = c_string(template.as_deref().unwrap_or(""), "the chat template")?;
                // SAFETY: valid C strings and out-pointers; the backend is initialised.
                unsafe {
                    ffi::toolrail_chat_open_gguf(path.as_ptr(), over.as_ptr(), &mut out, &mut err)
                }
            }
        };
        // SAFETY: err comes from the shim.
        unsafe { check(status, err) }?;
        let handle = NonNull::new(out)
            .ok_or_else(|| TemplateError::Protocol("open returned no handle".to_owned()))?;
        Ok(Native { handle })
    }

    /// `toolrail_chat_apply`: the request's JSON text in, the result's JSON text out.
    pub(crate) fn build_json(&self, request: &str) -> Result<String, TemplateError> {
        let body = c_string(request, "the request")?;
        let mut out = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        // SAFETY: live handle, valid C string and out-pointers.
        let status = unsafe {
            ffi::toolrail_chat_apply(self.handle.as_ptr(), body.as_ptr(), &mut out, &mut err)
        };
        // SAFETY: both strings come from the shim.
        let text = unsafe { take_string(out) };
        // SAFETY: err comes from the shim.
        unsafe { check(status, err) }?;
        Ok(text)
    }

    /// `toolrail_chat_sampler_check`: the setup's JSON text in, the refusal out (empty when
    /// the sampler can be set up).
    pub(crate) fn sampler_check_json(&self, setup: &str) -> Result<String, TemplateError> {
        let setup = c_string(setup, "the sampler setup")?;
        let mut refusal = std::ptr::null_mut();
        let mut err = std::ptr::null_mut();
        // SAFETY: live handle, valid C string and out-pointers.
        let status = unsafe {
            ffi::toolrail_chat_sampler_check(
                self.handle.as_ptr(),
                setup.as_ptr(),
                &mut refusal,
                &mut err,
            )
        };
        // SAFETY: both strings come from the shim (null when not set).
        let refusal = unsafe { take_string(refusal) };
        // SAFETY: err comes from the shim.
        unsafe { check(status, err) }?;
        Ok(refusal)
    }
}

/// `toolrail_chat_parse` in this process: the parser's JSON text and the output in, the
/// parsed message's JSON text out.
pub(crate) fn native_parse(
    params: &str,
    text: &str,
    partial: bool,
) -> Result<String, TemplateError> {
    let params = c_string(params, "the parser")?;
    let mut out = std::ptr::null_mut();
    let mut err = std::ptr::null_mut();
    // SAFETY: valid C string, text pointer with its length, out-pointers.
    let status = unsafe {
        ffi::toolrail_chat_parse(
            params.as_ptr(),
            text.as_ptr().cast::<c_char>(),
            text.len(),
            c_int::from(partial),
            &mut out,
            &mut err,
        )
    };
    // SAFETY: both strings come from the shim.
    let answer = unsafe { take_string(out) };
    // SAFETY: err comes from the shim.
    unsafe { check(status, err) }?;
    Ok(answer)
}

/// `toolrail_grammar_loads` in this process.
/// `toolrail_trigger_search`: the request and the answer as JSON text.
pub(crate) fn native_trigger_search(request: &str) -> Result<String, TemplateError> {
    let request = c_string(request, "the trigger search request")?;
    let mut out = std::ptr::null_mut();
    let mut err = std::ptr::null_mut();
    // SAFETY: valid C string and out-pointers.
    let status = unsafe { ffi::toolrail_trigger_search(request.as_ptr(), &mut out, &mut err) };
    // SAFETY: err and out come from the shim.
    unsafe { check(status, err) }?;
    // SAFETY: out is the shim's string, set on success.
    Ok(unsafe { take_string(out) })
}

pub(crate) fn native_grammar_loads(grammar: &str) -> Result<bool, TemplateError> {
    let text = c_string(grammar, "the grammar")?;
    let mut ok: c_int = 0;
    let mut err = std::ptr::null_mut();
    // SAFETY: valid C string and out-pointers.
    let status = unsafe { ffi::toolrail_grammar_loads(text.as_ptr(), &mut ok, &mut err) };
    // SAFETY: err comes from the shim.
    unsafe { check(status, err) }?;
    Ok(ok != 0)
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Native").finish_non_exhaustive()
    }
}
