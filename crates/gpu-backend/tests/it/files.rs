//! `gpu_backend::files`, the one way gpuscope's crates read an operator's file and create a
//! file a user names (issue 32, items 14 and 15), met with the files an attacker (or an
//! accident) leaves: `/dev/zero`, a FIFO with no writer, a directory, a huge sparse file, a
//! dangling link and a live one. Every case ends at once: a FIFO is never waited on (each read
//! runs under a generous bound, so that a hang fails the test instead of stalling it).

#![cfg(unix)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::Scratch;

use gpu_backend::files::{
    create, read_regular, read_regular_to_string, refuse_link, FileError, IfExists,
    MAX_CERTIFICATE_BYTES, MAX_CONFIG_BYTES,
};

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs `f` on a thread of its own and waits for it at most 20 s (a hang guard, not a
/// measurement: each case takes microseconds).
fn within_bound<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} hung"))
}

/// Item 14: each hostile file is refused for what it is, before anything is read.
#[test]
fn reading_refuses_every_file_that_is_not_a_small_regular_one() {
    let dir = Scratch::new("files-read");
    let fifo = dir.path("fifo");
    mkfifo(&fifo);
    let sparse = dir.path("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let dangling = dir.path("dangling");
    std::os::unix::fs::symlink(dir.path("nowhere"), &dangling).unwrap();
    let to_zero = dir.path("to-zero");
    std::os::unix::fs::symlink("/dev/zero", &to_zero).unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        (
            "/dev/zero".into(),
            "is a character device, not a regular file",
        ),
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (
            dir.dir().to_path_buf(),
            "is a directory, not a regular file",
        ),
        (
            sparse,
            "is 1099511627776 bytes; at most 1048576 bytes (1 MiB) are read",
        ),
        (dangling, "No such file or directory"),
        (to_zero, "is a character device, not a regular file"),
    ];
    for (path, says) in cases {
        let shown = path.display().to_string();
        let got = within_bound(&shown, move || {
            read_regular(&path, MAX_CONFIG_BYTES).map(|b| b.len())
        });
        let err = got.expect_err(&shown).to_string();
        assert!(err.contains(says), "{shown}: {err}");
    }
}

/// Item 14: the caps, at and past the byte.
#[test]
fn a_file_at_the_cap_is_read_and_one_byte_more_is_refused() {
    let dir = Scratch::new("files-cap");
    for max in [MAX_CONFIG_BYTES, MAX_CERTIFICATE_BYTES] {
        let at = dir.path("at");
        std::fs::write(&at, vec![b'a'; max as usize]).unwrap();
        assert_eq!(read_regular(&at, max).unwrap().len() as u64, max);
        let over = dir.path("over");
        std::fs::write(&over, vec![b'a'; max as usize + 1]).unwrap();
        assert!(matches!(
            read_regular(&over, max),
            Err(FileError::TooLarge { size: Some(s), max: m }) if s == max + 1 && m == max
        ));
    }
}

#[test]
fn text_that_is_not_utf8_is_refused_with_its_offset() {
    let dir = Scratch::new("files-text");
    let path = dir.path("password");
    std::fs::write(&path, b"hunter2\xff\n").unwrap();
    assert!(matches!(
        read_regular_to_string(&path, MAX_CONFIG_BYTES),
        Err(FileError::NotText { offset: 7 })
    ));
    let link = dir.path("link");
    std::fs::write(&path, "hunter2\n").unwrap();
    std::os::unix::fs::symlink(&path, &link).unwrap();
    // A link to a good file is followed: Kubernetes mounts secrets as links.
    assert_eq!(
        read_regular_to_string(&link, MAX_CONFIG_BYTES).unwrap(),
        "hunter2\n"
    );
}

const PRECIOUS: &str = "precious\n";

/// Item 15: whatever `IfExists` says, a link at the path (dangling, or to a file) is refused,
/// its target neither created nor changed, and the link left as it was.
#[test]
fn creating_never_writes_through_a_symbolic_link() {
    let dir = Scratch::new("files-links");
    for if_exists in [
        IfExists::Refuse,
        IfExists::KeepFile,
        IfExists::Truncate,
        IfExists::Append,
    ] {
        for precious in [false, true] {
            let target = dir.path(&format!("target-{if_exists:?}-{precious}"));
            if precious {
                std::fs::write(&target, PRECIOUS).unwrap();
            }
            let link = dir.path(&format!("link-{if_exists:?}-{precious}"));
            std::os::unix::fs::symlink(&target, &link).unwrap();
            let got = create(&link, if_exists);
            assert!(
                matches!(got, Err(FileError::SymbolicLink)),
                "{if_exists:?} at a link (target there: {precious}): {got:?}"
            );
            assert_eq!(
                std::fs::read_to_string(&target).ok().as_deref(),
                precious.then_some(PRECIOUS),
                "{if_exists:?}"
            );
            assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
            assert!(matches!(refuse_link(&link), Err(FileError::SymbolicLink)));
        }
    }
}

/// What each `IfExists` does with a regular file, a device, a directory and nothing.
#[test]
fn creating_does_what_if_exists_says() {
    let dir = Scratch::new("files-modes");
    let file = dir.path("file");
    let write = |mode, text: &str| -> Result<(), FileError> {
        create(&file, mode)?.write_all(text.as_bytes())?;
        Ok(())
    };
    write(IfExists::Refuse, "one\n").unwrap();
    assert!(matches!(
        write(IfExists::Refuse, "x"),
        Err(FileError::Exists)
    ));
    assert!(matches!(
        write(IfExists::KeepFile, "x"),
        Err(FileError::Exists)
    ));
    write(IfExists::Append, "two\n").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "one\ntwo\n");
    write(IfExists::Truncate, "three\n").unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "three\n");
    // A device is written to where a file would be kept or replaced, never where the file
    // must be new.
    for mode in [IfExists::KeepFile, IfExists::Truncate, IfExists::Append] {
        create(Path::new("/dev/null"), mode).unwrap();
    }
    assert!(matches!(
        create(Path::new("/dev/null"), IfExists::Refuse),
        Err(FileError::Exists)
    ));
    for mode in [IfExists::KeepFile, IfExists::Truncate, IfExists::Append] {
        assert!(
            matches!(
                create(dir.dir(), mode),
                Err(FileError::NotRegular {
                    kind: "a directory"
                })
            ),
            "{mode:?}"
        );
    }
    // Nothing there: made.
    let new = dir.path("new");
    create(&new, IfExists::KeepFile)
        .unwrap()
        .write_all(b"new\n")
        .unwrap();
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "new\n");
    assert!(refuse_link(&new).is_ok() && refuse_link(&dir.path("absent")).is_ok());
}
