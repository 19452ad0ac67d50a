//! Files opened by name, so that what is found at the name cannot turn a read or a write into
//! something else: the one way every gpuscope crate reads an operator's file (a web
//! configuration, a password, a certificate, a fixture) and creates a file a user names (a
//! recording's samples, a plot, a fixture, `smi -f`'s text, man pages).
//!
//! **Reading** ([`read_regular`], [`read_regular_to_string`], [`open_regular`]): only a regular
//! file is read, and only up to a cap. A directory, a device (`/dev/zero`), a FIFO or a socket
//! is refused before it is opened (a FIFO with no writer would block the open) and again on the
//! open file, which may have been swapped in between (the open does not block: `O_NONBLOCK`).
//! A file larger than the cap is refused before a byte is read (a sparse file of terabytes
//! costs nothing to refuse), and the read stops at the cap if the file grows meanwhile. A
//! symbolic link is followed, on purpose: Kubernetes mounts a secret's files as links; what
//! the link leads to is what is checked.
//!
//! **Writing** ([`create`]): a symbolic link at the path is refused, never followed
//! (`O_NOFOLLOW`; `O_EXCL` for a file that must be new, which also fails on a dangling link),
//! whether or not an existing file may be replaced, so a link planted where gpuscope writes
//! can neither create its target nor overwrite it. [`refuse_link`] is the same rule for a file
//! renamed into place (a rename replaces a link itself, never its target, and a link there is
//! refused before the work starts).

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read as _;
use std::path::Path;

/// The most bytes read from a configuration file: the exporter's web configuration, a
/// password file, a private key. 1 MiB: such files are a few kilobytes, and a bcrypt user list
/// of 10,000 users is about 740 KB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The most bytes read from a file of PEM certificates: a CA bundle or a certificate with its
/// chain. 4 MiB: a distribution's whole CA bundle (about 150 certificates) is about 220 KB, so
/// this leaves room for a large corporate bundle and none for a file that is not one.
pub const MAX_CERTIFICATE_BYTES: u64 = 4 << 20;

/// The most bytes read from `/etc/passwd` for the live host's user names: 16 MiB, some 200,000
/// users of 80 bytes a line; a site with more keeps them in a directory service, which
/// `getpwuid_r` asks.
pub const MAX_PASSWD_BYTES: u64 = 16 << 20;

/// Why a file was not read or not created. Its message reads after the file's name (and the
/// option that named it): `--prometheus-ca /dev/zero: is a character device, not a regular
/// file`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// Not a regular file: a directory, a device, a FIFO or a socket.
    #[error("is {kind}, not a regular file")]
    NotRegular {
        /// What it is instead (`a FIFO (named pipe)`), from [`kind`].
        kind: &'static str,
    },
    /// Larger than the cap.
    #[error("{}", too_large(*size, *max))]
    TooLarge {
        /// Its size, when it was already too large when checked; `None` when it grew past the
        /// cap while it was read.
        size: Option<u64>,
        /// The cap.
        max: u64,
    },
    /// Not UTF-8, where text is expected.
    #[error("is not UTF-8 text (invalid byte at offset {offset})")]
    NotText {
        /// Where the first invalid byte is.
        offset: usize,
    },
    /// A symbolic link where a file is to be written.
    #[error(
        "is a symbolic link; gpuscope does not write through a link (name the file itself, or \
         remove the link)"
    )]
    SymbolicLink,
    /// A file exists where a new one is to be made ([`IfExists::Refuse`],
    /// [`IfExists::KeepFile`]).
    #[error("the file exists")]
    Exists,
    /// What the system said (no such file, no permission, a full disk...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<FileError> for std::io::Error {
    /// The system's error as it was; the others as an error of their own kind that carries
    /// the [`FileError`] (`get_ref` and `downcast_ref` find it).
    fn from(e: FileError) -> std::io::Error {
        use std::io::ErrorKind;
        match e {
            FileError::Io(e) => e,
            FileError::Exists => std::io::Error::new(ErrorKind::AlreadyExists, e),
            FileError::NotText { .. } => std::io::Error::new(ErrorKind::InvalidData, e),
            FileError::TooLarge { .. } => std::io::Error::new(ErrorKind::FileTooLarge, e),
            FileError::NotRegular { .. } | FileError::SymbolicLink => {
                std::io::Error::new(ErrorKind::InvalidInput, e)
            }
        }
    }
}

fn too_large(size: Option<u64>, max: u64) -> String {
    let max = if max.is_multiple_of(1 << 20) {
        format!("{max} bytes ({} MiB)", max >> 20)
    } else {
        format!("{max} bytes")
    };
    match size {
        Some(size) => format!("is {size} bytes; at most {max} are read"),
        None => format!("grew past {max} while it was read; at most that is read"),
    }
}

/// What a file that is not a regular file is, for a message: `a directory`, `a FIFO (named
/// pipe)`, `a character device`, `a block device`, `a socket`.
pub fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    if t.is_symlink() {
        return "a symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

fn check_regular(meta: &Metadata, max: u64) -> Result<(), FileError> {
    if !meta.is_file() {
        return Err(FileError::NotRegular { kind: kind(meta) });
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            size: Some(meta.len()),
            max,
        });
    }
    Ok(())
}

/// Opens `path` for reading if it is a regular file of at most `max` bytes (a link is
/// followed; what it leads to is checked), and returns the file with its size then. For a
/// caller that reads the file its own way (a compressed fixture); it must still read no more
/// than `max` (`Read::take`), as the file may grow.
///
/// # Errors
///
/// [`FileError::NotRegular`], [`FileError::TooLarge`], or what the system said.
pub fn open_regular(path: &Path, max: u64) -> Result<(File, u64), FileError> {
    // Checked before opening, so that a FIFO is not opened (which would wait for a writer) and
    // a device is not opened at all, and again on the open file, which may have been replaced
    // in between.
    check_regular(&std::fs::metadata(path)?, max)?;
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // A FIFO swapped in after the check does not block the open; a terminal swapped in
        // does not become this process's controlling terminal.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    check_regular(&meta, max)?;
    Ok((file, meta.len()))
}

/// The bytes of `path`, a regular file of at most `max` bytes ([`open_regular`]).
///
/// # Errors
///
/// [`FileError::NotRegular`], [`FileError::TooLarge`] (also when the file grows past `max`
/// while it is read), or what the system said.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let (file, len) = open_regular(path, max)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge { size: None, max });
    }
    Ok(bytes)
}

/// The text of `path`, a regular file of at most `max` bytes of UTF-8 ([`read_regular`]).
///
/// # Errors
///
/// As [`read_regular`], and [`FileError::NotText`].
pub fn read_regular_to_string(path: &Path, max: u64) -> Result<String, FileError> {
    String::from_utf8(read_regular(path, max)?).map_err(|e| FileError::NotText {
        offset: e.utf8_error().valid_up_to(),
    })
}

/// What [`create`] does when something is already at the path. In every case a symbolic link
/// there is refused ([`FileError::SymbolicLink`]) and never followed, and a directory is
/// refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfExists {
    /// Anything there is refused ([`FileError::Exists`]): the file is new (`O_EXCL`). For
    /// temporary and partial files.
    Refuse,
    /// A regular file there is refused ([`FileError::Exists`]); a device or a FIFO
    /// (`/dev/null`, a named pipe) is written to. For outputs that replace a file only when
    /// asked to (`record` without `--overwrite`).
    KeepFile,
    /// A regular file there is emptied and written anew; a device or a FIFO is written to.
    Truncate,
    /// What is written goes after what a file there holds.
    Append,
}

/// Opens `path` for writing, creating it if it is missing (with the permissions
/// `File::create` gives: 0666 less the umask), never through a symbolic link: a link at
/// `path`, dangling or not, is refused whatever `if_exists` says, so its target is neither
/// created nor changed.
///
/// # Errors
///
/// [`FileError::SymbolicLink`]; [`FileError::Exists`] as `if_exists` says;
/// [`FileError::NotRegular`] for a directory; or what the system said.
pub fn create(path: &Path, if_exists: IfExists) -> Result<File, FileError> {
    let open = |create_new: bool, create: bool| {
        let mut options = OpenOptions::new();
        options.write(true);
        match if_exists {
            IfExists::Append => {
                options.append(true);
            }
            IfExists::Truncate => {
                options.truncate(true);
            }
            IfExists::Refuse | IfExists::KeepFile => {}
        }
        if create_new {
            options.create_new(true);
        } else {
            options.create(create);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY);
        }
        #[cfg(not(unix))]
        refuse_link(path)?;
        options.open(path).map_err(|e| refusal(path, e))
    };
    match if_exists {
        IfExists::Refuse => open(true, true),
        IfExists::KeepFile => match open(true, true) {
            Err(FileError::Exists) => {
                // Something is there: opened without creating or truncating it (and not
                // through a link) to see what it is.
                let file = open(false, false)?;
                if file.metadata()?.is_file() {
                    Err(FileError::Exists)
                } else {
                    Ok(file)
                }
            }
            other => other,
        },
        IfExists::Truncate | IfExists::Append => open(false, true),
    }
}

/// What a failed open for writing means: a link or a directory where the file was to be, a
/// file that exists, or the system's error.
fn refusal(path: &Path, e: std::io::Error) -> FileError {
    // With O_NOFOLLOW and O_EXCL, any open of a link fails (ELOOP, or EEXIST for O_EXCL): a
    // link at the path is the reason whatever the error says.
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_symlink() => FileError::SymbolicLink,
        Ok(meta) if meta.is_dir() => FileError::NotRegular { kind: kind(&meta) },
        _ if e.kind() == std::io::ErrorKind::AlreadyExists => FileError::Exists,
        _ => FileError::Io(e),
    }
}

/// Refuses a symbolic link at `path` ([`FileError::SymbolicLink`]); anything else, or nothing,
/// passes. For a file renamed into place at `path`, checked before the work starts: the rename
/// itself replaces a link planted afterwards, never what it points to.
///
/// # Errors
///
/// [`FileError::SymbolicLink`].
pub fn refuse_link(path: &Path) -> Result<(), FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_symlink() => Err(FileError::SymbolicLink),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_names_the_size_and_the_cap() {
        let e = FileError::TooLarge {
            size: Some(1_048_577),
            max: MAX_CONFIG_BYTES,
        };
        assert_eq!(
            e.to_string(),
            "is 1048577 bytes; at most 1048576 bytes (1 MiB) are read"
        );
        let e = FileError::TooLarge {
            size: None,
            max: 10,
        };
        assert_eq!(
            e.to_string(),
            "grew past 10 bytes while it was read; at most that is read"
        );
    }

    #[test]
    fn a_file_error_keeps_its_kind_and_itself_as_an_io_error() {
        let io: std::io::Error = FileError::SymbolicLink.into();
        assert!(matches!(
            io.get_ref().and_then(|e| e.downcast_ref::<FileError>()),
            Some(FileError::SymbolicLink)
        ));
        let io: std::io::Error = FileError::Exists.into();
        assert_eq!(io.kind(), std::io::ErrorKind::AlreadyExists);
    }
}
