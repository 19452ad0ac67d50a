//! `gpuscope select` end to end, through the binary: the printed value, separators, exit
//! codes. Expected devices are worked out from the fixture files, read here as plain JSON.
//!
//! The runs go through the `nvisel` front door (`gpuscope nvisel ...`, what a link named
//! nvisel runs), because the habits tested are nvisel's: its short options `-c`, `-C`, `-G`
//! and `-i`, which gpuscope's own grammar gives to other options, reach `select` as
//! `--min-count`, `--max-count`, `--max-gpu-utilization` and `--inherit`. `select`'s own
//! spelling is tested in grammar.rs.

use std::collections::BTreeSet;
use std::process::Output;

use serde_json::Value;

use crate::support::{cli, edited_fixture};
use cli::fixture;
use edited_fixture::EditedFixture;

fn run_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = cli::command(&["nvisel"]);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("gpuscope runs")
}

fn run(args: &[&str]) -> Output {
    run_with(args, &[])
}

/// Stdout of a run that must succeed.
fn stdout(args: &[&str]) -> String {
    cli::ok_stdout(run(args), ("nvisel", args))
}

/// The demo box at frame 5, with `args`.
fn demo(args: &[&str]) -> String {
    let mut all = vec!["--demo", "--frame", "5"];
    all.extend_from_slice(args);
    stdout(&all)
}

/// One GPU of a fixture at a frame, as the file has it.
#[derive(Debug, Clone)]
struct Gpu {
    index: String,
    uuid: String,
    free: Option<u64>,
    gpu: Option<u64>,
}

fn gpus(stem: &str, frame: usize) -> Vec<Gpu> {
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(fixture(stem)).unwrap()).unwrap();
    let n = fx["system"]["device_count"]["ok"].as_u64().unwrap();
    (0..n)
        .map(|i| {
            let id = i.to_string();
            let d = &fx["frames"][frame]["devices"][&id];
            Gpu {
                uuid: fx["devices"][&id]["uuid"]["ok"].as_str().unwrap().into(),
                free: d["memory_info"]["ok"]["free"].as_u64(),
                gpu: d["utilization_rates"]["ok"]["gpu"].as_u64(),
                index: id,
            }
        })
        .collect()
}

/// The GPUs passing `keep`, most free memory first.
fn best_first(gpus: &[Gpu], keep: impl Fn(&Gpu) -> bool) -> Vec<Gpu> {
    let mut v: Vec<Gpu> = gpus.iter().filter(|g| keep(g)).cloned().collect();
    v.sort_by_key(|g| std::cmp::Reverse(g.free));
    v
}

fn indices(gpus: &[Gpu]) -> String {
    gpus.iter()
        .map(|g| g.index.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn prints_every_gpu_most_free_memory_first() {
    let want = indices(&best_first(&gpus("h100-sxm-8gpu", 5), |_| true));
    assert_eq!(demo(&[]), want + "\n");
}

#[test]
fn counts_cap_and_name_the_best() {
    let best = best_first(&gpus("h100-sxm-8gpu", 5), |_| true);
    assert_eq!(demo(&["-n", "2"]), indices(&best[..2]) + "\n");
    assert_eq!(demo(&["--max-count", "3"]), indices(&best[..3]) + "\n");
    assert_eq!(demo(&["-C", "0"]), "\n");
    let uuids: Vec<&str> = best[..2].iter().map(|g| g.uuid.as_str()).collect();
    assert_eq!(demo(&["-n", "2", "-O", "uuid"]), uuids.join(",") + "\n");
}

#[test]
fn memory_and_utilization_limits_filter() {
    let all = gpus("h100-sxm-8gpu", 5);
    let gib44 = 44u64 << 30;
    let want = best_first(&all, |g| g.free >= Some(gib44));
    assert!(
        !want.is_empty() && want.len() < all.len(),
        "the limit splits"
    );
    assert_eq!(demo(&["-f", "44GiB"]), indices(&want) + "\n");
    assert_eq!(
        demo(&["--min-free-memory", &gib44.to_string()]),
        indices(&want) + "\n"
    );

    let want = best_first(&all, |g| g.gpu <= Some(70));
    assert!(
        !want.is_empty() && want.len() < all.len(),
        "the limit splits"
    );
    assert_eq!(demo(&["-G", "70"]), indices(&want) + "\n");

    // Every H100 has 80 GB: 80GB passes, 90GB passes none.
    assert_eq!(demo(&["-t", "80GB", "-n", "1"]).trim().len(), 1);
    assert_eq!(demo(&["--min-total-memory", "90GB"]), "\n");
    // Memory-bandwidth utilization is at most 50% at frame 5.
    assert_eq!(demo(&["-M", "50"]).trim().split(',').count(), 8);
    assert_eq!(demo(&["-M", "0"]), "\n");
}

#[test]
fn tolerance_loosens_and_sorts_the_strict_first() {
    let all = gpus("h100-sxm-8gpu", 5);
    let gib44 = 44u64 << 30;
    let loose = gib44 as f64 * 0.9;
    let strict = best_first(&all, |g| g.free >= Some(gib44));
    let within = best_first(&all, |g| {
        g.free < Some(gib44) && g.free.is_some_and(|f| f as f64 >= loose)
    });
    assert!(!within.is_empty());
    let want = indices(&[strict, within].concat());
    assert_eq!(
        demo(&["-f", "44GiB", "--tolerance", "10"]),
        want.clone() + "\n"
    );
    assert_eq!(demo(&["-f", "44GiB", "--tol", "10"]), want + "\n");
}

#[test]
fn separators() {
    let best = best_first(&gpus("h100-sxm-8gpu", 5), |_| true);
    let ids: Vec<&str> = best[..3].iter().map(|g| g.index.as_str()).collect();
    assert_eq!(demo(&["-n", "3", "--sep", ":"]), ids.join(":") + "\n");
    assert_eq!(demo(&["-n", "3", "-s", " "]), ids.join(" ") + "\n");
    assert_eq!(demo(&["-n", "3", "--newline"]), ids.join("\n") + "\n");
    assert_eq!(demo(&["-n", "3", "-0"]), ids.join("\0") + "\0");
    assert_eq!(demo(&["-n", "3", "--null"]), ids.join("\0") + "\0");
    let both = run(&["--demo", "--newline", "--null"]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn no_sort_keeps_index_order() {
    assert_eq!(demo(&["--no-sort"]), "0,1,2,3,4,5,6,7\n");
    assert_eq!(demo(&["-S", "-n", "2"]), "0,1\n");
}

#[test]
fn the_value_for_cuda_visible_devices_is_echoed_on_stderr() {
    let out = run(&["--demo", "--frame", "5", "-n", "2", "--sep", " "]);
    let value = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .replace(' ', ",");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!("CUDA_VISIBLE_DEVICES=\"{value}\"")),
        "{err}"
    );
}

/// `select --inherit` prints CUDA ordinals under the inherited CUDA_VISIBLE_DEVICES; the nvisel
/// door prints each device's own index, as nvisel 1.7.2 does (issue 34: 48 cases of the
/// differential), for `CUDA_VISIBLE_DEVICES=$(nvisel -i ...)`, which sets the variable anew.
#[test]
fn inherit_chooses_among_the_visible_devices_and_prints_cuda_ordinals() {
    let all = gpus("h100-sxm-8gpu", 5);
    // CUDA device 0 is GPU 3, 1 is GPU 5: the freer comes first.
    let (want, nvisel_want) = if all[5].free > all[3].free {
        ("1,0", "5,3")
    } else {
        ("0,1", "3,5")
    };
    let select = |args: &[&str], cvd: Option<&str>| {
        let mut c = cli::command(&[&["select", "--demo", "--frame", "5"][..], args].concat());
        if let Some(v) = cvd {
            c.env("CUDA_VISIBLE_DEVICES", v);
        }
        cli::ok_stdout(c.output().expect("gpuscope runs"), args)
    };
    assert_eq!(select(&["--inherit", "3,5"], None), format!("{want}\n"));
    assert_eq!(demo(&["-i", "3,5"]), format!("{nvisel_want}\n"));
    assert_eq!(select(&["--inherit", "--no-sort"], Some("7,1")), "0,1\n");
    assert_eq!(
        select(&["--inherit", &all[6].uuid[..12], "-S"], None),
        "0\n"
    );
    assert_eq!(
        demo(&["--inherit", "3,5", "-n", "1", "-O", "uuid"]).trim(),
        {
            let g = if want == "1,0" { &all[5] } else { &all[3] };
            g.uuid.clone()
        }
    );
    // From the environment when the value is omitted.
    let out = run_with(
        &["--demo", "--frame", "5", "-i", "-S"],
        &[("CUDA_VISIBLE_DEVICES", "7,1")],
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "7,1\n");
    // Unset: every GPU, in CUDA's order; empty: none.
    assert_eq!(demo(&["-i", "-S"]).trim().split(',').count(), 8);
    let out = run_with(
        &["--demo", "--frame", "5", "-i"],
        &[("CUDA_VISIBLE_DEVICES", "")],
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "\n");
    // A UUID prefix names its GPU (nvisel -i -S): by its index through the door.
    let prefix = &all[6].uuid[..12];
    assert_eq!(demo(&["-i", prefix, "-S"]), "6\n");
}

/// geforce-desktop at frame 39: GPU 0 has 4068474880 bytes free, GPU 1 5479858176; alex runs
/// the miner (2883 MiB) and the desktop on GPU 0.
#[test]
fn accounts_as_free() {
    let base = ["--fixture", &fixture("geforce-desktop"), "--frame", "39"];
    let with = |extra: &[&str]| stdout(&[&base[..], extra].concat());
    assert_eq!(with(&["-f", "5GiB"]), "1\n");
    let both: BTreeSet<String> = with(&["-f", "5GiB", "--account-as-free", "alex"])
        .trim()
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(both, ["0".to_string(), "1".to_string()].into());
    assert_eq!(with(&["-f", "5GiB", "--free-accounts", "nobody"]), "1\n");
    // Without a name, $USER.
    let out = run_with(
        &[&base[..], &["-f", "5GiB", "--account-as-free"]].concat(),
        &[("USER", "alex")],
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim().len(), 3);
}

#[test]
fn mig_devices_are_printed_by_uuid() {
    let fx: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("h100-mig")).unwrap()).unwrap();
    let frame = &fx["frames"][20]["devices"];
    // The MIG device with the most free memory.
    let best = ["0:0", "0:1", "0:2", "0:3"]
        .into_iter()
        .max_by_key(|id| frame[*id]["memory_info"]["ok"]["free"].as_u64())
        .unwrap();
    let uuid = fx["devices"][best]["uuid"]["ok"].as_str().unwrap();
    let base = ["--fixture", &fixture("h100-mig"), "--frame", "20"];
    assert_eq!(stdout(&base), format!("{uuid}\n"));
    assert_eq!(
        stdout(&[&base[..], &["-O", "index"]].concat()),
        format!("{uuid}\n")
    );
    // Two cannot be had: the status says short; nvisel prints the one it found (issue 34),
    // `select` none.
    let out = run(&[&base[..], &["-c", "2"]].concat());
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{uuid}\n"));
    let out = cli::run(&[&["select"][..], &base[..], &["--min-count", "2"]].concat());
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
}

/// Regression: `select` on gpu-lost.json at a late frame (GPU 2 is lost from frame 15) printed
/// GPU 2, last, whenever no memory limit was given. It is never printed, with or without
/// limits, and `--explain` says why.
#[test]
fn select_never_chooses_a_lost_gpu_and_explain_says_why() {
    for frame in ["15", "20", "31"] {
        let base = ["--fixture", &fixture("gpu-lost"), "--frame", frame];
        for extra in [&[][..], &["-n", "1"], &["-S"], &["-f", "1"], &["-c", "4"]] {
            let out = run(&[&base[..], extra].concat());
            let printed = String::from_utf8(out.stdout).unwrap();
            // Four asked, three usable: short, exit 4, the three printed (nvisel's habit).
            let short = extra == ["-c", "4"];
            assert_eq!(out.status.code(), Some(if short { 4 } else { 0 }));
            let ids: Vec<&str> = printed.split_terminator(['\n', ',']).collect();
            assert!(!ids.contains(&"2"), "frame {frame} {extra:?}: {printed}");
            let want = match extra {
                ["-n", "1"] => 1,
                _ => 3,
            };
            assert_eq!(ids.len(), want, "frame {frame} {extra:?}: {printed}");
        }
        let out = run(&[&base[..], &["-n", "1", "--explain"]].concat());
        let err = String::from_utf8(out.stderr).unwrap();
        let line = err
            .lines()
            .find(|l| l.split_whitespace().next() == Some("2"))
            .unwrap_or_else(|| panic!("no line for GPU 2: {err}"));
        assert!(line.contains("refused: lost ("), "{line}");
        assert!(line.contains("N/A"), "{line}");
    }
    // Before the loss, GPU 2 is chosen like any other.
    let before = stdout(&["--fixture", &fixture("gpu-lost"), "--frame", "0"]);
    assert!(before.trim().split(',').any(|id| id == "2"), "{before}");
}

#[test]
fn nothing_qualifies() {
    // Nothing asked for at least: an empty value, success.
    let out = run(&["--demo", "--frame", "5", "-f", "1TiB"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "\n");
    // At least one asked for: status 4, it says why; through the nvisel door the (empty) list
    // is printed as nvisel prints it.
    let out = run(&["--demo", "--frame", "5", "-f", "1TiB", "-c", "1"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "\n");
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("not enough devices"));
    // More than the machine has: status 4. `select` prints no partial list on stdout (it would
    // slip into `CUDA_VISIBLE_DEVICES=$(...)` unnoticed); the nvisel door prints the eight
    // there are, as nvisel does.
    let out = cli::run(&["select", "--demo", "--frame", "5", "--min-count", "9"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
    let out = run(&["--demo", "--frame", "5", "-c", "9"]);
    assert_eq!(out.status.code(), Some(4));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(printed.trim_end().split(',').count(), 8, "{printed}");
}

/// Regression: with fewer qualifying devices than --min-count, `--explain` listed them as
/// "selected" and then said too few qualify.
#[test]
fn explain_agrees_with_the_outcome_when_too_few_qualify() {
    let all = gpus("h100-sxm-8gpu", 5);
    // A limit that some but not all GPUs meet, and a count above how many meet it.
    let mut frees: Vec<u64> = all.iter().filter_map(|g| g.free).collect();
    frees.sort_unstable();
    let limit = frees[frees.len() / 2];
    let qualifying = all.iter().filter(|g| g.free >= Some(limit)).count();
    assert!(qualifying > 0 && qualifying < all.len(), "{frees:?}");
    let want = (qualifying + 1).to_string();
    let out = run(&[
        "--demo",
        "--frame",
        "5",
        "-f",
        &format!("{limit}B"),
        "-c",
        &want,
        "--explain",
    ]);
    assert_eq!(out.status.code(), Some(4));
    // Through the nvisel door those that qualify are printed (issue 34), and said so.
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        printed.trim_end().split(',').count(),
        qualifying,
        "{printed}"
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("selected #"), "{err}");
    assert!(err.contains("printed all the same"), "{err}");
    let qualify_lines = err
        .lines()
        .filter(|l| {
            l.contains(&format!(
                "but only {qualifying} qualify and --min-count is {want}"
            ))
        })
        .count();
    assert_eq!(qualify_lines, qualifying, "{err}");
}

#[test]
fn bad_input_exits_2_and_names_it() {
    for (args, needle) in [
        (&["-f", "8 gigs"][..], "8 gigs"),
        (&["--min-total-memory", "lots"][..], "lots"),
        (
            &["-c", "3", "-C", "1"][..],
            "--max-count 1 is below --min-count 3",
        ),
        (&["-G", "-5"][..], "-5"),
        (&["-O", "serial"][..], "serial"),
        (&["--tolerance", "x"][..], "x"),
    ] {
        let out = run(&[&["--demo"][..], args].concat());
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = run(&["--fixture", "/no/such/file.json"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn explain_tells_why() {
    let out = run(&["--demo", "--frame", "5", "-f", "44GiB", "--explain"]);
    let err = String::from_utf8(out.stderr).unwrap();
    let all = gpus("h100-sxm-8gpu", 5);
    for g in &all {
        let line = err
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&g.index))
            .unwrap_or_else(|| panic!("no line for GPU {}: {err}", g.index));
        if g.free >= Some(44 << 30) {
            assert!(line.contains("selected"), "{line}");
        } else {
            assert!(line.contains("rejected: min-free-memory"), "{line}");
        }
    }
}

/// Regression: a GPU whose memory cannot be read (here: no permission at frame 5) was chosen
/// when no memory limit was given. It is never printed, and `--explain` says why.
#[test]
fn select_never_chooses_a_gpu_whose_memory_cannot_be_read() {
    let fx = EditedFixture::new("gpu-lost", "select-memory", |fx| {
        fx["frames"][5]["devices"]["1"]["memory_info"] =
            serde_json::json!({"err": "no_permission"});
        fx["frames"][5]["devices"]["3"]["memory_info"] = serde_json::json!({"err": "timeout"});
    });
    let out = run(&["--fixture", &fx.path(), "--frame", "5", "--explain"]);
    assert_eq!(out.status.code(), Some(0));
    let printed = String::from_utf8(out.stdout).unwrap();
    let ids: BTreeSet<&str> = printed.trim().split(',').collect();
    assert_eq!(ids, BTreeSet::from(["0", "2"]), "{printed}");
    let err = String::from_utf8(out.stderr).unwrap();
    let line = |id: &str| {
        err.lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no line for GPU {id}: {err}"))
            .to_string()
    };
    assert!(line("1").contains("refused: memory: N/A ("), "{err}");
    assert!(
        line("3").contains("refused: memory: N/A (timed out"),
        "{err}"
    );
}

/// k8s-time-slicing at frame 4: three pods share GPU 0. `--account-as-free pod:NAME` counts the
/// memory of that pod's processes as free, and only that pod's (in its namespace, when named).
#[test]
fn a_pods_memory_counts_as_free() {
    let fx: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("k8s-time-slicing")).unwrap())
            .unwrap();
    let dy = &fx["frames"][4]["devices"]["0"];
    let free = dy["memory_info"]["ok"]["free"].as_u64().unwrap();
    let pod_memory: u64 = dy["compute_processes"]["ok"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            fx["host"]["processes"][p["pid"].to_string()]["container"]["pod"] == "finetune-a-0"
        })
        .map(|p| p["used_gpu_memory"].as_u64().unwrap())
        .sum();
    assert!(pod_memory > 0);
    // More than GPU 0 has free, less than it has with the pod's memory counted as free; no
    // MIG device of GPU 1 has as much.
    let need = (free + pod_memory / 2).to_string();
    let base = [
        "--fixture",
        &fixture("k8s-time-slicing"),
        "--frame",
        "4",
        "-f",
        &need,
    ];
    let chosen = |extra: &[&str]| {
        let out = run(&[&base[..], extra].concat());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    assert_eq!(chosen(&[]), "");
    assert_eq!(chosen(&["--account-as-free", "pod:finetune-a-0"]), "0");
    assert_eq!(
        chosen(&["--account-as-free", "pod:ml-research/finetune-a-0"]),
        "0"
    );
    assert_eq!(
        chosen(&["--account-as-free", "pod:serving/finetune-a-0"]),
        ""
    );
    // The other pods on GPU 0 use less: not enough.
    assert_eq!(chosen(&["--account-as-free", "pod:notebook-7f9c"]), "");
}

/// `--healthy` on the 8-GPU recording skips GPU 2 from the frame of its XID 79 (frame 14) on,
/// and says why with `--explain`; before it GPU 2 is chosen like the rest.
#[test]
fn healthy_skips_a_gpu_with_an_xid_since_start() {
    let path = fixture("h100-sxm-8gpu");
    let chosen = |frame: &str| -> BTreeSet<String> {
        stdout(&["--fixture", &path, "--frame", frame, "--healthy"])
            .trim()
            .split(',')
            .map(str::to_string)
            .collect()
    };
    assert!(chosen("13").contains("2"));
    assert!(!chosen("14").contains("2"));
    assert!(chosen("14").contains("0"));
    let out = run(&[
        "--fixture",
        &path,
        "--frame",
        "20",
        "--healthy",
        "--explain",
    ]);
    let why = String::from_utf8_lossy(&out.stderr);
    let row = why
        .lines()
        .find(|l| l.starts_with("2 "))
        .unwrap_or_else(|| panic!("no line for GPU 2: {why}"));
    assert!(row.contains("needs attention (xid_79)"), "{why}");
}
