//! Server-sent events as llama-server writes them: `data: <json>` lines separated by blank
//! lines, `:` comment lines as keep-alive pings, and `data: [DONE]` closing the OpenAI-shaped
//! endpoints. A blocking line reader; no async runtime.

use std::io::BufRead;

/// The longest event toolrail accepts (a token chunk is a few kB; the final chunk echoes the
/// grammar and the prompt): a stream sending more without a blank line is refused, not buffered.
pub const MAX_EVENT_BYTES: usize = 64 << 20;

/// One event of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseEvent {
    /// The `data:` payload (several `data:` lines joined with newlines).
    Data(String),
    /// `data: [DONE]`: the stream is complete.
    Done,
    /// A `:` comment line (llama-server's ping): nothing to do, but the reader woke up.
    Ping,
}

/// Why reading the stream failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The connection failed mid-stream.
    #[error(
        "the server's event stream broke: {0} (the server closed the connection, or the network failed)"
    )]
    Io(#[from] std::io::Error),
    /// One event exceeded [`MAX_EVENT_BYTES`].
    #[error("an event of the stream exceeds {MAX_EVENT_BYTES} bytes")]
    TooLong,
    /// An event's text is not UTF-8.
    #[error("an event of the server's stream is not UTF-8 text (not a llama-server event stream?)")]
    NotUtf8,
}

/// Reads [`SseEvent`]s from a byte stream.
#[derive(Debug)]
pub struct SseReader<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: BufRead> SseReader<R> {
    /// A reader over `reader` (e.g. a response body in a `BufReader`).
    pub fn new(reader: R) -> Self {
        SseReader {
            reader,
            line: Vec::new(),
        }
    }

    /// The next event, or `None` when the stream ended (cleanly or not: the caller decides
    /// whether a final event was seen).
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            let mut limited = std::io::Read::take(&mut self.reader, MAX_EVENT_BYTES as u64 + 1);
            let n = limited.read_until(b'\n', &mut self.line)?;
            if n == 0 {
                return Ok(data.map(SseEvent::Data));
            }
            if self.line.len() > MAX_EVENT_BYTES {
                return Err(SseError::TooLong);
            }
            let line = std::str::from_utf8(&self.line).map_err(|_| SseError::NotUtf8)?;
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                match data.take() {
                    Some(d) if d == "[DONE]" => return Ok(Some(SseEvent::Done)),
                    Some(d) => return Ok(Some(SseEvent::Data(d))),
                    None => continue,
                }
            }
            if line.starts_with(':') {
                if data.is_none() {
                    return Ok(Some(SseEvent::Ping));
                }
                continue;
            }
            if let Some(payload) = line.strip_prefix("data:") {
                let payload = payload.strip_prefix(' ').unwrap_or(payload);
                let joined = match data.take() {
                    Some(mut d) => {
                        d.push('\n');
                        d.push_str(payload);
                        d
                    }
                    None => payload.to_owned(),
                };
                if joined.len() > MAX_EVENT_BYTES {
                    return Err(SseError::TooLong);
                }
                data = Some(joined);
            }
            // other fields (`event:`, `id:`, `retry:`) are not used by llama-server
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: &[u8]) -> Vec<SseEvent> {
        let mut r = SseReader::new(bytes);
        let mut out = Vec::new();
        while let Some(e) = r.next_event().unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn reads_data_pings_and_done() {
        let stream = b"data: {\"a\":1}\n\n:\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
        assert_eq!(
            events(stream),
            vec![
                SseEvent::Data("{\"a\":1}".into()),
                SseEvent::Ping,
                SseEvent::Data("{\"b\":2}".into()),
                SseEvent::Done
            ]
        );
    }

    #[test]
    fn joins_multi_line_data_and_keeps_an_unterminated_last_event() {
        assert_eq!(
            events(b"data: a\ndata: b\n\ndata: c"),
            vec![SseEvent::Data("a\nb".into()), SseEvent::Data("c".into())]
        );
    }

    #[test]
    fn refuses_non_utf8() {
        let mut r = SseReader::new(&b"data: \xff\n\n"[..]);
        assert!(matches!(r.next_event(), Err(SseError::NotUtf8)));
    }
}
