//! The colour options do what they say in every command that has them (issue 34): `top -1`
//! was never coloured and `snapshot --color always` did nothing to the table. For `snapshot`
//! (its table and `--compact`) and `top --once`: `--force-color` and `--color always` colour,
//! even with NO_COLOR; `--no-color`, `--color never` and `--color auto` off a terminal do not;
//! on a terminal auto colours unless NO_COLOR is set. `stat`'s are in the stat module.

use crate::support::cli;
use cli::strip_sgr;

/// The commands that colour, each over the demo at one frame.
const COMMANDS: [(&str, &[&str]); 3] = [
    ("snapshot", &["snapshot", "--demo", "--frame", "4"]),
    (
        "snapshot --compact",
        &["snapshot", "--demo", "--frame", "4", "--compact"],
    ),
    ("top --once", &["top", "--demo", "--frame", "4", "--once"]),
];

fn output(command: &[&str], extra: &[&str], no_color: bool) -> String {
    let mut c = cli::command(&[command, extra].concat());
    c.env("COLUMNS", "140");
    if no_color {
        c.env("NO_COLOR", "1");
    }
    cli::ok_stdout(c.output().expect("gpuscope runs"), (command, extra))
}

/// An SGR sequence that sets a colour (not only a reset).
fn coloured(text: &str) -> bool {
    text.contains("\x1b[3") || text.contains("\x1b[1m") || text.contains("\x1b[7m")
}

#[test]
fn forcing_colour_colours_every_command() {
    for (what, command) in COMMANDS {
        let plain = output(command, &[], false);
        assert!(!plain.contains('\x1b'), "{what}: {plain}");
        for forced in [&["--force-color"][..], &["--color", "always"]] {
            for no_color in [false, true] {
                let text = output(command, forced, no_color);
                assert!(
                    coloured(&text),
                    "{what} {forced:?} (NO_COLOR {no_color}): {text:?}"
                );
                // The same text beneath the colour.
                assert_eq!(strip_sgr(&text), plain, "{what} {forced:?}");
            }
        }
    }
}

#[test]
fn refusing_colour_leaves_every_command_plain() {
    for (what, command) in COMMANDS {
        for off in [
            &["--no-color"][..],
            &["--color", "never"],
            &["--color", "auto"],
        ] {
            let text = output(command, off, false);
            assert!(!text.contains('\x1b'), "{what} {off:?}: {text:?}");
        }
    }
}

/// The table's rows are in nvitop's colours of load: at the demo's frame 4 every GPU is busy
/// past nvitop's heavy threshold of memory (80 %) or moderate, never light.
#[test]
fn snapshot_table_rows_are_in_nvitops_load_colours() {
    let text = output(COMMANDS[0].1, &["--color", "always"], false);
    let header = text.lines().nth(1).expect("the headings");
    assert!(header.starts_with("\x1b[1mGPU "), "{header:?}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| strip_sgr(l).contains("NVIDIA H100"))
        .collect();
    assert!(!rows.is_empty(), "{text}");
    for row in rows {
        assert!(
            row.starts_with("\x1b[31m") || row.starts_with("\x1b[33m"),
            "{row:?}"
        );
        assert!(row.ends_with("\x1b[0m"), "{row:?}");
    }
}

/// `--colorful` draws the bars in spectrum colours, cell by cell: a bar in several colours.
#[test]
fn top_once_colorful_bars_take_more_colours() {
    let command = COMMANDS[2].1;
    // GPU 0's memory bar: one colour for the whole bar, or a colour per share it crosses.
    let colours_in_bar = |text: &str| {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("MEM "))
            .expect("a memory bar");
        let bar = line.split("UTIL").next().unwrap_or(line);
        bar.matches("\x1b[3").count()
    };
    let plain_bars = output(command, &["--force-color"], false);
    let spectrum = output(command, &["--force-color", "--colorful"], false);
    assert_eq!(colours_in_bar(&plain_bars), 1, "{plain_bars:?}");
    assert!(colours_in_bar(&spectrum) > 1, "{spectrum:?}");
    assert_eq!(strip_sgr(&spectrum), strip_sgr(&plain_bars));
}

/// As nvitop colours them, each device's index and its processes' GPU index are in the colour
/// of the device's load: at this frame nvitop -1 shows GPUs 0 and 1 yellow (10 % utilization)
/// and GPU 3 green (8 %, memory 9 %).
#[test]
fn top_once_colours_gpu_indices_by_their_devices_load() {
    let fixture = cli::fixture("gpu-lost");
    let command = [
        "top",
        "--fixture",
        fixture.as_str(),
        "--frame",
        "20",
        "--once",
    ];
    let text = output(&command, &["--force-color"], false);
    for (index, colour) in [("0", "33"), ("1", "33"), ("3", "32")] {
        let device = format!("\x1b[{colour}m{index:<5}\x1b[0mTesla T4  Bus ");
        assert!(text.contains(&device), "GPU {index}: {text:?}");
    }
    let process_of_3 = text
        .lines()
        .find(|l| l.contains(" 5762 "))
        .expect("GPU 3's worker");
    assert!(
        process_of_3.contains("\x1b[32m3   \x1b[0m"),
        "{process_of_3:?}"
    );
}

/// On a terminal `auto` colours `snapshot`'s table and `top -1` (as nvitop `-1`), unless
/// NO_COLOR is set or `--no-color` given.
#[cfg(target_os = "linux")]
#[test]
fn on_a_terminal_auto_colours_unless_no_color() {
    let exe = env!("CARGO_BIN_EXE_gpuscope");
    for (what, command) in [COMMANDS[0], COMMANDS[2]] {
        for (no_color, extra, expect) in
            [("", "", true), ("1", "", false), ("", " --no-color", false)]
        {
            let inner = format!(
                "stty cols 140 rows 60 && {exe} {}{extra}",
                command.join(" ")
            );
            let mut c = std::process::Command::new("script");
            c.args(["-qec", &inner, "/dev/null"]);
            cli::without_settings(&mut c);
            c.env("NO_COLOR", no_color);
            let out = cli::output_ok(&mut c);
            let screen = String::from_utf8(out.stdout).expect("UTF-8");
            assert_eq!(
                coloured(&screen),
                expect,
                "{what}{extra} NO_COLOR={no_color:?}: {screen:?}"
            );
        }
    }
}
