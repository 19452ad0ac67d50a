//! `gpuscope stat`, the gpustat front door, prints gpustat 1.1.1's lines (issue 34): memory in
//! gpustat's `MB`, processes on their GPU's line, gpustat's widths, power rounded down as
//! gpustat and the JSON round it, the header's time in local time as gpustat writes it, `-c`
//! the program's name, `-f` a line per process with PID, CPU% and RSS, `-v` the version, and
//! gpustat's colours. The byte-for-byte comparison with gpustat itself over fake-nvml is
//! crates/fake-nvml/tests/gpustat_text.py (run in CI); these tests hold what a user checks.

use serde_json::Value;

use crate::support::cli;

fn stat(args: &[&str]) -> String {
    cli::stdout(&[&["stat"][..], args].concat())
}

/// `stat` over the gpu-lost scenario at `frame`, with `extra` options.
fn lost_at(frame: &str, extra: &[&str]) -> String {
    let fixture = cli::fixture("gpu-lost");
    stat(&[&["--fixture", &fixture, "--frame", frame][..], extra].concat())
}

/// GPU 2 of this scenario is lost at frame 20; GPU 3 has Xorg beside a worker.
fn lost(extra: &[&str]) -> String {
    lost_at("20", &[&["--no-header"][..], extra].concat())
}

#[test]
fn the_lines_are_gpustats_with_processes_on_their_gpus_line() {
    assert_eq!(
        lost(&[]),
        "[0] Tesla T4 | 50°C,  10 % |  1524 / 15360 MB | svc-infer(1519M)\n\
         [1] Tesla T4 | 50°C,  10 % |  1526 / 15360 MB | svc-infer(1521M)\n\
         [2] Tesla T4 | ??°C,  ?? % |    ?? /    ?? MB | (Not Supported)\n\
         [3] Tesla T4 | 49°C,   8 % |  1416 / 15360 MB | svc-infer(1389M) root(22M)\n"
    );
    // -c alone: the program's name instead of the user; -u brings the user back; -p the PID.
    let c = lost(&["-c"]);
    assert!(c.contains("| python(1519M)\n"), "{c}");
    assert!(
        !c.contains("serving.worker"),
        "-c is the program, not the command line: {c}"
    );
    let cpu = lost(&["-cpu"]);
    assert!(
        cpu.contains("| svc-infer:python/5762(1389M) root:Xorg/675(22M)\n"),
        "{cpu}"
    );
    let cupp = lost(&["-cupP"]);
    assert!(
        cupp.starts_with("[0] Tesla T4 | 50°C,  10 %,   31 /  70 W |  1524 / 15360 MB | "),
        "{cupp}"
    );
    let all = lost(&["-a"]);
    assert!(
        all.contains(
            "[2] Tesla T4 | ??°C,  ?? %,  ?? % (E:  ?? %  D:  ?? %),   ?? /  70 W |    ?? /    ?? MB \
             | (Not Supported)\n"
        ),
        "{all}"
    );
    let e = lost(&["-e", "dec", "-F"]);
    assert!(
        e.starts_with("[0] Tesla T4 | 50°C,  ?? %,  10 % (D:   0 %) |"),
        "{e}"
    );
    let bare = lost(&["--no-processes"]);
    assert!(bare.lines().all(|l| l.ends_with(" MB")), "{bare}");
}

#[test]
fn full_process_info_has_pid_cpu_and_rss_as_gpustat_prints_them() {
    let f = lost(&["-f"]);
    let lines: Vec<&str> = f.lines().collect();
    assert_eq!(
        lines[0],
        "[0] Tesla T4 | 50°C,  10 % |  1524 / 15360 MB | svc-infer(1519M)"
    );
    assert_eq!(
        lines[1],
        " └─   5759 (   7%, 2489MB): /opt/serving/venv/bin/python -m serving.worker --model \
         bert-base-ner --device=cuda:0 --port 7100"
    );
    // The last process of a GPU closes the tree; the others branch.
    let gpu3 = f.split("[3]").nth(1).expect("GPU 3");
    assert!(gpu3.contains("\n ├─   5762 (  10%, 2473MB): "), "{gpu3}");
    assert!(
        gpu3.contains("\n └─    675 (   0%,   61MB): /usr/lib/xorg/Xorg -core"),
        "{gpu3}"
    );
}

/// The text said 41 W where gpustat and the JSON say 40 (40.968 W): it rounded to nearest.
#[test]
fn power_and_memory_in_the_text_are_the_jsons_numbers() {
    for frame in ["0", "10", "31"] {
        let doc: Value = serde_json::from_str(&lost_at(frame, &["--json"])).expect("JSON");
        let text = lost_at(frame, &["-P", "--no-header"]);
        for (gpu, line) in doc["gpus"]
            .as_array()
            .expect("gpus")
            .iter()
            .zip(text.lines())
        {
            let shown = |v: &Value, width: usize| match v.as_u64() {
                Some(n) => format!("{n:>width$}"),
                None => format!("{:>width$}", "??"),
            };
            let power = format!(
                ",  {} / {} W | ",
                shown(&gpu["power.draw"], 3),
                shown(&gpu["enforced.power.limit"], 3)
            );
            let memory = format!(
                " | {} / {} MB |",
                shown(&gpu["memory.used"], 5),
                shown(&gpu["memory.total"], 5)
            );
            assert!(line.contains(&power), "frame {frame}: {line} vs {power}");
            assert!(line.contains(&memory), "frame {frame}: {line} vs {memory}");
        }
    }
    assert!(lost(&["-P"]).contains("[0] Tesla T4 | 50°C,  10 %,   31 /  70 W"));
    let first = lost_at("0", &["-P", "--no-header"]);
    assert!(
        first.starts_with("[0] Tesla T4 | 43°C,  34 %,   40 /  70 W"),
        "{first}"
    );
}

/// The header said `2026-11-01 10:00:20 UTC`; gpustat writes local time in the C locale's `%c`.
#[test]
fn the_header_is_local_time_as_gpustat_writes_it() {
    let fixture = cli::fixture("gpu-lost");
    let header = |tz: &str| {
        let out = cli::command(&["stat", "--fixture", &fixture, "--frame", "20"])
            .env("TZ", tz)
            .output()
            .expect("gpuscope runs");
        let text = cli::ok_stdout(out, tz);
        text.lines().next().expect("a header").to_string()
    };
    assert_eq!(
        header("UTC0"),
        "ip-10-0-3-117  Sun Nov  1 10:00:20 2026  515.105.01"
    );
    assert_eq!(
        header("XST-5:30"),
        "ip-10-0-3-117  Sun Nov  1 15:30:20 2026  515.105.01"
    );
    // A short host name is padded to the name column and the index's width, as gpustat does.
    let mig = stat(&["--fixture", &cli::fixture("h100-mig"), "--frame", "18"]);
    let first = mig.lines().next().expect("a header");
    assert!(
        first.starts_with(&format!("{:<24}  ", "h100-mig-vm")),
        "{first}"
    );
}

/// gpustat shows whole GPUs: a MIG device's processes are on its GPU's line.
#[test]
fn mig_processes_are_on_their_gpus_line() {
    let fixture = cli::fixture("h100-mig");
    let mig = stat(&["--fixture", &fixture, "--frame", "18", "-cp"]);
    let lines: Vec<&str> = mig.lines().collect();
    assert_eq!(lines.len(), 2, "{mig}");
    assert!(
        lines[1].ends_with(
            "| memhog/21180(2296M) memhog/21181(1272M) gpu_burn/21198(7484M) python3/21230(3180M)"
        ),
        "{mig}"
    );
    // A MIG device's id keeps its GPU's line; an id that names no device is refused.
    let one = stat(&["--fixture", &fixture, "--frame", "18", "-cp", "--id", "0:1"]);
    assert_eq!(one, mig);
    let out = cli::run(&["stat", "--fixture", &fixture, "--id", "0:9"]);
    cli::assert_usage_error(&out, "--id 0:9", "0:9");
}

#[test]
fn names_are_shortened_from_the_left_as_gpustat_does() {
    let narrow = lost(&["--gpuname-width", "6"]);
    assert!(narrow.starts_with("[0] …la T4 | 50°C"), "{narrow}");
    let none = lost(&["--gpuname-width", "0"]);
    assert!(none.starts_with("[0]  50°C,  10 % |"), "{none}");
}

/// `gpustat -v` turned on gpuscope's log; gpustat prints its version.
#[test]
fn dash_v_prints_the_version_as_gpustat() {
    for args in [
        &["stat", "-v"][..],
        &["gpustat", "--version"],
        &["stat", "--demo", "-v"],
    ] {
        let out = cli::stdout(args);
        assert!(
            out.starts_with("gpustat 1.1.1 (gpuscope "),
            "{args:?}: {out}"
        );
        assert_eq!(out.lines().count(), 1, "{out}");
    }
}

/// Each colour option of `stat`: forced colour is gpustat's (its reset `ESC[0;10m`), never and
/// `--no-color` none, and auto none off a terminal or with NO_COLOR.
#[test]
fn each_colour_option_of_stat_does_what_it_says() {
    let fixture = cli::fixture("gpu-lost");
    let run = |extra: &[&str], no_color: bool| {
        let mut c = cli::command(
            &[
                &["stat", "--fixture", fixture.as_str(), "--frame", "20"][..],
                extra,
            ]
            .concat(),
        );
        if no_color {
            c.env("NO_COLOR", "1");
        }
        cli::ok_stdout(c.output().expect("gpuscope runs"), extra)
    };
    let plain = run(&[], false);
    assert!(!plain.contains('\x1b'), "{plain}");
    for forced in [&["--force-color"][..], &["--color"], &["--color", "always"]] {
        let text = run(forced, false);
        // GPU 0's temperature (50 °C) bold red, its utilization (10 %) plain green.
        assert!(
            text.contains("\x1b[1m\x1b[31m 50°C\x1b[0;10m, \x1b[32m 10 %\x1b[0;10m"),
            "{forced:?}: {text:?}"
        );
        assert!(text.contains("\x1b[36m[0]\x1b[0;10m \x1b[34mTesla T4\x1b[0;10m |"));
        // --force-color even with NO_COLOR, as gpustat.
        assert!(
            run(forced, true).contains('\x1b'),
            "{forced:?} with NO_COLOR"
        );
    }
    for off in [
        &["--no-color"][..],
        &["--color", "never"],
        &["--color", "auto"],
    ] {
        assert_eq!(run(off, false), plain, "{off:?}");
    }
}

/// On a terminal, auto colours (terminfo's reset, as gpustat's auto), unless NO_COLOR is set.
#[test]
fn stat_colours_a_terminal_unless_no_color() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no `script` to give gpuscope a terminal");
        return;
    }
    let fixture = cli::fixture("gpu-lost");
    let on_terminal = |no_color: bool| {
        let line = format!(
            "{} stat --fixture {fixture} --frame 20",
            env!("CARGO_BIN_EXE_gpuscope")
        );
        let mut c = std::process::Command::new("script");
        c.args(["-qec", &line, "/dev/null"]);
        cli::without_settings(&mut c);
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let out = cli::output_ok(&mut c);
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let coloured = on_terminal(false);
    assert!(
        coloured.contains("\x1b[36m[0]\x1b(B\x1b[m "),
        "{coloured:?}"
    );
    let plain = on_terminal(true);
    assert!(
        plain.contains("[0] Tesla T4 |") && !plain.contains("\x1b[36m"),
        "{plain:?}"
    );
}
