//! `cargo xtask rewrite-fixture`: rewrites a fixture into the current layout (schema version,
//! events as a log), its values unchanged.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gpu_backend::fixture::Style;
use gpu_backend::Fixture;

/// What to rewrite.
#[derive(clap::Args)]
pub struct Args {
    /// The fixture to read: any layout this gpuscope reads, plain or compressed.
    pub input: PathBuf,
    /// Where to write it (default: over the input, through a temporary file); compressed as
    /// the name says (`.json.gz`, `.json.zst`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// The layout of the JSON: `pretty` (indented, the form kept in fixtures/) or `compact`
    /// (a line per frame, the form recordings are written in).
    #[arg(long, value_enum, default_value_t = StyleArg::Pretty)]
    pub style: StyleArg,
}

/// [`Style`] as a command-line value.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum StyleArg {
    /// Indented.
    Pretty,
    /// A line per frame.
    Compact,
}

/// Reads `input`, writes it in the current layout, reads the result back and checks that it
/// holds the same values; prints the sizes before and after.
pub fn run(args: Args) -> Result<()> {
    let fixture = Fixture::load(&args.input).map_err(|e| anyhow::anyhow!("{e}"))?;
    let before = std::fs::metadata(&args.input)
        .with_context(|| format!("cannot read {}", args.input.display()))?
        .len();
    let out = args.out.unwrap_or_else(|| args.input.clone());
    let style = match args.style {
        StyleArg::Pretty => Style::Pretty,
        StyleArg::Compact => Style::Compact,
    };
    fixture
        .save(&out, style)
        .with_context(|| format!("cannot write {}", out.display()))?;
    let back = Fixture::load(&out).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(at) = back.first_difference(&fixture) {
        bail!(
            "{} does not read back as {} did, at {at}",
            out.display(),
            args.input.display()
        );
    }
    let after = std::fs::metadata(&out)
        .with_context(|| format!("cannot read {}", out.display()))?
        .len();
    eprintln!(
        "rewrote {} ({before} bytes) as {} ({after} bytes, schema version {}): the same values",
        args.input.display(),
        out.display(),
        gpu_backend::fixture::SCHEMA_VERSION
    );
    Ok(())
}
