//! Typing a file path instead of using a system file dialog: whether a native dialog can open
//! here at all, the completion of a half-typed path from its folder's entries, and the check of
//! a typed path before it is used.
//!
//! Why: on Linux the file dialogs go through the desktop portal (D-Bus) or `zenity`; on a minimal
//! system, in a container or a remote session neither may exist, and a dialog then silently
//! never opens. The app asks [`native_dialog_unavailable`] first and, when it names a reason,
//! offers a path field with these completions instead.

use std::path::{MAIN_SEPARATOR, Path, PathBuf};

/// How many completions are listed at most (a folder may hold thousands of entries).
pub const MAX_COMPLETIONS: usize = 200;

/// Why no native file dialog can open on this system, or `None` when one can (or may).
///
/// Windows and macOS always have one. Elsewhere a dialog needs either `zenity` on `PATH` or a
/// session D-Bus with the desktop portal's service installed (`org.freedesktop.portal.Desktop`
/// in a `dbus-1/services` folder of `XDG_DATA_DIRS`).
pub fn native_dialog_unavailable() -> Option<String> {
    if cfg!(any(target_os = "windows", target_os = "macos")) {
        return None;
    }
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let zenity = env("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| is_executable_file(&dir.join("zenity")))
    });
    if zenity {
        return None;
    }
    let bus = env("DBUS_SESSION_BUS_ADDRESS").is_some()
        || env("XDG_RUNTIME_DIR").is_some_and(|dir| Path::new(&dir).join("bus").exists());
    let data_dirs = env("XDG_DATA_DIRS")
        .map(|dirs| std::env::split_paths(&dirs).collect::<Vec<_>>())
        .unwrap_or_else(|| {
            vec![
                PathBuf::from("/usr/local/share"),
                PathBuf::from("/usr/share"),
            ]
        });
    let portal = data_dirs.iter().any(|dir| {
        dir.join("dbus-1/services/org.freedesktop.portal.Desktop.service")
            .is_file()
    });
    match (bus, portal) {
        (true, true) => None,
        (false, _) => Some(
            "no system file dialog can open here (no session D-Bus for the desktop portal, and \
             no zenity on PATH): type the path instead"
                .to_owned(),
        ),
        (true, false) => Some(
            "no system file dialog can open here (the desktop portal \
             org.freedesktop.portal.Desktop is not installed, and no zenity on PATH): type the \
             path instead"
                .to_owned(),
        ),
    }
}

fn is_executable_file(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// One entry that completes a typed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The whole path with this entry (a folder ends with the path separator, so that typing
    /// goes on inside it).
    pub path: String,
    /// The entry's name, as listed.
    pub name: String,
    /// True for a folder.
    pub is_dir: bool,
}

/// The entries of the typed path's folder whose names start with its last part (hidden ones
/// only when that part starts with a dot), folders first, then by name; at most
/// [`MAX_COMPLETIONS`]. A relative path is read from `base`. An unreadable folder completes to
/// nothing.
pub fn complete(typed: &str, base: &Path) -> Vec<Completion> {
    let (folder, prefix) = match typed.rfind(['/', MAIN_SEPARATOR]) {
        Some(i) => (&typed[..=i], &typed[i + 1..]),
        None => ("", typed),
    };
    let dir = if folder.is_empty() {
        base.to_path_buf()
    } else if Path::new(folder).is_absolute() {
        PathBuf::from(folder)
    } else {
        base.join(folder)
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<Completion> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            if !name.starts_with(prefix) || (name.starts_with('.') && !prefix.starts_with('.')) {
                return None;
            }
            // Follows links, so a link to a folder completes as a folder.
            let is_dir = e.path().is_dir();
            let mut path = format!("{folder}{name}");
            if is_dir {
                path.push(MAIN_SEPARATOR);
            }
            Some(Completion { path, name, is_dir })
        })
        .collect();
    out.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
    out.truncate(MAX_COMPLETIONS);
    out
}

/// The longest text all `completions` start with (what Tab fills in).
pub fn common_prefix(completions: &[Completion]) -> Option<String> {
    let first = &completions.first()?.path;
    let mut len = first.len();
    for c in &completions[1..] {
        len = first
            .char_indices()
            .zip(c.path.chars())
            .find(|((_, a), b)| a != b)
            .map_or(len.min(c.path.len()), |((i, _), _)| i.min(len));
    }
    Some(first[..len].to_owned())
}

/// What a typed path is for: it must name an existing file, or a file to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathUse {
    /// Read an existing file.
    Open,
    /// Write a file (created or replaced) in an existing folder.
    Save,
}

/// The typed path, resolved against `base`, if it can be used as `used`; else why not, naming
/// the path.
pub fn check_typed_path(typed: &str, base: &Path, used: PathUse) -> Result<PathBuf, String> {
    let typed = typed.trim();
    if typed.is_empty() {
        return Err("type a file path".to_owned());
    }
    let path = base.join(typed);
    match used {
        PathUse::Open if path.is_file() => Ok(path),
        PathUse::Open if path.is_dir() => Err(format!("{} is a folder", path.display())),
        PathUse::Open => Err(format!("{} does not exist", path.display())),
        PathUse::Save if path.is_dir() || typed.ends_with(['/', MAIN_SEPARATOR]) => {
            Err(format!("{} is a folder: add a file name", path.display()))
        }
        PathUse::Save => match path.parent() {
            Some(parent) if parent.as_os_str().is_empty() || parent.is_dir() => Ok(path),
            Some(parent) => Err(format!("the folder {} does not exist", parent.display())),
            None => Err(format!("{} has no folder", path.display())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_lists_matching_entries_folders_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("models")).unwrap();
        std::fs::write(dir.path().join("model.gguf"), b"x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        std::fs::write(dir.path().join(".hidden"), b"x").unwrap();
        let base = dir.path().display().to_string();

        let all = complete(&format!("{base}/mod"), Path::new("/"));
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["models", "model.gguf"]);
        assert_eq!(all[0].path, format!("{base}/models{MAIN_SEPARATOR}"));
        assert!(all[0].is_dir && !all[1].is_dir);
        assert_eq!(
            common_prefix(&all).as_deref(),
            Some(format!("{base}/model").as_str())
        );

        // Relative to the base; hidden entries only when asked for.
        let relative = complete("", dir.path());
        assert_eq!(relative.len(), 3);
        assert!(relative.iter().all(|c| !c.name.starts_with('.')));
        assert_eq!(complete(".h", dir.path())[0].name, ".hidden");
        // A missing folder completes to nothing.
        assert!(complete(&format!("{base}/nope/x"), Path::new("/")).is_empty());
    }

    #[test]
    fn typed_paths_are_checked_for_their_use() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), b"{}").unwrap();
        let base = dir.path();
        assert_eq!(
            check_typed_path("a.json", base, PathUse::Open),
            Ok(base.join("a.json"))
        );
        assert!(
            check_typed_path("b.json", base, PathUse::Open)
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            check_typed_path(".", base, PathUse::Open)
                .unwrap_err()
                .contains("is a folder")
        );
        assert_eq!(
            check_typed_path("b.json", base, PathUse::Save),
            Ok(base.join("b.json"))
        );
        assert!(
            check_typed_path("no/b.json", base, PathUse::Save)
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(check_typed_path("  ", base, PathUse::Save).is_err());
    }
}
