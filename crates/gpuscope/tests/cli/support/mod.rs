//! What the modules of the CLI tests share: the binary run without the caller's settings
//! (`cli`), edited copies of the scenario fixtures (`edited_fixture`), an exporter on a free
//! port and a parser of what it serves (`export_support`), a stub Prometheus
//! (`fleet_support`), a child to signal (`sleeping_child`) and a limit on a command's tasks
//! (`task_limit`).

pub mod cli;
pub mod edited_fixture;
pub mod export_support;
pub mod fleet_support;
pub mod task_limit;
// The unit tests of `top` (src/) include this file by its path too, so it stays where they
// find it.
#[path = "../../sleeping_child/mod.rs"]
pub mod sleeping_child;
