//! Empty: it makes `cc` a build dependency so that its `parallel` feature
//! is on in every build (see Cargo.toml).
fn main() {}
