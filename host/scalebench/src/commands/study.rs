//! `scalebench study nats`: run the study ([`crate::study::nats`]) and
//! print where its results are.

use crate::study::{run_study, StudyNatsArgs};

pub fn nats(args: StudyNatsArgs) -> anyhow::Result<()> {
    let dir = run_study(args)?;
    println!("study written to {}", dir.display());
    println!("  report: {}", dir.join("report.md").display());
    println!("  data:   {}", dir.join("study.json").display());
    Ok(())
}
