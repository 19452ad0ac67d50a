#![doc = include_str!("../README.md")]

mod criteria;
mod select;

pub use criteria::{Criteria, Error, Size};
pub use select::{
    account_matches, select_devices, select_from_figures, select_from_snapshots, Candidate, Check,
    Constraint, Fate, Figures, Format, Outcome, Pool, Selection, Unusable,
};
