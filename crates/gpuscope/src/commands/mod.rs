//! The commands, one module each.

pub mod doctor;
pub mod export;
pub mod info;
pub mod record;
pub mod select;
pub mod smi;
pub mod snapshot;
pub mod stat;
pub mod top;
