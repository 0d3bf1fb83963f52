//! `scalebench report RESULT.json… [--out DIR]`: write a ladder report
//! (see `report`); `--bench` times rendering one (see `report_bench`).

use std::path::PathBuf;

use crate::cli::ReportArgs;
use crate::results::RunResult;

/// Where a report goes by default: `<run-id>-report` beside the first result.
pub fn default_out(first_file: &std::path::Path, run: &RunResult) -> PathBuf {
    first_file.parent().unwrap_or(std::path::Path::new(".")).join(format!("{}-report", run.run_id))
}

pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    if args.bench {
        return crate::commands::report_bench::run(&args.record);
    }
    let files = crate::commands::table::collect(&args.files)?;
    let runs = files.iter().map(|f| RunResult::load(f)).collect::<anyhow::Result<Vec<_>>>()?;
    let out = args.out.clone().unwrap_or_else(|| default_out(&files[0], &runs[0]));
    let written = crate::report::write(&runs, &out)?;
    tracing::info!(
        "report: {} ({} charts in {})",
        written.markdown.display(),
        written.charts.len(),
        out.join("charts").display()
    );
    println!("{}", written.html.display());
    Ok(())
}
