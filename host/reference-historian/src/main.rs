//! The `reference-historian` binary; the program lives in `app`.

fn main() {
    std::process::exit(reference_historian::app::main_with_args(std::env::args_os()));
}
