//! Files an operator names and files gpuscope writes, met as an attacker (or an accident)
//! leaves them (issue 32, items 14 and 15), through the binary.
//!
//! Item 14: every configuration file is read as a regular file with a size cap. `/dev/zero`, a
//! FIFO with no writer, a directory, a huge sparse file, a dangling link and a link to
//! `/dev/zero`, given to each option that reads a file, exit 2 at once with one message naming
//! the option, the path and what is wrong: never a read of gigabytes, an abort or a hang.
//! (Reads follow a link to a good file on purpose: Kubernetes mounts secrets as links.)
//!
//! Item 15: no command that writes a file follows a symbolic link. A dangling link or a link to
//! a file at an output path is refused (exit 2, naming the option and the link), with or
//! without `--overwrite`, and the link's target is neither created nor changed.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::export_support;
use export_support::{cli, Exporter};

/// What a refusal must come within: generous (each case takes milliseconds), so that a hang
/// fails the test instead of stalling the suite. Not a measurement.
const HANG_GUARD: Duration = Duration::from_secs(20);

/// Runs gpuscope with `args`, killing it and failing if it has not ended within
/// [`HANG_GUARD`].
fn gpuscope(args: &[OsString]) -> Output {
    run(args).unwrap_or_else(|hung| panic!("{hung}"))
}

/// [`gpuscope`], with a hang as an error to report beside the other cases of a table.
fn run(args: &[OsString]) -> Result<Output, String> {
    let mut child = cli::command(&[])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gpuscope runs");
    let deadline = Instant::now() + HANG_GUARD;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            let _ = child.wait();
            return Err(format!(
                "gpuscope {args:?} hung (killed after {HANG_GUARD:?})"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child.wait_with_output().expect("output"))
}

fn words(list: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    list.iter().map(|w| w.as_ref().to_os_string()).collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A self-signed certificate and its key, PEM.
fn certificate() -> (String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("a cert");
    (made.cert.pem(), made.signing_key.serialize_pem())
}

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// The hostile files of item 14.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    /// `/dev/zero`: endless, and a character device.
    DevZero,
    /// A FIFO no one writes to: opening it for reading waits for a writer.
    Fifo,
    /// A directory.
    Directory,
    /// A sparse file of 4 GiB: costs nothing on disk, gigabytes if read.
    HugeSparse,
    /// A link to nowhere.
    DanglingLink,
    /// A link to `/dev/zero`: what is checked is what the link leads to.
    LinkToDevZero,
}

const HOSTILE: [Hostile; 6] = [
    Hostile::DevZero,
    Hostile::Fifo,
    Hostile::Directory,
    Hostile::HugeSparse,
    Hostile::DanglingLink,
    Hostile::LinkToDevZero,
];

impl Hostile {
    /// Makes the file in `dir` (named after `tag`) and returns its path.
    fn make(self, dir: &Path, tag: &str) -> PathBuf {
        let path = dir.join(format!("{tag}-{self:?}"));
        match self {
            Hostile::DevZero => return PathBuf::from("/dev/zero"),
            Hostile::Fifo => mkfifo(&path),
            Hostile::Directory => std::fs::create_dir(&path).unwrap(),
            Hostile::HugeSparse => {
                let f = std::fs::File::create(&path).unwrap();
                f.set_len(4 << 30).unwrap();
            }
            Hostile::DanglingLink => {
                std::os::unix::fs::symlink(dir.join("nowhere"), &path).unwrap()
            }
            Hostile::LinkToDevZero => std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
        }
        path
    }

    /// What the message says is wrong.
    fn says(self) -> &'static str {
        match self {
            Hostile::DevZero | Hostile::LinkToDevZero => "a character device, not a regular file",
            Hostile::Fifo => "a FIFO (named pipe), not a regular file",
            Hostile::Directory => "a directory, not a regular file",
            Hostile::HugeSparse => "4294967296 bytes",
            Hostile::DanglingLink => "No such file or directory",
        }
    }
}

/// An option that reads an operator file: its name as the message gives it, and the command
/// line that hands it `path` (with good files in `dir` for the options it needs beside it).
struct Reader {
    option: &'static str,
    command: fn(dir: &Path, path: &Path) -> Vec<OsString>,
}

/// A Prometheus URL nothing answers on: the files are read, and refused, before any query.
const NO_PROMETHEUS: &str = "http://127.0.0.1:9";

/// `export --demo` on a free port with the web config `config`.
fn export_with(config: &Path) -> Vec<OsString> {
    words(&[
        &"export",
        &"--demo",
        &"--listen",
        &"127.0.0.1:0",
        &"--web.config.file",
        &config,
    ])
}

/// [`export_with`] a web config `dir/name` that serves TLS with `cert` and `key`.
fn export_with_tls(dir: &Path, name: &str, cert: &Path, key: &Path) -> Vec<OsString> {
    let config = dir.join(name);
    let text = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
        yaml_path(cert),
        yaml_path(key)
    );
    std::fs::write(&config, text).unwrap();
    export_with(&config)
}

/// `path` as a YAML scalar: a double-quoted string (JSON's form, which YAML reads), so that
/// any character of a file name survives.
fn yaml_path(path: &Path) -> String {
    serde_json::to_string(path.to_str().expect("a UTF-8 path")).expect("a JSON string")
}

/// Good PEM files in `dir`: (certificate, key).
fn good_pem(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = certificate();
    let (cert_path, key_path) = (dir.join("good.crt"), dir.join("good.key"));
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    (cert_path, key_path)
}

fn fleet(extra: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    let mut w = words(&[&"snapshot", &"--prometheus", &NO_PROMETHEUS]);
    w.extend(words(extra));
    w
}

const READERS: &[Reader] = &[
    Reader {
        option: "--web.config.file",
        command: |_, path| export_with(path),
    },
    Reader {
        option: "tls_server_config.cert_file",
        command: |dir, path| export_with_tls(dir, "cert.yml", path, &good_pem(dir).1),
    },
    Reader {
        option: "tls_server_config.key_file",
        command: |dir, path| export_with_tls(dir, "key.yml", &good_pem(dir).0, path),
    },
    Reader {
        option: "--prometheus-password-file",
        command: |_, path| {
            fleet(&[
                &"--prometheus-user",
                &"alice",
                &"--prometheus-password-file",
                &path,
            ])
        },
    },
    Reader {
        option: "--prometheus-ca",
        command: |_, path| fleet(&[&"--prometheus-ca", &path]),
    },
    Reader {
        option: "--prometheus-cert",
        command: |dir, path| {
            let (_, key) = good_pem(dir);
            fleet(&[&"--prometheus-cert", &path, &"--prometheus-key", &key])
        },
    },
    Reader {
        option: "--prometheus-key",
        command: |dir, path| {
            let (cert, _) = good_pem(dir);
            fleet(&[&"--prometheus-cert", &cert, &"--prometheus-key", &path])
        },
    },
];

/// Item 14: `--web.config.file /dev/zero` read 2.1 GB before failing, a FIFO hung, and
/// `cert_file: /dev/zero` aborted (134); `--prometheus-password-file` and `--prometheus-ca` the
/// same. Every option that reads a file, given every hostile file: exit 2 at once, naming the
/// option, the path and what is wrong.
#[test]
fn operator_files_that_are_not_small_regular_files_are_refused_naming_the_option() {
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (r, reader) in READERS.iter().enumerate() {
        for hostile in HOSTILE {
            let dir = scratch.path().join(format!("{r}-{hostile:?}"));
            std::fs::create_dir(&dir).unwrap();
            let path = hostile.make(&dir, "file");
            let args = (reader.command)(&dir, &path);
            let out = match run(&args) {
                Ok(out) => out,
                Err(hung) => {
                    failures.push(format!("{} {hostile:?}: {hung}", reader.option));
                    continue;
                }
            };
            let err = stderr(&out);
            let shown = path.display().to_string();
            let ok = out.status.code() == Some(2)
                && err.contains(reader.option)
                && err.contains(&shown)
                && err.contains(hostile.says())
                && err.lines().count() == 1;
            if !ok {
                failures.push(format!(
                    "{} {hostile:?}: exit {:?}, wanted 2 and a line with {:?}: {err}",
                    reader.option,
                    out.status.code(),
                    hostile.says()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A file name holding a line feed and a bidi override was printed raw in the message that
/// refused it: the line feed started a forged line of its own (`FORGED: ...`). Every option
/// that reads an operator file, given such a name of a missing file: one line, the name
/// escaped.
#[test]
fn a_line_break_or_bidi_control_in_a_file_name_is_escaped_in_the_refusal() {
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (r, reader) in READERS.iter().enumerate() {
        let dir = scratch.path().join(r.to_string());
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("evil\nFORGED: ok \u{202e}txt.pem");
        let out = gpuscope(&(reader.command)(&dir, &path));
        let err = stderr(&out);
        let shown = format!("{}/evil\\x0aFORGED: ok \\u{{202e}}txt.pem", dir.display());
        let ok = out.status.code() == Some(2)
            && err.lines().count() == 1
            && err.contains(reader.option)
            && err.contains(&shown)
            && !err.contains('\u{202e}');
        if !ok {
            failures.push(format!(
                "{}: exit {:?}, wanted 2 and one line with {shown:?}: {err:?}",
                reader.option,
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Item 14: the caps are docs/security.md's: 1 MiB for a password (and a web configuration and
/// a key), 4 MiB for certificates. A file one byte over is refused with its size and the cap;
/// one at the cap is read (and then judged on what it holds).
#[test]
fn operator_file_caps_are_the_documented_ones() {
    let dir = tempfile::tempdir().unwrap();
    for (option, cap, mib) in [
        ("--prometheus-password-file", 1u64 << 20, "1 MiB"),
        ("--prometheus-ca", 4 << 20, "4 MiB"),
    ] {
        let over = dir.path().join(format!("over{cap}"));
        std::fs::File::create(&over)
            .unwrap()
            .set_len(cap + 1)
            .unwrap();
        let at = dir.path().join(format!("at{cap}"));
        std::fs::write(&at, vec![b'#'; cap as usize]).unwrap();
        let args = |path: &Path| match option {
            "--prometheus-ca" => fleet(&[&option, &path]),
            _ => fleet(&[&"--prometheus-user", &"alice", &option, &path]),
        };
        let out = gpuscope(&args(&over));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(option)
                && err.contains(&format!("is {} bytes", cap + 1))
                && err.contains(mib),
            "{err}"
        );
        // At the cap: read. The password file then passes (the query fails: nothing answers);
        // the CA file is refused for what it holds, not for its size.
        let err = stderr(&gpuscope(&args(&at)));
        assert!(!err.contains("bytes"), "{option} at the cap: {err}");
        if option == "--prometheus-ca" {
            assert!(err.contains("no PEM certificate"), "{err}");
        } else {
            assert!(!err.contains(option), "{err}");
        }
    }
}

/// Item 14: a read follows a link to a good file (Kubernetes mounts a secret's files as links),
/// and it is what the link leads to that is checked.
#[test]
fn a_web_config_behind_a_link_to_a_good_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("web.yml");
    std::fs::write(&real, "\n").unwrap();
    let link = dir.path().join("link.yml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let exp = Exporter::start(&["--demo", "--web.config.file", link.to_str().unwrap()]);
    assert_eq!(exp.get("/health").status, 200);
}

fn record(dir: &Path, extra: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    let mut w = words(&[&"record", &"--demo", &"--duration", &"100ms"]);
    w.extend(words(extra));
    if !extra.iter().any(|a| a.as_ref() == "--output") {
        w.extend(words(&[&"--output", &dir.join("plot.png")]));
    }
    w
}

/// A command that writes a file.
enum Writer {
    /// `record --demo --duration 100ms [--overwrite] OPTION PATH` (with `--output` into the
    /// directory when OPTION is not it): OPTION, the file's name (a plot must end in .png or
    /// .svg), and whether `--overwrite` comes first.
    Record(&'static str, &'static str, Overwrite),
    /// `smi --demo ARGS -f PATH`.
    Smi(&'static [&'static str]),
}

/// Whether a [`Writer::Record`] is given `--overwrite`.
enum Overwrite {
    No,
    Yes,
}

use Overwrite::{No, Yes};
use Writer::{Record, Smi};

const WRITERS: &[Writer] = &[
    Record("--csv", "samples.csv", No),
    Record("--csv", "samples.csv", Yes),
    Record("--ndjson", "samples.ndjson", No),
    Record("--ndjson", "samples.ndjson", Yes),
    Record("--output", "plot.svg", No),
    Record("--output", "plot.png", Yes),
    Smi(&[]),
    Smi(&["-lms", "10", "--count", "2"]),
];

impl Writer {
    /// The option as the refusal names it.
    fn option(&self) -> &'static str {
        match self {
            Record(option, _, _) => option,
            Smi(_) => "-f",
        }
    }

    /// The name of the file it writes.
    fn name(&self) -> &'static str {
        match self {
            Record(_, name, _) => name,
            Smi(_) => "smi.txt",
        }
    }

    /// The command line that writes `path` (`dir` is free for other outputs).
    fn command(&self, dir: &Path, path: &Path) -> Vec<OsString> {
        match self {
            Record(option, _, No) => record(dir, &[option, &path]),
            Record(option, _, Yes) => record(dir, &[&"--overwrite", option, &path]),
            Smi(args) => {
                let mut w = words(&[&"smi", &"--demo"]);
                w.extend(args.iter().map(OsString::from));
                w.extend(words(&[&"-f", &path]));
                w
            }
        }
    }
}

/// What a link at an output path points to.
#[derive(Debug, Clone, Copy)]
enum Target {
    /// Nothing: following the link would create the file.
    Missing,
    /// A file someone cares about: following the link would overwrite it.
    Precious,
}

const PRECIOUS: &str = "precious\n";

/// Item 15: `record --csv PATH` with PATH a dangling link followed it and created the link's
/// target (as root: anywhere). Every command that writes a file, with a dangling link or a
/// link to a file at its output path: refused with exit 2 naming the option and the link,
/// and the target neither created nor changed, with or without `--overwrite`.
#[test]
fn outputs_at_a_symbolic_link_are_refused_and_the_target_is_untouched() {
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (w, writer) in WRITERS.iter().enumerate() {
        for target_kind in [Target::Missing, Target::Precious] {
            let dir = scratch.path().join(format!("{w}-{target_kind:?}"));
            std::fs::create_dir(&dir).unwrap();
            let target = dir.join(format!("target-{}", writer.name()));
            if let Target::Precious = target_kind {
                std::fs::write(&target, PRECIOUS).unwrap();
            }
            let link = dir.join(writer.name());
            std::os::unix::fs::symlink(&target, &link).unwrap();
            let args = writer.command(&dir, &link);
            let out = match run(&args) {
                Ok(out) => out,
                Err(hung) => {
                    failures.push(hung);
                    continue;
                }
            };
            let err = stderr(&out);
            let after = std::fs::read_to_string(&target).ok();
            let untouched = match target_kind {
                Target::Missing => after.is_none(),
                Target::Precious => after.as_deref() == Some(PRECIOUS),
            };
            let still_a_link = std::fs::symlink_metadata(&link).is_ok_and(|m| m.is_symlink());
            let ok = out.status.code() == Some(2)
                && err.contains(writer.option())
                && err.contains(&link.display().to_string())
                && err.contains("symbolic link")
                && untouched
                && still_a_link;
            if !ok {
                failures.push(format!(
                    "{args:?} at a link to a {target_kind:?} file: exit {:?}, target {}, link {}: {err}",
                    out.status.code(),
                    if untouched { "untouched" } else { "CHANGED" },
                    if still_a_link { "kept" } else { "replaced" },
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Item 15, as a user meets it: a dangling link at the CSV path makes `record --csv PATH` fail
/// before recording, with one line that says why, and no file appears at the link's target.
#[test]
fn record_csv_at_a_dangling_link_fails_and_creates_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("elsewhere.csv");
    let link = dir.path().join("samples.csv");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = gpuscope(&record(dir.path(), &[&"--csv", &link]));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("--csv {}: is a symbolic link", link.display())),
        "{err}"
    );
    assert!(!target.exists(), "the link's target was created");
    assert!(
        !dir.path().join("plot.png").exists(),
        "refused before anything was recorded"
    );
}

/// Item 15: the man pages (`gpuscope __man DIR`, which `cargo xtask man` runs) are not written
/// through a link planted among them; the link's target keeps what it held.
#[test]
fn man_pages_are_not_written_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, PRECIOUS).unwrap();
    let man = dir.path().join("man");
    std::fs::create_dir(&man).unwrap();
    let link = man.join("gpuscope-snapshot.1");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = gpuscope(&words(&[&"__man", &man]));
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&link.display().to_string()) && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), PRECIOUS);
}

/// Item 15: `install-links` makes links on purpose, and replaces (with `--force`) what is at a
/// tool's name: the link itself, never the file a link there points to, and a dangling link's
/// target is never created.
#[test]
fn install_links_replaces_a_link_and_never_writes_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let precious = dir.path().join("precious");
    std::fs::write(&precious, PRECIOUS).unwrap();
    let nowhere = dir.path().join("nowhere");
    std::os::unix::fs::symlink(&precious, bin.join("nvidia-smi")).unwrap();
    std::os::unix::fs::symlink(&nowhere, bin.join("gpustat")).unwrap();
    // Without --force: refused, nothing changed.
    let out = gpuscope(&words(&[&"install-links", &bin, &"nvidia-smi", &"gpustat"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already there"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_link(bin.join("nvidia-smi")).unwrap(),
        precious
    );
    // With --force: each link replaced by one to gpuscope; what they pointed to is as it was.
    let out = gpuscope(&words(&[
        &"install-links",
        &"--force",
        &bin,
        &"nvidia-smi",
        &"gpustat",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_gpuscope"));
    for tool in ["nvidia-smi", "gpustat"] {
        let now = std::fs::read_link(bin.join(tool)).unwrap();
        assert_eq!(
            now.canonicalize().unwrap(),
            exe.canonicalize().unwrap(),
            "{tool}"
        );
    }
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), PRECIOUS);
    assert!(!nowhere.exists(), "a dangling link's target was created");
}
