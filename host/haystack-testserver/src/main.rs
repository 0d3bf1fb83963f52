//! `haystack-testserver`: a Haystack HTTP server for tests (see the crate doc
//! and docs/haystack-test-server.md).

fn main() -> anyhow::Result<()> {
    haystack_testserver::main_with_args(std::env::args_os())
}
