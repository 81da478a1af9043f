//! UTF-8 decoding with a partial sequence carried between feeds, as llama.cpp decodes token
//! pieces (`decode_utf8` with `llama_partial_utf8`): lenient about overlong forms, strict about
//! continuation bytes.

/// A UTF-8 sequence cut between two feeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PartialUtf8 {
    /// Bits decoded so far.
    pub value: u32,
    /// Continuation bytes still expected; 0 when none is pending, -1 after an invalid byte.
    pub n_remain: i8,
}

impl PartialUtf8 {
    /// True when no sequence is pending and none was invalid.
    pub fn is_complete(self) -> bool {
        self.n_remain == 0
    }

    /// True after an invalid byte.
    pub fn is_invalid(self) -> bool {
        self.n_remain < 0
    }
}

/// What one byte did to the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utf8Step {
    /// A whole code point is ready.
    Char(u32),
    /// More bytes are needed.
    Pending(PartialUtf8),
    /// The byte cannot appear here.
    Invalid,
}

const LEAD_LENGTH: [i8; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4];

/// Feeds one byte to the decoder in state `partial`.
#[inline]
pub fn step(partial: PartialUtf8, byte: u8) -> Utf8Step {
    if partial.n_remain < 0 {
        return Utf8Step::Invalid;
    }
    if partial.n_remain > 0 {
        if byte >> 6 != 2 {
            return Utf8Step::Invalid;
        }
        let value = (partial.value << 6) + u32::from(byte & 0x3F);
        let n_remain = partial.n_remain - 1;
        return if n_remain == 0 {
            Utf8Step::Char(value)
        } else {
            Utf8Step::Pending(PartialUtf8 { value, n_remain })
        };
    }
    let n_remain = LEAD_LENGTH[usize::from(byte >> 4)] - 1;
    match n_remain {
        n if n < 0 => Utf8Step::Invalid,
        0 => Utf8Step::Char(u32::from(byte)),
        n => {
            let mask = (1u8 << (7 - n)) - 1;
            Utf8Step::Pending(PartialUtf8 {
                value: u32::from(byte & mask),
                n_remain: n,
            })
        }
    }
}

/// Decodes `bytes` after `partial` as llama.cpp's `decode_utf8` does: the complete code points
/// and the partial sequence left at the end (`n_remain == -1` and no code points if invalid).
pub fn decode(bytes: &[u8], partial: PartialUtf8) -> (Vec<u32>, PartialUtf8) {
    let mut out = Vec::with_capacity(bytes.len());
    let mut state = partial;
    for &b in bytes {
        // llama.cpp stops at a NUL byte (C string).
        if b == 0 {
            break;
        }
        match step(state, b) {
            Utf8Step::Char(c) => {
                out.push(c);
                state = PartialUtf8::default();
            }
            Utf8Step::Pending(p) => state = p,
            Utf8Step::Invalid => {
                return (
                    Vec::new(),
                    PartialUtf8 {
                        value: 0,
                        n_remain: -1,
                    },
                );
            }
        }
    }
    (out, state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_partial_sequences() {
        let euro = "€".as_bytes(); // E2 82 AC
        let (cps, p) = decode(&euro[..1], PartialUtf8::default());
        assert!(cps.is_empty() && p.n_remain == 2);
        let (cps, p) = decode(&euro[1..], p);
        assert_eq!(cps, vec![0x20AC]);
        assert!(p.is_complete());
        let (cps, p) = decode(&[0x80], PartialUtf8::default());
        assert!(cps.is_empty() && p.is_invalid());
    }
}
