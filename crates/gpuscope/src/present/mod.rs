//! What the commands show, shared by several of them.

pub mod compact;
pub mod json;
pub mod plan;
pub mod query;
pub mod text;
pub mod time;
pub mod value;
