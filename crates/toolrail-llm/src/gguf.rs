//! A GGUF header reader of our own, run before a file is handed to llama.cpp.
//!
//! llama.cpp is robust against most bad files, but not designed for hostile ones, and its
//! failures arrive as a null pointer plus log lines. Reading the header here first lets toolrail
//! say precisely what is wrong — not a GGUF file, an unsupported version, a header or tensor data
//! cut short — and gives the metadata (architecture, name, context length, chat template) without
//! loading any weights.
//!
//! Layout (little-endian): magic `GGUF`, version `u32`, tensor count `u64`, key/value count
//! `u64`, the key/value pairs, the tensor descriptions (name, dimensions, type, offset), then the
//! tensor data at the next multiple of `general.alignment` (default 32).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read};
use std::path::{Path, PathBuf};

use super::error::LlmError;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// Alignment of the tensor data when `general.alignment` is absent.
const DEFAULT_ALIGNMENT: u64 = 32;

/// Longest string accepted in a header (keys, names, values): far above any real chat template.
const MAX_STRING: u64 = 64 << 20;

/// Most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// A scalar or string metadata value (arrays are kept as their element type and length only).
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// Any unsigned integer type.
    Uint(u64),
    /// Any signed integer type.
    Int(i64),
    /// `f32` or `f64`.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string (lossily decoded if it is not UTF-8).
    Str(String),
    /// An array: the GGUF type of its elements and its length.
    Array {
        /// GGUF value type code of the elements.
        element_type: u32,
        /// Number of elements.
        len: u64,
    },
}

impl GgufValue {
    /// The value as an unsigned integer, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::Uint(v) => Some(v),
            GgufValue::Int(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// What the header of a GGUF file says.
#[derive(Clone, Debug)]
pub struct GgufHeader {
    /// GGUF version (2 or 3).
    pub version: u32,
    /// Number of tensors.
    pub tensor_count: u64,
    /// Metadata: every key with its scalar value (arrays summarised).
    pub metadata: BTreeMap<String, GgufValue>,
    /// Where the metadata ends (the first tensor description starts).
    pub metadata_end: u64,
    /// Where the tensor descriptions end (padding to the alignment follows).
    pub tensor_infos_end: u64,
    /// Alignment of the tensor data (`general.alignment`, else 32).
    pub alignment: u64,
    /// Where the tensor data starts.
    pub data_offset: u64,
    /// The smallest file size that holds every tensor's data.
    pub required_size: u64,
    /// The file's actual size.
    pub file_size: u64,
}

impl GgufHeader {
    /// Reads and checks the header of `path`, including that the file is long enough for every
    /// tensor it describes.
    pub fn read(path: &Path) -> Result<GgufHeader, LlmError> {
        let file = File::open(path).map_err(|source| match source.kind() {
            ErrorKind::NotFound => LlmError::NotFound {
                path: path.to_path_buf(),
            },
            _ => LlmError::Io {
                path: path.to_path_buf(),
                source,
            },
        })?;
        let file_size = file
            .metadata()
            .map_err(|source| LlmError::Io {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        let mut reader = Reader {
            inner: BufReader::with_capacity(1 << 16, file),
            pos: 0,
            size: file_size,
            path: path.to_path_buf(),
        };
        let header = reader.header()?;
        if header.required_size > file_size {
            return Err(LlmError::Truncated {
                path: path.to_path_buf(),
                size: file_size,
                detail: format!(
                    "its {} tensors need {} bytes",
                    header.tensor_count, header.required_size
                ),
            });
        }
        Ok(header)
    }

    /// `general.architecture`, if present.
    pub fn architecture(&self) -> Option<&str> {
        self.metadata
            .get("general.architecture")
            .and_then(GgufValue::as_str)
    }

    /// A string metadata value.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).and_then(GgufValue::as_str)
    }

    /// An integer metadata value.
    pub fn uint(&self, key: &str) -> Option<u64> {
        self.metadata.get(key).and_then(GgufValue::as_u64)
    }
}

/// Writes a copy of the GGUF at `from` to `to` with one more string metadata entry, e.g. a chat
/// template (`tokenizer.chat_template`) to run a model under another template. The metadata
/// gains the entry at its end, the tensor descriptions follow unchanged, and the tensor data
/// moves to the next aligned offset (tensor offsets are relative to the data, so they stay
/// valid). A key the file already has is an error.
pub fn copy_with_string(from: &Path, to: &Path, key: &str, value: &str) -> Result<(), LlmError> {
    let header = GgufHeader::read(from)?;
    if header.metadata.contains_key(key) {
        return Err(LlmError::Corrupt {
            path: from.to_path_buf(),
            reason: format!("it already has the metadata key '{key}'"),
        });
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LlmError::Io { path, source }
    };
    let bytes = std::fs::read(from).map_err(io(from))?;
    let (Ok(metadata_end), Ok(infos_end), Ok(data_start)) = (
        usize::try_from(header.metadata_end),
        usize::try_from(header.tensor_infos_end),
        usize::try_from(header.data_offset),
    ) else {
        return Err(LlmError::Corrupt {
            path: from.to_path_buf(),
            reason: "its header does not fit in memory".into(),
        });
    };
    let (Some(kv_count), Some(data)) = (bytes.get(16..24), bytes.get(data_start..)) else {
        return Err(LlmError::Truncated {
            path: from.to_path_buf(),
            size: header.file_size,
            detail: "it changed while it was read".into(),
        });
    };
    let mut kv = [0u8; 8];
    kv.copy_from_slice(kv_count);
    let alignment = usize::try_from(header.alignment).unwrap_or(32);
    let mut out = Vec::with_capacity(bytes.len() + key.len() + value.len() + 64 + alignment);
    out.extend_from_slice(&bytes[..16]);
    out.extend_from_slice(&(u64::from_le_bytes(kv) + 1).to_le_bytes());
    out.extend_from_slice(&bytes[24..metadata_end]);
    out.extend_from_slice(&(key.len() as u64).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&8u32.to_le_bytes());
    out.extend_from_slice(&(value.len() as u64).to_le_bytes());
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&bytes[metadata_end..infos_end]);
    out.resize(out.len().next_multiple_of(alignment), 0);
    out.extend_from_slice(data);
    std::fs::write(to, out).map_err(io(to))
}

/// Bytes per block and elements per block of a ggml tensor type, from the linked ggml.
fn type_layout(ty: u32) -> Option<(u64, u64)> {
    if ty >= llama_cpp_sys_2::GGML_TYPE_COUNT {
        return None;
    }
    // SAFETY: `ty` is below GGML_TYPE_COUNT, so both functions index ggml's type table in
    // bounds; they only read that static table.
    let (bytes, block) = unsafe {
        (
            llama_cpp_sys_2::ggml_type_size(ty),
            llama_cpp_sys_2::ggml_blck_size(ty),
        )
    };
    let block = u64::try_from(block).ok().filter(|b| *b > 0)?;
    let bytes = u64::try_from(bytes).ok().filter(|b| *b > 0)?;
    Some((bytes, block))
}

/// A reader that counts its position and turns every failure into an [`LlmError`].
struct Reader {
    inner: BufReader<File>,
    pos: u64,
    size: u64,
    path: PathBuf,
}

impl Reader {
    fn truncated(&self, what: &str) -> LlmError {
        LlmError::Truncated {
            path: self.path.clone(),
            size: self.size,
            detail: format!("it ends inside its header, at byte {} ({what})", self.pos),
        }
    }

    fn corrupt(&self, reason: String) -> LlmError {
        LlmError::Corrupt {
            path: self.path.clone(),
            reason: format!("{reason} (at byte {})", self.pos),
        }
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], LlmError> {
        let mut buf = [0u8; N];
        match self.inner.read_exact(&mut buf) {
            Ok(()) => {
                self.pos += N as u64;
                Ok(buf)
            }
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(self.truncated(what)),
            Err(source) => Err(LlmError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32, LlmError> {
        Ok(u32::from_le_bytes(self.bytes::<4>(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, LlmError> {
        Ok(u64::from_le_bytes(self.bytes::<8>(what)?))
    }

    /// Skips `n` bytes that must lie inside the file.
    fn skip(&mut self, n: u64, what: &str) -> Result<(), LlmError> {
        if n > self.size.saturating_sub(self.pos) {
            // Read what is there so the position in the message is where the file ends.
            self.pos = self.size;
            return Err(self.truncated(what));
        }
        let copied = std::io::copy(&mut (&mut self.inner).take(n), &mut std::io::sink()).map_err(
            |source| LlmError::Io {
                path: self.path.clone(),
                source,
            },
        )?;
        self.pos += copied;
        if copied < n {
            return Err(self.truncated(what));
        }
        Ok(())
    }

    fn string(&mut self, what: &str) -> Result<String, LlmError> {
        let len = self.u64(what)?;
        if len > MAX_STRING {
            return Err(self.corrupt(format!("{what}: a string of {len} bytes")));
        }
        if len > self.size.saturating_sub(self.pos) {
            self.pos = self.size;
            return Err(self.truncated(what));
        }
        let mut buf = vec![0u8; len as usize];
        match self.inner.read_exact(&mut buf) {
            Ok(()) => self.pos += len,
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Err(self.truncated(what)),
            Err(source) => {
                return Err(LlmError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        }
        Ok(String::from_utf8(buf)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
    }

    /// A value of GGUF type `ty` (arrays are skipped over and summarised).
    fn value(&mut self, ty: u32, key: &str) -> Result<GgufValue, LlmError> {
        Ok(match ty {
            0 => GgufValue::Uint(u64::from(self.bytes::<1>(key)?[0])),
            1 => GgufValue::Int(i64::from(i8::from_le_bytes(self.bytes::<1>(key)?))),
            2 => GgufValue::Uint(u64::from(u16::from_le_bytes(self.bytes::<2>(key)?))),
            3 => GgufValue::Int(i64::from(i16::from_le_bytes(self.bytes::<2>(key)?))),
            4 => GgufValue::Uint(u64::from(self.u32(key)?)),
            5 => GgufValue::Int(i64::from(i32::from_le_bytes(self.bytes::<4>(key)?))),
            6 => GgufValue::Float(f64::from(f32::from_le_bytes(self.bytes::<4>(key)?))),
            7 => GgufValue::Bool(self.bytes::<1>(key)?[0] != 0),
            8 => GgufValue::Str(self.string(key)?),
            9 => {
                let element_type = self.u32(key)?;
                let len = self.u64(key)?;
                self.skip_array(element_type, len, key)?;
                GgufValue::Array { element_type, len }
            }
            10 => GgufValue::Uint(self.u64(key)?),
            11 => GgufValue::Int(i64::from_le_bytes(self.bytes::<8>(key)?)),
            12 => GgufValue::Float(f64::from_le_bytes(self.bytes::<8>(key)?)),
            other => {
                return Err(self.corrupt(format!("key '{key}' has unknown value type {other}")));
            }
        })
    }

    fn skip_array(&mut self, element_type: u32, len: u64, key: &str) -> Result<(), LlmError> {
        let fixed = match element_type {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        };
        if let Some(width) = fixed {
            let total = len
                .checked_mul(width)
                .ok_or_else(|| self.corrupt(format!("key '{key}': an array of {len} elements")))?;
            return self.skip(total, key);
        }
        match element_type {
            8 => {
                // Every string takes at least its 8-byte length: bound the count by the file.
                if len > self.size.saturating_sub(self.pos) / 8 {
                    self.pos = self.size;
                    return Err(self.truncated(key));
                }
                for _ in 0..len {
                    let n = self.u64(key)?;
                    if n > MAX_STRING {
                        return Err(self.corrupt(format!("key '{key}': a string of {n} bytes")));
                    }
                    self.skip(n, key)?;
                }
                Ok(())
            }
            9 => Err(self.corrupt(format!("key '{key}': nested arrays are not allowed"))),
            other => Err(self.corrupt(format!("key '{key}': unknown array element type {other}"))),
        }
    }

    fn header(&mut self) -> Result<GgufHeader, LlmError> {
        let mut magic = Vec::with_capacity(4);
        (&mut self.inner)
            .take(4)
            .read_to_end(&mut magic)
            .map_err(|source| LlmError::Io {
                path: self.path.clone(),
                source,
            })?;
        if magic != MAGIC {
            return Err(LlmError::NotGguf {
                path: self.path.clone(),
                found: magic,
            });
        }
        self.pos = 4;
        let version = self.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(LlmError::UnsupportedVersion {
                path: self.path.clone(),
                version,
            });
        }
        let tensor_count = self.u64("the tensor count")?;
        let kv_count = self.u64("the metadata count")?;
        // Each key/value pair takes at least 12 bytes, each tensor description at least 24.
        if kv_count > self.size / 12 || tensor_count > self.size / 24 {
            return Err(self.corrupt(format!(
                "{kv_count} metadata entries and {tensor_count} tensors cannot fit in {} bytes",
                self.size
            )));
        }

        let mut metadata = BTreeMap::new();
        for i in 0..kv_count {
            let key = self.string(&format!("metadata key #{i}"))?;
            let ty = self.u32(&key)?;
            let value = self.value(ty, &key)?;
            metadata.insert(key, value);
        }

        let metadata_end = self.pos;
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(GgufValue::Uint(a)) if a.is_power_of_two() => *a,
            Some(other) => {
                return Err(self.corrupt(format!("general.alignment is {other:?}")));
            }
        };

        let mut data_size = 0u64;
        for i in 0..tensor_count {
            let name = self.string(&format!("tensor #{i}'s name"))?;
            let n_dims = self.u32(&name)?;
            if n_dims > MAX_DIMS {
                return Err(self.corrupt(format!("tensor '{name}' has {n_dims} dimensions")));
            }
            let mut elements = 1u64;
            let mut first = 1u64;
            for d in 0..n_dims {
                let ne = self.u64(&name)?;
                if d == 0 {
                    first = ne;
                }
                elements = elements
                    .checked_mul(ne)
                    .ok_or_else(|| self.corrupt(format!("tensor '{name}' is impossibly large")))?;
            }
            let ty = self.u32(&name)?;
            let offset = self.u64(&name)?;
            let (bytes, block) = type_layout(ty)
                .ok_or_else(|| self.corrupt(format!("tensor '{name}' has unknown type {ty}")))?;
            if !first.is_multiple_of(block) {
                return Err(self.corrupt(format!(
                    "tensor '{name}': its first dimension {first} is not a multiple of its type's block size {block}"
                )));
            }
            let size = (elements / block)
                .checked_mul(bytes)
                .and_then(|s| s.checked_add(offset))
                .ok_or_else(|| self.corrupt(format!("tensor '{name}' is impossibly large")))?;
            data_size = data_size.max(size);
        }
        let tensor_infos_end = self.pos;
        let data_offset = self.pos.div_ceil(alignment) * alignment;
        Ok(GgufHeader {
            version,
            tensor_count,
            metadata,
            metadata_end,
            tensor_infos_end,
            alignment,
            data_offset,
            required_size: data_offset.saturating_add(data_size),
            file_size: self.size,
        })
    }
}
