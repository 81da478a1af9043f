//! Reading a file the user named: only a regular file, and only up to a size the caller gives.
//!
//! Opening a FIFO with no writer blocks for ever, and reading a device (`/dev/zero`) never
//! ends, so every file toolrail reads by path goes through here: its type is checked before it
//! is opened (and again on the open handle, in case the path changed in between), and more
//! than the caller's limit is refused rather than read. This is the lowest crate that reads
//! files by path (models files, GGUF headers, benchmark corpora); the workbench and the command
//! line use it too, so there is one rule and one message.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a named file was not read.
#[derive(Debug, thiserror::Error)]
pub enum FileReadError {
    /// The path names something other than a regular file (a FIFO, a directory, a device).
    #[error("cannot read {}: it is {what}, not a regular file", path.display())]
    NotRegular {
        /// The path as given.
        path: PathBuf,
        /// What it is instead, in words ("a FIFO", "a directory", ...).
        what: &'static str,
    },
    /// The file is larger than the caller allows.
    #[error("cannot read {}: it is {size} bytes, more than the {limit} bytes allowed", path.display())]
    TooLarge {
        /// The path as given.
        path: PathBuf,
        /// Its size (or at least this much, when it grew while being read).
        size: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("cannot read {}: it is not UTF-8 (invalid byte at offset {valid_up_to})", path.display())]
    NotUtf8 {
        /// The path as given.
        path: PathBuf,
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The operating system refused (missing file, permissions, ...).
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl FileReadError {
    /// The error as an `std::io::Error` without the path (for callers whose own error type
    /// names the path and holds an `io::Error`): the OS error itself, or one of kind
    /// `InvalidInput` / `FileTooLarge` / `InvalidData` saying what the file is.
    pub fn into_io(self) -> std::io::Error {
        use std::io::{Error, ErrorKind};
        match self {
            FileReadError::Io { source, .. } => source,
            FileReadError::NotRegular { what, .. } => Error::new(
                ErrorKind::InvalidInput,
                format!("it is {what}, not a regular file"),
            ),
            FileReadError::TooLarge { size, limit, .. } => Error::new(
                ErrorKind::FileTooLarge,
                format!("it is {size} bytes, more than the {limit} bytes allowed"),
            ),
            FileReadError::NotUtf8 { valid_up_to, .. } => Error::new(
                ErrorKind::InvalidData,
                format!("it is not UTF-8 (invalid byte at offset {valid_up_to})"),
            ),
        }
    }

    /// True when the file does not exist (callers that treat a missing file as empty).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// What a non-regular file is, in words.
fn kind_of(meta: &Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    "not a regular file"
}

/// Checks `meta` is a regular file of at most `limit` bytes.
fn check(path: &Path, meta: &Metadata, limit: u64) -> Result<(), FileReadError> {
    if !meta.is_file() {
        return Err(FileReadError::NotRegular {
            path: path.to_path_buf(),
            what: kind_of(meta),
        });
    }
    if meta.len() > limit {
        return Err(FileReadError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit,
        });
    }
    Ok(())
}

/// Opens `path` for reading if it is a regular file of at most `limit` bytes (following
/// symbolic links); the type is checked before opening, so a FIFO never blocks.
pub fn open_regular(path: &Path, limit: u64) -> Result<File, FileReadError> {
    let io = |source| FileReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    check(path, &std::fs::metadata(path).map_err(io)?, limit)?;
    let file = File::open(path).map_err(io)?;
    check(path, &file.metadata().map_err(io)?, limit)?;
    Ok(file)
}

/// The bytes of the regular file `path`, at most `limit` of them (see [`open_regular`]).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, FileReadError> {
    let file = open_regular(path, limit)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(FileReadError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// The text of the regular file `path`, at most `limit` bytes of UTF-8 (see [`open_regular`]).
pub fn read_regular_to_string(path: &Path, limit: u64) -> Result<String, FileReadError> {
    String::from_utf8(read_regular(path, limit)?).map_err(|e| FileReadError::NotUtf8 {
        path: path.to_path_buf(),
        valid_up_to: e.utf8_error().valid_up_to(),
    })
}

/// The limit for text files a person writes or exports (tool sets, grammars, schemas, models
/// files, workspaces, corpus files): far above any real one, far below the memory.
pub const MAX_TEXT_FILE_BYTES: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_limited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "hello").unwrap();
        assert_eq!(read_regular_to_string(&path, 5).unwrap(), "hello");
        let err = read_regular(&path, 4).unwrap_err();
        assert!(matches!(
            err,
            FileReadError::TooLarge {
                size: 5,
                limit: 4,
                ..
            }
        ));
        let err = read_regular(dir.path(), 10).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        assert!(
            read_regular(&dir.path().join("missing"), 10)
                .unwrap_err()
                .is_not_found()
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo").arg(&path).status();
        if !status.is_ok_and(|s| s.success()) {
            return;
        }
        let err = read_regular(&path, 10).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        assert!(err.to_string().contains("fifo"), "{err}");
    }
}
