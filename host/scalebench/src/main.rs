//! The `scalebench` binary: parses the command line and hands over to the library.

fn main() {
    let cli = <scalebench::cli::Cli as clap::Parser>::parse();
    if let Err(err) = scalebench::run(cli) {
        eprintln!("error: {err:#}");
        std::process::exit(scalebench::exit_code(&err));
    }
}
