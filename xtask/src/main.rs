//! Project workflows that plain cargo cannot do. Run as `cargo xtask <command>`.

mod bench_export;
mod bench_export_attacks;
mod bench_fleet;
mod bench_oneshot;
mod bench_setup;
mod bench_viewer;
mod cost_profile;
mod import_smi;
mod live;
mod long_recording;
mod man;
mod record;
mod rewrite;
mod scenarios;
mod tidy;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "gpuscope project workflows")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the scenario fixtures of fixtures/ from their generators (see xtask/src/scenarios).
    GenFixtures {
        /// Directory to write to.
        #[arg(long, default_value = "fixtures")]
        out_dir: PathBuf,
    },
    /// Turns `nvidia-smi -q -x` output into a one-frame fixture.
    ImportSmi(import_smi::Args),
    /// Times one-shot snapshots of gpuscope, `nvitop -1` and `gpustat --json` over the same
    /// fake NVML library, each call costing a real H100's (or `--real`; see
    /// docs/benchmarks.md).
    BenchOneshot(bench_oneshot::Args),
    /// Load on `gpuscope export`: scrapes per second, latency, CPU and RSS, and idle CPU beside
    /// nvitop-exporter's (see docs/benchmarks.md).
    BenchExport(bench_export::Args),
    /// Issue 32's attacks on `gpuscope export`, timed for each binary given: a correct login
    /// during a wrong-password flood, known against unknown users, start with a costly hash,
    /// scrapes during a slot flood (see docs/security.md, "Figures").
    BenchExportAttacks(bench_export_attacks::Args),
    /// CPU of the viewers, `gpuscope top` beside `nvitop`, each in tmux at 200x60, with the
    /// GPU idle and loaded (see docs/benchmarks.md).
    BenchViewer(bench_viewer::Args),
    /// One refresh of the fleet view (`snapshot --prometheus`) over a synthetic fleet of 1,000
    /// hosts from a stub Prometheus: time after the answers, peak RSS (see docs/benchmarks.md).
    BenchFleet(bench_fleet::Args),
    /// Writes gpuscope's man pages (`gpuscope.1` and `gpuscope-<command>.1`) into a directory; read
    /// one with `man -l target/man/gpuscope.1`.
    Man {
        /// Directory to write to.
        #[arg(long, default_value = "target/man")]
        out_dir: PathBuf,
    },
    /// Records a fixture from the real NVML (needs an NVIDIA GPU and driver), streaming it to
    /// the file (`--frames N` or `--duration 1h`; `.json.zst` or `.json.gz` to compress) with
    /// each NVML function's cost. Ctrl+C stops early and keeps the frames recorded so far.
    RecordFixture(record::RecordArgs),
    /// Rewrites a fixture into the current layout (schema version, events as a log), its values
    /// unchanged: `cargo xtask rewrite-fixture fixtures/h100-real.json`.
    RewriteFixture(rewrite::Args),
    /// Writes a long, many-GPU recording built from a real one: its GPU repeated with distinct
    /// ids, its frames looped with their event rate kept (default: 8 GPUs, one hour).
    GenLongRecording(long_recording::GenArgs),
    /// Size on disk and load time of the long recording, in the current layout (plain, gzip,
    /// zstd) and in schema version 1's (see docs/benchmarks.md; run with --release).
    BenchFixtureLoad(long_recording::BenchArgs),
    /// Turns measured NVML call costs (JSON lines, as the real-hardware sessions wrote them)
    /// into a cost profile for `GPUSCOPE_FAKE_NVML_COSTS` (fixtures/costs/).
    CostProfile(cost_profile::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::GenFixtures { out_dir } => scenarios::write_all(&out_dir),
        Command::ImportSmi(args) => import_smi::run(args),
        Command::BenchOneshot(args) => bench_oneshot::run(args),
        Command::BenchExport(args) => bench_export::run(args),
        Command::BenchExportAttacks(args) => bench_export_attacks::run(args),
        Command::BenchViewer(args) => bench_viewer::run(args),
        Command::BenchFleet(args) => bench_fleet::run(args),
        Command::Man { out_dir } => man::run(&out_dir),
        Command::RecordFixture(args) => record::run(args),
        Command::RewriteFixture(args) => rewrite::run(args),
        Command::GenLongRecording(args) => long_recording::gen(args),
        Command::BenchFixtureLoad(args) => long_recording::bench(args),
        Command::CostProfile(args) => cost_profile::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
