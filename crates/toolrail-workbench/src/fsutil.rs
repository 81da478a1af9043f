//! File writing shared by every save (`grammar -o`, transcripts, the workspace, the app's
//! exports): atomic, so nothing a user made is ever left half-written, and safe, so a save can
//! never clobber something it was not asked to write.
//!
//! [`write_atomic`]:
//! - follows a symbolic link and replaces the file it points to, next to that file (the link
//!   stays a link);
//! - writes through to a character device or a FIFO (`-o /dev/null`, `-o /dev/stdout`) instead
//!   of replacing it with a regular file, and refuses a directory or any other kind of file;
//! - writes a temporary file with an unpredictable name, created exclusively (never through a
//!   link planted in its place), flushed and synced, with the permissions (and, where the
//!   platform allows, the owner) of the file it replaces; then renames it over the target and
//!   syncs the folder;
//! - removes the temporary file when anything fails, and names the file in the error.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How many symbolic links are followed before giving up (as the kernel does).
const MAX_LINKS: usize = 40;

/// How many temporary names are tried before giving up.
const TEMP_ATTEMPTS: usize = 16;

/// Writes `bytes` to `path` atomically (see the module docs for what "safely" covers).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let target = resolve_links(path)?;
    let existing = match std::fs::metadata(&target) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(with_path(e, &target)),
    };
    if let Some(meta) = &existing {
        match kind_of(meta) {
            Kind::Regular => {}
            Kind::WriteThrough => return write_through(&target, bytes),
            Kind::Other(what) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is {what}, not a file: toolrail writes only regular files (or through to a device or FIFO)",
                        target.display()
                    ),
                ));
            }
        }
    }
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_owned());
    let (tmp, mut file) = create_temp(&dir, &name)?;
    let result = (|| {
        file.write_all(bytes)?;
        if let Some(meta) = &existing {
            file.set_permissions(meta.permissions())?;
            keep_owner(&file, meta);
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &target)?;
        sync_dir(&dir);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| with_path(e, &target))
}

/// An error that names the file it is about.
fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// `path` with every symbolic link along its last component followed (a dangling link gives the
/// path it points to, which is then created).
fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current).map_err(|e| with_path(e, &current))?;
                current = match current.parent() {
                    Some(parent) if link.is_relative() => parent.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(with_path(e, &current)),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{}: more than {MAX_LINKS} symbolic links in a row",
            path.display()
        ),
    ))
}

/// What to do with an existing target.
enum Kind {
    /// Replace it atomically.
    Regular,
    /// Write into it in place (a character device or a FIFO).
    WriteThrough,
    /// Refuse, naming what it is.
    Other(&'static str),
}

#[cfg(unix)]
fn kind_of(meta: &std::fs::Metadata) -> Kind {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        Kind::Regular
    } else if t.is_char_device() || t.is_fifo() {
        Kind::WriteThrough
    } else if t.is_dir() {
        Kind::Other("a directory")
    } else if t.is_block_device() {
        Kind::Other("a block device")
    } else if t.is_socket() {
        Kind::Other("a socket")
    } else {
        Kind::Other("not a regular file")
    }
}

#[cfg(not(unix))]
fn kind_of(meta: &std::fs::Metadata) -> Kind {
    if meta.is_file() {
        Kind::Regular
    } else if meta.is_dir() {
        Kind::Other("a directory")
    } else {
        Kind::Other("not a regular file")
    }
}

/// Writes into an existing device or FIFO without creating, truncating or replacing anything.
fn write_through(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| with_path(e, path))?;
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .map_err(|e| with_path(e, path))
}

/// Creates `.<name>.<random>.tmp` in `dir`, exclusively: an existing file or link of that name
/// makes it try another name, never open what is there.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for attempt in 0..TEMP_ATTEMPTS {
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", random_u64(attempt)));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(with_path(e, &tmp)),
        }
    }
    Err(last.map_or_else(
        || io::Error::other("no temporary file name was free"),
        |e| with_path(e, dir),
    ))
}

/// A number no other process can predict: the standard library's per-process random hash keys,
/// mixed with the time, the process id and `salt`.
fn random_u64(salt: usize) -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_usize(salt);
    hasher.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(t.as_nanos());
    }
    hasher.finish()
}

/// Gives the new file the owner and group of the one it replaces (possible only as root; a
/// failure leaves the writer as the owner, which is what an ordinary save does anyway).
#[cfg(unix)]
fn keep_owner(file: &File, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), Some(meta.gid()));
}

#[cfg(not(unix))]
fn keep_owner(_file: &File, _meta: &std::fs::Metadata) {}

/// Makes the rename durable (a folder can be synced on Unix only; elsewhere this does nothing).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(names(dir.path()), ["out.txt"], "no temporary file left");
    }

    #[test]
    fn a_directory_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(dir.path(), b"x").unwrap_err();
        assert!(
            err.to_string().contains("is a directory, not a file"),
            "{err}"
        );
        assert!(err.to_string().contains(&dir.path().display().to_string()));
    }

    #[test]
    fn a_missing_folder_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no").join("such.gbnf");
        let err = write_atomic(&path, b"x").unwrap_err();
        assert!(err.to_string().contains("no"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        let real = dir.path().join("shared/real.gbnf");
        std::fs::write(&real, "OLD").unwrap();
        let link = dir.path().join("out.gbnf");
        std::os::unix::fs::symlink("shared/real.gbnf", &link).unwrap();
        write_atomic(&link, b"NEW").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&real).unwrap(), b"NEW");
        assert_eq!(names(&dir.path().join("shared")), ["real.gbnf"]);
        // A dangling link creates the file it points to.
        let dangling = dir.path().join("later.gbnf");
        std::os::unix::fs::symlink("shared/new.gbnf", &dangling).unwrap();
        write_atomic(&dangling, b"N").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("shared/new.gbnf")).unwrap(),
            b"N"
        );
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.gbnf");
        std::fs::write(&path, "secret").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&path, b"new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_old_temporary_name_is_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim.txt");
        std::fs::write(&victim, "VICTIM").unwrap();
        let planted = dir
            .path()
            .join(format!(".o.gbnf.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_atomic(&dir.path().join("o.gbnf"), b"grammar").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"VICTIM");
        assert_eq!(
            std::fs::read(dir.path().join("o.gbnf")).unwrap(),
            b"grammar"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_written_through_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        // A private copy of /dev/null (needs root to make; skipped otherwise).
        let dir = tempfile::tempdir().unwrap();
        let null = dir.path().join("null");
        let made = std::process::Command::new("mknod")
            .arg(&null)
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|s| s.success());
        if !made {
            eprintln!("skipped: mknod needs root");
            return;
        }
        write_atomic(&null, b"discarded").unwrap();
        assert!(
            std::fs::metadata(&null)
                .unwrap()
                .file_type()
                .is_char_device()
        );
        assert_eq!(names(dir.path()), ["null"]);
    }
}
