//! `scalebench plan show [RUN FLAGS…]`: the resolved plan of a `run` command
//! line, as TOML, without running anything.

use clap::CommandFactory;

pub fn show(args: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    let command = crate::cli::Cli::command();
    let mut argv: Vec<std::ffi::OsString> = vec!["scalebench".into(), "run".into()];
    argv.extend(args);
    let argv = crate::run_plan::expand(argv, &command)?;
    let matches =
        command.clone().try_get_matches_from(argv).map_err(|e| crate::error::UsageError(e.render().to_string()))?;
    let run = matches.subcommand_matches("run").expect("the argument vector starts with run");
    print!("{}", crate::run_plan::to_toml(&crate::run_plan::resolved(run, &command)));
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Run plans (`crate::run_plan`) against this binary's real `run` flags.
    use std::ffi::OsString;

    use clap::CommandFactory;

    use crate::results::PlanValue;
    use crate::run_plan::{expand, resolved, to_toml};

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn plan_file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    fn resolve(args: Vec<OsString>) -> crate::run_plan::Plan {
        let cmd = crate::cli::Cli::command();
        let m = cmd.clone().try_get_matches_from(expand(args, &cmd).unwrap()).unwrap();
        resolved(m.subcommand_matches("run").unwrap(), &cmd)
    }

    #[test]
    fn a_plan_gives_every_flag_and_the_command_line_replaces_its_keys() {
        let f = plan_file(
            "steps = \"1k,2.5k\"\nsoak = \"30s\"\ncontinue_on_fail = true\nseed = 7\nservice = [\"api=http://127.0.0.1:28080\"]\n",
        );
        let p = f.path().to_str().unwrap();
        let plan = resolve(argv(&["scalebench", "run", "--plan", p, "--soak", "10s"]));
        assert_eq!(plan["steps"], PlanValue::One("1k,2.5k".into()));
        assert_eq!(plan["soak"], PlanValue::One("10s".into()), "the command line wins");
        assert_eq!(plan["continue-on-fail"], PlanValue::Flag(true));
        assert_eq!(plan["seed"], PlanValue::One("7".into()));
        assert_eq!(plan["service"], PlanValue::Many(vec!["api=http://127.0.0.1:28080".into()]));
        assert_eq!(plan["target"], PlanValue::One("baler".into()), "defaults are resolved too");
        assert!(!plan.contains_key("plan"), "how a plan was given is not part of it");
        // What a result records reads back as the same plan.
        let again = plan_file(&to_toml(&plan));
        let back = resolve(argv(&["scalebench", "run", "--plan", again.path().to_str().unwrap()]));
        assert_eq!(back, plan);
    }

    #[test]
    fn an_unknown_key_names_the_nearest_flag_and_a_wrong_type_says_what_was_expected() {
        let cmd = crate::cli::Cli::command();
        let cases = [
            ("stepz = \"1k\"\n", "`stepz` is not a flag of `scalebench run`; the nearest is `steps`"),
            ("steps = [1000, 2500]\n", "not a list\nhint: several steps are one string: steps = \"1k,2.5k\""),
            (
                "continue-on-fail = \"yes\"\n",
                "`continue-on-fail` is a switch: write continue-on-fail = true, or leave it out",
            ),
            ("soak = true\n", "`soak` takes a value"),
            ("target-params = { prefix = \"x\" }\n", "`target-params` is a table"),
            ("again = \"x.json\"\n", "`again` cannot be a key of a plan"),
        ];
        for (text, want) in cases {
            let f = plan_file(text);
            let e = expand(argv(&["scalebench", "run", "--plan", f.path().to_str().unwrap()]), &cmd).unwrap_err();
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
        let e = expand(argv(&["scalebench", "run", "--plan", "/nonexistent/plan.toml"]), &cmd).unwrap_err();
        assert!(e.to_string().starts_with("cannot read the plan /nonexistent/plan.toml"), "{e}");
    }

    #[test]
    fn again_runs_the_recorded_plan_and_refuses_a_plugin_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("my.wasm");
        std::fs::write(&wasm, b"the plugin as it was").unwrap();
        let spec = wasm.to_str().unwrap().to_string();
        let mut r = crate::commands::report_bench::synthetic_ladder(&[1000], 60.0);
        r.plugins.clear();
        r.plugins.insert(format!("target:{spec}"), plugin_runtime::wasm_sha256(b"the plugin as it was"));
        r.plan = resolve(argv(&["scalebench", "run", "--target", &spec, "--steps", "2.5k", "--seed", "9"]));
        let result = dir.path().join("r-ladder.json");
        r.save(&result).unwrap();
        let again = resolve(argv(&["scalebench", "run", "--again", result.to_str().unwrap()]));
        assert_eq!(again, r.plan);
        // A flag on the command line replaces the recorded one.
        let changed = resolve(argv(&["scalebench", "run", "--again", result.to_str().unwrap(), "--seed", "10"]));
        assert_eq!(changed["seed"], PlanValue::One("10".into()));

        std::fs::write(&wasm, b"the plugin rebuilt").unwrap();
        let cmd = crate::cli::Cli::command();
        let e = expand(argv(&["scalebench", "run", "--again", result.to_str().unwrap()]), &cmd).unwrap_err();
        assert!(e.to_string().contains(&format!("the target plugin {spec} changed since run")), "{e}");
        // Given anew on the command line, the new one is the user's choice.
        assert!(
            expand(argv(&["scalebench", "run", "--again", result.to_str().unwrap(), "--target", &spec]), &cmd).is_ok()
        );
    }
}
