//! No code: see this crate's Cargo.toml. Its dependencies' features are
//! the point; nothing here is called.
