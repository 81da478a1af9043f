//! Fuzz target over extraction (free text → tool calls): every span reported must lie inside
//! the text on character boundaries. Nothing may panic, abort, overflow the stack or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolrail_tools::extract::extract_calls;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let extraction = extract_calls(&text);
    let _ = extraction.tool_calls();
    let _ = serde_json::to_string(&extraction);
});
