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
    tracing::info!("compare: {} and {} charts in {}", written[0].display(), written.len() - 1, out.display());
    gate(&args, &runs)
}

/// `--junit` and `--fail-on-regression`: the comparison for CI.
fn gate(args: &CompareArgs, runs: &[RunResult]) -> anyhow::Result<()> {
    if let Some(pct) = args.fail_on_regression {
        if !(pct.is_finite() && pct >= 0.0) {
            return Err(
                UsageError(format!("--fail-on-regression {pct}: give a percentage of 0 or more, e.g. 5")).into()
            );
        }
    }
    let pct = args.fail_on_regression.unwrap_or(f64::INFINITY);
    let compared: Vec<_> = runs[1..].iter().map(|r| (r, crate::gates::regressions(&runs[0], r, pct))).collect();
    if let Some(path) = &args.junit {
        crate::gates::write_junit(&crate::gates::compare_junit(&runs[0], &compared), path)?;
        tracing::info!("junit: {}", path.display());
    }
    let breaches: Vec<String> = compared.iter().flat_map(|(_, c)| c.iter().filter_map(|c| c.breach.clone())).collect();
    match (args.fail_on_regression, breaches.is_empty()) {
        (Some(pct), false) => Err(crate::gates::GateFailed {
            what: format!("--fail-on-regression {pct}: against {}", runs[0].run_id),
            breaches,
            hint: "the tables above show every figure; a step the first run did not have is not compared".into(),
        }
        .into()),
        _ => Ok(()),
    }
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

#[cfg(test)]
mod gates {
    //! The CI gates' rules (`crate::gates`), on synthetic ladders.
    use crate::gates::*;
    use crate::results::{RunResult, Status};

    fn ladder(steps: &[(u64, Status, f64, f64)]) -> RunResult {
        let mut r =
            crate::commands::report_bench::synthetic_ladder(&steps.iter().map(|s| s.0).collect::<Vec<_>>(), 60.0);
        for (s, (_, status, stored, p99)) in r.steps.iter_mut().zip(steps) {
            s.status = *status;
            s.ingest.stored_rps = Some(*stored);
            s.ack_latency.intended.p99_s = Some(*p99);
            if *status != Status::Pass {
                s.reasons = vec![format!("{status:?} for a reason")];
            }
        }
        r
    }

    #[test]
    fn a_ceiling_below_the_requirement_or_an_inconclusive_end_breaches_it() {
        let r = ladder(&[(1000, Status::Pass, 200.0, 0.01), (2500, Status::Fail, 400.0, 0.02)]);
        assert_eq!(ceiling_breach(&r, 1000), None);
        assert_eq!(ceiling_breach(&r, 2500).unwrap(), "the ceiling is 1,000 points, below the required 2,500");
        let r = ladder(&[(1000, Status::Pass, 200.0, 0.01), (2500, Status::Inconclusive, 400.0, 0.02)]);
        let b = ceiling_breach(&r, 1000).unwrap();
        assert!(b.starts_with("the ladder ended inconclusive at 2,500 points: Inconclusive for a reason"), "{b}");
        let r = ladder(&[(1000, Status::Fail, 200.0, 0.01)]);
        assert_eq!(ceiling_breach(&r, 1000).unwrap(), "no step passed; 1,000 points were required");
    }

    #[test]
    fn regressions_name_a_fallen_ceiling_fewer_stored_and_slower_acks_beyond_the_threshold() {
        let base = ladder(&[(1000, Status::Pass, 200.0, 0.010), (2500, Status::Pass, 500.0, 0.020)]);
        let mut same = base.clone();
        same.run_id = "b".into();
        same.steps[1].ingest.stored_rps = Some(480.0); // -4 %: inside 5 %
        assert!(regressions(&base, &same, 5.0).iter().all(|c| c.breach.is_none()));
        let mut worse = ladder(&[(1000, Status::Pass, 170.0, 0.013), (2500, Status::Fail, 500.0, 0.020)]);
        worse.run_id = "b".into();
        let breaches: Vec<String> = regressions(&base, &worse, 5.0).into_iter().filter_map(|c| c.breach).collect();
        assert_eq!(
            breaches,
            vec![
                "b: the ceiling fell from 2,500 to 1,000 points".to_string(),
                "b, step 1,000 points: stored/s fell 15.0 % (200 → 170)".to_string(),
                "b, step 1,000 points: ack p99 from the intended send time rose 30.0 % (10.0 ms → 13.0 ms)".to_string(),
            ]
        );
    }
}
