//! `scalebench compare A.json B.json… [--by target|run|model]`: tables on
//! stdout, compare.md and overlaid charts in `--out` (see `compare`).

use std::path::PathBuf;

use crate::cli::{CompareArgs, UsageError};
use crate::compare::Comparison;
use crate::results::RunResult;

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let files = crate::commands::table::collect(&args.files)?;
    if files.len() < 2 {
        return Err(UsageError("compare needs at least two ladder results\nhint: scalebench compare results/<run-a>-ladder.json results/<run-b>-ladder.json".into()).into());
    }
    let runs = files.iter().map(|f| RunResult::load(f)).collect::<anyhow::Result<Vec<_>>>()?;
    let cmp = Comparison::new(&runs, args.by, args.allow_different_hosts).map_err(|e| UsageError(e.to_string()))?;
    let out = args.out.clone().unwrap_or_else(|| {
        let dir = files[0].parent().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        dir.join(format!("compare-{}-vs-{}", runs[0].run_id, runs[1].run_id))
    });
    print!("{}", cmp.markdown());
    let written = cmp.write(&out)?;
    eprintln!("compare: {} and {} charts in {}", written[0].display(), written.len() - 1, out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::compare::Comparison;

    #[test]
    fn a_run_over_tls_and_a_plain_run_are_different_set_ups_unless_allowed() {
        let plain = super::super::report_bench::synthetic_ladder(&[1000], 60.0);
        let mut tls = plain.clone();
        tls.run_id = "over-tls".into();
        tls.tls.insert(
            "mqtt".into(),
            crate::tls::Negotiated {
                protocol: "TLSv1.3".into(),
                cipher_suite: "TLS13_AES_256_GCM_SHA384".into(),
                client_certificate: false,
            },
        );
        let runs = vec![plain, tls];
        let refused = Comparison::new(&runs, None, false).err().expect("TLS against plain is refused");
        assert!(
            refused.differences.iter().any(|d| d.contains("no TLS") && d.contains("TLS on mqtt")),
            "{:?}",
            refused.differences
        );
        assert!(Comparison::new(&runs, None, true).is_ok());
        let same = vec![runs[1].clone(), runs[1].clone()];
        assert!(Comparison::new(&same, None, false).is_ok());
    }
}
