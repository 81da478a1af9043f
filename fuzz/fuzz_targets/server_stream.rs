//! Fuzz target over the llama-server stream reader: the bytes are a server's event stream, read
//! event by event as toolrail reads one (keep-alive pings, `[DONE]`, events split over lines),
//! each data event read as a `/completion` chunk (its token and echoed grammar), a chat chunk
//! and a chat build. Nothing may panic, abort, allocate without bound or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolrail_llm::server::api::{ChatBuild, ChatChunk, Chunk};
use toolrail_llm::server::sse::{SseEvent, SseReader};

fuzz_target!(|data: &[u8]| {
    let mut events = SseReader::new(data);
    // an event takes at least one byte, so the stream ends within its length
    for _ in 0..=data.len() {
        match events.next_event() {
            Ok(Some(SseEvent::Data(text))) => {
                if let Ok(chunk) = serde_json::from_str::<Chunk>(&text) {
                    let _ = chunk.token();
                    let _ = chunk.grammar();
                }
                let _ = serde_json::from_str::<ChatChunk>(&text);
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
                    let _ = ChatBuild::from_reply(&value);
                }
            }
            Ok(Some(SseEvent::Ping | SseEvent::Done)) => {}
            Ok(None) | Err(_) => break,
        }
    }
});
