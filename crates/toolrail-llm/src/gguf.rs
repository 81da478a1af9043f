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
//!
//! # Metadata checks
//!
//! Some values parse fine but make llama.cpp abort the process (a `GGML_ASSERT`) or make
//! llama-cpp-2 panic, at load or at the first decode. They are refused here, as
//! [`LlmError::BadMetadata`] naming the key (`ARCH` is `general.architecture`):
//!
//! - `tokenizer.ggml.tokens`: no two tokens with the same text (an empty token counts as
//!   `[EMPTY_<id>]`, as llama.cpp renames it), else llama.cpp's vocabulary assertion aborts;
//! - `general.alignment`: a 32-bit power of two and a multiple of 32 (ggml's tensor alignment;
//!   a smaller one leaves tensor data unaligned and ggml aborts);
//! - `ARCH.block_count`: 1 to 512 (llama.cpp's `LLAMA_MAX_LAYERS`);
//! - `ARCH.nextn_predict_layers`: at most `ARCH.block_count`;
//! - `ARCH.context_length`: 1 to 2³¹−1 (llama.cpp reports it as a 32-bit signed number);
//! - `ARCH.expert_count`: at most 1024 (`LLAMA_MAX_EXPERTS`); `ARCH.expert_used_count` at most
//!   `ARCH.expert_count`, and more than 0 when there are experts;
//! - every floating-point value under `ARCH.` finite (no NaN or infinity), and every
//!   `…epsilon` 0 or more (ggml asserts `eps >= 0` in its norms).

// ggml's type sizes are read through its C API (one FFI call, no pointer kept).
#![allow(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom, Write};
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

/// ggml's `TENSOR_ALIGNMENT`: tensor data must start at a multiple of it.
const TENSOR_ALIGNMENT: u64 = 32;

/// llama.cpp's `LLAMA_MAX_LAYERS`.
const MAX_LAYERS: u64 = 512;

/// llama.cpp's `LLAMA_MAX_EXPERTS`.
const MAX_EXPERTS: u64 = 1024;

/// The key of the vocabulary's token texts.
const TOKENS_KEY: &str = "tokenizer.ggml.tokens";

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
    /// Where each metadata entry (key, type and value) lies in the file: start and end byte.
    pub metadata_spans: BTreeMap<String, (u64, u64)>,
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
        // Look before opening: opening a FIFO would wait for a writer forever.
        match std::fs::metadata(path) {
            Ok(meta) if !meta.is_file() => {
                return Err(LlmError::NotAFile {
                    path: path.to_path_buf(),
                    kind: file_kind(&meta.file_type()),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(LlmError::NotFound {
                    path: path.to_path_buf(),
                });
            }
            Err(source) => {
                return Err(LlmError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
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
        check_metadata(path, &header)?;
        if header.tensor_count == 0 {
            return Err(LlmError::NoTensors {
                path: path.to_path_buf(),
            });
        }
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
/// template (`tokenizer.chat_template`) to run a model under another template. A key the file
/// already has is an error (see [`copy_with_value`] to replace one).
pub fn copy_with_string(from: &Path, to: &Path, key: &str, value: &str) -> Result<(), LlmError> {
    let header = GgufHeader::read(from)?;
    if header.metadata.contains_key(key) {
        return Err(LlmError::Corrupt {
            path: from.to_path_buf(),
            reason: format!("it already has the metadata key '{key}'"),
        });
    }
    copy_with_value(from, to, key, &NewValue::Str(value.as_bytes().to_vec()))
}

/// A metadata value to write with [`copy_with_value`], with its GGUF type.
#[derive(Clone, Debug, PartialEq)]
pub enum NewValue {
    /// GGUF `uint32`.
    U32(u32),
    /// GGUF `uint64`.
    U64(u64),
    /// GGUF `float32`.
    F32(f32),
    /// GGUF `string` (raw bytes: token texts need not be UTF-8).
    Str(Vec<u8>),
    /// GGUF array of `string`.
    StrArray(Vec<Vec<u8>>),
}

impl NewValue {
    /// The GGUF type code and the encoded value.
    fn encode(&self) -> (u32, Vec<u8>) {
        let string = |out: &mut Vec<u8>, s: &[u8]| {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        };
        match self {
            NewValue::U32(v) => (4, v.to_le_bytes().to_vec()),
            NewValue::U64(v) => (10, v.to_le_bytes().to_vec()),
            NewValue::F32(v) => (6, v.to_le_bytes().to_vec()),
            NewValue::Str(s) => {
                let mut out = Vec::with_capacity(s.len() + 8);
                string(&mut out, s);
                (8, out)
            }
            NewValue::StrArray(items) => {
                let mut out = Vec::new();
                out.extend_from_slice(&8u32.to_le_bytes());
                out.extend_from_slice(&(items.len() as u64).to_le_bytes());
                for item in items {
                    string(&mut out, item);
                }
                (9, out)
            }
        }
    }
}

/// Writes a copy of the GGUF at `from` to `to` with the metadata entry `key` set to `value`:
/// replaced where it is, or added at the end of the metadata. The tensor descriptions follow
/// unchanged and the tensor data moves to the next aligned offset (tensor offsets are relative
/// to the data, so they stay valid). Used to run a model under another chat template, and by
/// the tests to craft hostile variants of a real model. `from` must pass [`GgufHeader::read`];
/// the copy is not checked (that is the point of the tests).
pub fn copy_with_value(
    from: &Path,
    to: &Path,
    key: &str,
    value: &NewValue,
) -> Result<(), LlmError> {
    let header = GgufHeader::read(from)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LlmError::Io { path, source }
    };
    let mut file = File::open(from).map_err(io(from))?;
    let mut head = Vec::new();
    (&mut file)
        .take(header.tensor_infos_end)
        .read_to_end(&mut head)
        .map_err(io(from))?;
    let changed = || LlmError::Truncated {
        path: from.to_path_buf(),
        size: header.file_size,
        detail: "it changed while it was read".into(),
    };
    let at = |offset: u64| usize::try_from(offset).map_err(|_| changed());
    if head.len() != at(header.tensor_infos_end)? {
        return Err(changed());
    }
    let (ty, encoded) = value.encode();
    let mut entry = Vec::with_capacity(key.len() + encoded.len() + 12);
    entry.extend_from_slice(&(key.len() as u64).to_le_bytes());
    entry.extend_from_slice(key.as_bytes());
    entry.extend_from_slice(&ty.to_le_bytes());
    entry.extend_from_slice(&encoded);

    let kv_count = u64::from_le_bytes(head[16..24].try_into().map_err(|_| changed())?);
    let mut out = Vec::with_capacity(head.len() + entry.len() + 64);
    out.extend_from_slice(&head[..16]);
    let metadata_end = at(header.metadata_end)?;
    match header.metadata_spans.get(key) {
        Some(&(start, end)) => {
            out.extend_from_slice(&kv_count.to_le_bytes());
            out.extend_from_slice(&head[24..at(start)?]);
            out.extend_from_slice(&entry);
            out.extend_from_slice(&head[at(end)?..metadata_end]);
        }
        None => {
            out.extend_from_slice(&(kv_count + 1).to_le_bytes());
            out.extend_from_slice(&head[24..metadata_end]);
            out.extend_from_slice(&entry);
        }
    }
    out.extend_from_slice(&head[metadata_end..]);
    // The new alignment, if it is the value changed, else the file's.
    let alignment = match (key, value) {
        ("general.alignment", NewValue::U32(a)) if a.is_power_of_two() => u64::from(*a),
        _ => header.alignment,
    };
    out.resize(at((out.len() as u64).div_ceil(alignment) * alignment)?, 0);
    file.seek(SeekFrom::Start(header.data_offset))
        .map_err(io(from))?;
    let mut sink = std::io::BufWriter::new(File::create(to).map_err(io(to))?);
    sink.write_all(&out).map_err(io(to))?;
    std::io::copy(&mut file, &mut sink).map_err(io(to))?;
    sink.flush().map_err(io(to))
}

/// The elements of the string-array metadata entry `key` of the GGUF at `path` (raw bytes), or
/// `None` when the file has no such entry or it is not an array of strings.
pub fn string_array(path: &Path, key: &str) -> Result<Option<Vec<Vec<u8>>>, LlmError> {
    let header = GgufHeader::read(path)?;
    let Some(&(start, end)) = header.metadata_spans.get(key) else {
        return Ok(None);
    };
    let io = |source| LlmError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    file.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut entry = Vec::new();
    file.take(end - start).read_to_end(&mut entry).map_err(io)?;
    let mut rest = entry.as_slice();
    let parsed = (|| {
        let key_len = usize::try_from(take_number(&mut rest, 8)?).ok()?;
        take_bytes(&mut rest, key_len)?;
        if take_number(&mut rest, 4)? != 9 || take_number(&mut rest, 4)? != 8 {
            return Some(None);
        }
        let len = take_number(&mut rest, 8)?;
        let mut items = Vec::new();
        for _ in 0..len {
            let n = usize::try_from(take_number(&mut rest, 8)?).ok()?;
            items.push(take_bytes(&mut rest, n)?.to_vec());
        }
        Some(Some(items))
    })();
    parsed.ok_or_else(|| LlmError::Truncated {
        path: path.to_path_buf(),
        size: header.file_size,
        detail: "it changed while it was read".into(),
    })
}

/// The next `n` bytes of `rest`, if there are that many.
fn take_bytes<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (taken, after) = rest.split_at_checked(n)?;
    *rest = after;
    Some(taken)
}

/// The next little-endian unsigned number of `width` bytes (at most 8) of `rest`.
fn take_number(rest: &mut &[u8], width: usize) -> Option<u64> {
    let bytes = take_bytes(rest, width)?;
    let mut buf = [0u8; 8];
    buf.get_mut(..width)?.copy_from_slice(bytes);
    Some(u64::from_le_bytes(buf))
}

/// What a non-regular file is, for a message.
pub fn file_kind(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    "something other than a regular file"
}

/// The checks listed in the module docs, on a header that parsed.
fn check_metadata(path: &Path, header: &GgufHeader) -> Result<(), LlmError> {
    let bad = |key: &str, reason: String| LlmError::BadMetadata {
        path: path.to_path_buf(),
        key: key.to_owned(),
        reason,
    };
    let metadata = &header.metadata;
    if let Some(value) = metadata.get("general.alignment") {
        let fine = matches!(value, GgufValue::Uint(a)
            if *a <= u64::from(u32::MAX) && a.is_power_of_two() && a % TENSOR_ALIGNMENT == 0);
        if !fine {
            return Err(bad(
                "general.alignment",
                format!(
                    "is {}; it must be a power of two and a multiple of {TENSOR_ALIGNMENT} \
                     (ggml's tensor alignment)",
                    show(value)
                ),
            ));
        }
    }
    let Some(arch) = header.architecture() else {
        return Ok(());
    };
    let int_in = |key: String, low: u64, high: u64, why: &str| -> Result<Option<u64>, LlmError> {
        match metadata.get(&key) {
            None => Ok(None),
            Some(value) => match value.as_u64() {
                Some(v) if (low..=high).contains(&v) => Ok(Some(v)),
                _ => Err(bad(
                    &key,
                    format!("is {}; it must be {low} to {high} ({why})", show(value)),
                )),
            },
        }
    };
    let layers = int_in(
        format!("{arch}.block_count"),
        1,
        MAX_LAYERS,
        "llama.cpp's layer limit",
    )?
    .unwrap_or(MAX_LAYERS);
    int_in(
        format!("{arch}.nextn_predict_layers"),
        0,
        layers,
        "no more than the block count",
    )?;
    int_in(
        format!("{arch}.context_length"),
        1,
        i32::MAX as u64,
        "llama.cpp keeps it as a 32-bit signed number",
    )?;
    let experts = int_in(
        format!("{arch}.expert_count"),
        0,
        MAX_EXPERTS,
        "llama.cpp's expert limit",
    )?
    .unwrap_or(0);
    if metadata.contains_key(&format!("{arch}.expert_used_count")) {
        let low = u64::from(experts > 0);
        int_in(
            format!("{arch}.expert_used_count"),
            low,
            experts,
            "at least 1 and at most the expert count when there are experts, else 0",
        )?;
    }
    let prefix = format!("{arch}.");
    for (key, value) in metadata.range(prefix.clone()..) {
        if !key.starts_with(&prefix) {
            break;
        }
        if let GgufValue::Float(f) = value {
            if !f.is_finite() {
                return Err(bad(key, format!("is {f}; it must be a finite number")));
            }
            if key.ends_with("epsilon") && *f < 0.0 {
                return Err(bad(
                    key,
                    format!("is {f}; an epsilon must be 0 or more (ggml asserts it)"),
                ));
            }
        }
    }
    Ok(())
}

/// A metadata value as a message shows it.
fn show(value: &GgufValue) -> String {
    match value {
        GgufValue::Uint(v) => v.to_string(),
        GgufValue::Int(v) => v.to_string(),
        GgufValue::Float(v) => v.to_string(),
        GgufValue::Bool(v) => v.to_string(),
        GgufValue::Str(s) => format!("the string {s:?}"),
        GgufValue::Array { len, .. } => format!("an array of {len} elements"),
    }
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
                if key == TOKENS_KEY {
                    return self.unique_tokens(len);
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

    /// Reads the vocabulary's `len` token texts, refusing two with the same text: llama.cpp maps
    /// text to id and aborts when the map is smaller than the vocabulary. An empty token counts
    /// as `[EMPTY_<id>]`, the name llama.cpp gives it.
    fn unique_tokens(&mut self, len: u64) -> Result<(), LlmError> {
        let mut seen: HashMap<Vec<u8>, u64> = HashMap::new();
        for id in 0..len {
            let n = self.u64(TOKENS_KEY)?;
            if n > MAX_STRING {
                return Err(self.corrupt(format!("key '{TOKENS_KEY}': a string of {n} bytes")));
            }
            if n > self.size.saturating_sub(self.pos) {
                self.pos = self.size;
                return Err(self.truncated(TOKENS_KEY));
            }
            let mut text = vec![0u8; n as usize];
            match self.inner.read_exact(&mut text) {
                Ok(()) => self.pos += n,
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    return Err(self.truncated(TOKENS_KEY));
                }
                Err(source) => {
                    return Err(LlmError::Io {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
            if text.is_empty() {
                text = format!("[EMPTY_{id}]").into_bytes();
            }
            if let Some(first) = seen.insert(text, id) {
                let text = seen
                    .iter()
                    .find(|(_, v)| **v == id)
                    .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                    .unwrap_or_default();
                return Err(LlmError::BadMetadata {
                    path: self.path.clone(),
                    key: TOKENS_KEY.into(),
                    reason: format!(
                        "has tokens {first} and {id} with the same text {text:?}; llama.cpp \
                         needs every token text once"
                    ),
                });
            }
        }
        Ok(())
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
        let mut metadata_spans = BTreeMap::new();
        for i in 0..kv_count {
            let start = self.pos;
            let key = self.string(&format!("metadata key #{i}"))?;
            let ty = self.u32(&key)?;
            let value = self.value(ty, &key)?;
            metadata_spans.insert(key.clone(), (start, self.pos));
            metadata.insert(key, value);
        }

        let metadata_end = self.pos;
        // A bad alignment is reported by `check_metadata`, naming the key; the default lets
        // the rest of the header be read meanwhile.
        let alignment = match metadata.get("general.alignment") {
            Some(GgufValue::Uint(a)) if a.is_power_of_two() => *a,
            _ => DEFAULT_ALIGNMENT,
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
            metadata_spans,
            metadata_end,
            tensor_infos_end,
            alignment,
            data_offset,
            required_size: data_offset.saturating_add(data_size),
            file_size: self.size,
        })
    }
}
