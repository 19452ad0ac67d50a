//! Test support, not published, for what the tests of more than one crate, xtask's benchmarks
//! and its importer's tests need, so that each is written once:
//!
//! - [`loopback`]: hostile clients of `gpuscope export` on loopback (a connection from a chosen
//!   127.0.0.N, a kept-alive `GET /metrics`, basic auth, web configs, a wrong-password flood and
//!   a flood of half-open sockets), used by `crates/gpuscope/tests/cli/export_attacks.rs` and
//!   `cargo xtask bench-export-attacks`;
//! - [`smi_xml`]: small readers of `nvidia-smi -q -x`'s text (no XML parser), which share no
//!   code with the importer they check, used by `crates/gpuscope/tests/cli/reference_dumps.rs`
//!   and xtask's `import_smi` tests;
//! - [`igpu`]: the section headings of igpu's view of a device, which gpu-devices prints and
//!   `gpuscope info` shows;
//! - [`process`]: a child spawned and waited for until it has exec'd its program, for the
//!   tests that read a live process from `/proc` (gpu-backend's `LiveHost`, gpu-processes'
//!   live tables, the CLI's `top` signalling a child).

pub mod igpu;
pub mod loopback;
pub mod process;
pub mod smi_xml;
