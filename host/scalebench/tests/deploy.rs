//! `scalebench deploy k8s`: the real binary writes the manifests of N
//! workers; every YAML document is parsed back and its structure checked (an
//! Indexed Job of `scalebench worker`s behind a headless Service, the index
//! wiring, limits, probes), and so is the coordinator's `--workers` line it
//! prints. The manifests are then validated against the Kubernetes JSON
//! schemas by `kubernetes-validate` (PyPI; it ships the schemas, so it runs
//! offline), which `scripts/setup.sh` installs into `$SCALEBENCH_PY_DIR`
//! (default `/var/tmp/scalebench-py`).
//!
//! Run: `cargo test --release -p scalebench --test tests deploy::`

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{scalebench, stderr};

/// The Kubernetes versions the manifests are validated against: the first
/// whose Jobs retry per index by default (`backoffLimitPerIndex`, beta and
/// on since 1.29) and the newest schemas kubernetes-validate 1.37.0 ships.
const SCHEMA_VERSIONS: [&str; 2] = ["1.29.0", "1.37.0"];

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn deploy(dir: &Path, extra: &[&str]) -> Output {
    let out = dir.to_str().unwrap();
    let mut args = vec!["deploy", "k8s", "--out", out];
    args.extend_from_slice(extra);
    scalebench(&args)
}

/// Every document of a YAML stream, as JSON values.
fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| <Value as serde::Deserialize>::deserialize(d).expect("a YAML document"))
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} document");
    found[0]
}

#[test]
fn deploy_k8s_writes_an_indexed_job_of_workers_behind_a_headless_service() {
    let dir = tempfile::tempdir().unwrap();
    let o = deploy(dir.path(), &["--workers", "3", "--cpu", "500m", "--memory", "1536Mi"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = dir.path().join("workers.yaml");
    let printed = stdout(&o);
    assert!(printed.contains(&format!("wrote {}", file.display())), "{printed}");
    assert!(printed.contains(&format!("kubectl apply -f {}", file.display())), "{printed}");

    let docs = documents(&std::fs::read_to_string(&file).unwrap());
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().expect("every document has a kind")).collect();
    assert_eq!(kinds, ["Namespace", "Service", "NetworkPolicy", "Secret", "Job"], "in the order kubectl apply needs");
    let (ns, svc, job) = (of_kind(&docs, "Namespace"), of_kind(&docs, "Service"), of_kind(&docs, "Job"));
    assert_eq!(ns["metadata"]["name"], "scalebench");
    for d in [svc, job] {
        assert_eq!(d["metadata"]["namespace"], "scalebench", "{}", d["kind"]);
    }

    // Headless, on the worker's port, selecting the job's pods.
    assert_eq!(svc["spec"]["clusterIP"], "None");
    let ports = svc["spec"]["ports"].as_array().unwrap();
    assert_eq!((ports.len(), &ports[0]["port"], &ports[0]["targetPort"]), (1, &27100.into(), &27100.into()));
    let selector = svc["spec"]["selector"].as_object().unwrap();
    assert!(!selector.is_empty());
    let spec = &job["spec"];
    let pod_labels = spec["template"]["metadata"]["labels"].as_object().unwrap();
    for (k, v) in selector {
        assert_eq!(pod_labels.get(k), Some(v), "the Service selects the pods by {k}");
    }

    // Indexed, all at once, pods resolvable as <job>-<i>.<service>.
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], 3);
    assert_eq!(spec["parallelism"], 3);
    assert!(spec["backoffLimitPerIndex"].as_u64().is_some(), "retries per index");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["subdomain"], svc["metadata"]["name"], "pod subdomain = the headless Service");
    assert_eq!(job["metadata"]["name"], "scalebench-workers");
    assert_eq!(svc["metadata"]["name"], "scalebench-workers");

    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["image"], "scale-worker:bookworm");
    let command: Vec<&str> = c["command"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(command, ["scalebench", "worker", "--listen", "0.0.0.0:27100", "--plugin-memory-mb", "1024"]);
    let env = c["env"].as_array().unwrap();
    let index = env.iter().find(|e| e["name"] == "SCALEBENCH_WORKER_INDEX").expect("the index env var");
    assert_eq!(
        index["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    for side in ["requests", "limits"] {
        assert_eq!(c["resources"][side]["cpu"], "500m", "cpu {side}");
        assert_eq!(c["resources"][side]["memory"], "1536Mi", "memory {side}");
    }
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/v1/health");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], 27100);

    // The workers' token: in a Secret, which the pods read it from.
    let secret = of_kind(&docs, "Secret");
    let token = secret["stringData"]["token"].as_str().expect("the token");
    assert!(token.len() >= 32 && token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    let from = env.iter().find(|e| e["name"] == "SCALEBENCH_WORKER_TOKEN").expect("the token env var");
    assert_eq!(from["valueFrom"]["secretKeyRef"]["name"], "scalebench-workers");
    assert!(!printed.contains(token), "the token is not printed: {printed}");

    // The coordinator's line: the token from the Secret, one URL per pod, index order.
    let line = printed
        .lines()
        .map(str::trim)
        .find(|l| {
            l.starts_with("SCALEBENCH_WORKER_TOKEN=$(kubectl get secret scalebench-workers --namespace scalebench ")
        })
        .expect("a run line");
    assert!(line.contains(") scalebench run --workers "), "{line}");
    let urls: Vec<&str> = line.split("--workers ").nth(1).expect("--workers").trim().split(',').collect();
    let want: Vec<String> = (0..3)
        .map(|i| format!("http://scalebench-workers-{i}.scalebench-workers.scalebench.svc.cluster.local:27100"))
        .collect();
    assert_eq!(urls, want, "{line}");
}

#[test]
fn deploy_k8s_out_dash_prints_only_the_manifests() {
    let o = scalebench(&["deploy", "k8s", "--workers", "2", "--out", "-", "--name", "gen", "--namespace", "load"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let docs = documents(&stdout(&o));
    assert_eq!(docs.len(), 5);
    assert_eq!(of_kind(&docs, "Job")["spec"]["template"]["spec"]["subdomain"], "gen");
    assert!(
        stderr(&o).contains(
            "--workers http://gen-0.gen.load.svc.cluster.local:27100,http://gen-1.gen.load.svc.cluster.local:27100"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn deploy_k8s_refuses_bad_input_in_the_users_words() {
    let dir = tempfile::tempdir().unwrap();
    for (args, words) in [
        (&["--workers", "0"][..], "--workers 0: a deployment needs at least one worker"),
        (&["--workers", "2", "--memory", "1GB"][..], "--memory `1GB` is not a memory quantity"),
        (&["--workers", "2", "--cpu", "lots"][..], "--cpu `lots` is not a CPU quantity"),
        (&["--workers", "2", "--namespace", "Load_Test"][..], "--namespace `Load_Test` is not a Kubernetes name"),
    ] {
        let o = deploy(dir.path(), args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(words) && e.contains("hint: "), "{args:?}: {e}");
    }
    assert!(!dir.path().join("workers.yaml").exists(), "nothing written on bad input");
}

/// `kubernetes-validate`, where `scripts/setup.sh` installs it (or on PATH).
fn validator() -> Option<PathBuf> {
    let dir =
        std::env::var_os("SCALEBENCH_PY_DIR").map(PathBuf::from).unwrap_or_else(|| "/var/tmp/scalebench-py".into());
    let installed = dir.join("bin/kubernetes-validate");
    if installed.is_file() {
        return Some(installed);
    }
    let on_path = Command::new("kubernetes-validate").arg("--version").output();
    on_path.is_ok_and(|o| o.status.success()).then(|| PathBuf::from("kubernetes-validate"))
}

fn validate(tool: &Path, file: &Path, version: &str) -> Output {
    Command::new(tool)
        .args(["--strict", "--kubernetes-version", version])
        .arg(file)
        .output()
        .expect("run kubernetes-validate")
}

#[test]
fn deploy_k8s_manifests_validate_against_the_kubernetes_schemas() {
    let Some(tool) = validator() else {
        println!(
            "note: schema validation skipped: kubernetes-validate is not installed; run scripts/setup.sh \
             (it installs it into $SCALEBENCH_PY_DIR, default /var/tmp/scalebench-py)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let o = deploy(dir.path(), &["--workers", "3", "--cpu", "0.5", "--memory", "2G", "--port", "27200"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let file = dir.path().join("workers.yaml");
    for version in SCHEMA_VERSIONS {
        let v = validate(&tool, &file, version);
        let said = format!("{}{}", stdout(&v), stderr(&v));
        assert!(v.status.success(), "the manifests do not validate against Kubernetes {version}:\n{said}");
        for resource in [
            "namespace/scalebench",
            "service/scalebench-workers",
            "networkpolicy/scalebench-workers",
            "job/scalebench-workers",
        ] {
            assert!(said.contains(&format!("passed for resource {resource}")), "{resource} not checked:\n{said}");
        }
    }
    // The validator does refuse: the same Job with a field Kubernetes does not have.
    let yaml = std::fs::read_to_string(&file).unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, yaml.replace("completionMode: Indexed", "completionMode: Indexed\n  workers: 3")).unwrap();
    let v = validate(&tool, &broken, SCHEMA_VERSIONS[1]);
    assert!(!v.status.success(), "an unknown field passed --strict:\n{}", stdout(&v));
}
