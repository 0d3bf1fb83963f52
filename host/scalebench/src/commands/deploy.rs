//! `scalebench deploy k8s`: writes the Kubernetes manifests of N workers
//! (`distributed::k8s`) to `<out>/workers.yaml`, or to stdout with `--out -`,
//! and prints how to apply them and the coordinator's `--workers` line.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

use crate::cli::{DeployCommand, DeployK8sArgs};
use crate::distributed::k8s;

/// The file `deploy k8s` writes in its `--out` directory.
pub const K8S_FILE: &str = "workers.yaml";

pub fn run(what: DeployCommand) -> anyhow::Result<()> {
    match what {
        DeployCommand::K8s(args) => run_k8s(args),
    }
}

fn run_k8s(args: DeployK8sArgs) -> anyhow::Result<()> {
    let opts = k8s::Options {
        workers: args.workers,
        image: args.image,
        namespace: args.namespace,
        name: args.name,
        cpu: args.cpu,
        memory: args.memory,
        port: args.port,
        cluster_domain: args.cluster_domain,
        // A token for these workers only, in their Secret.
        token: crate::distributed::token::generate()?,
    };
    let m = k8s::manifests(&opts)?;
    let run_line = k8s::coordinator_line(&opts.namespace, &opts.name, &m.workers_flag());
    let selector = format!("app.kubernetes.io/instance={}", opts.name);
    if args.out == Path::new("-") {
        // stdout is the YAML alone (pipe it to `kubectl apply -f -`); the rest goes to stderr.
        std::io::stdout().write_all(m.yaml.as_bytes()).context("cannot write the manifests to stdout")?;
        tracing::info!("coordinator (add your run's flags; it must resolve the pods' names):\n  {run_line}");
        return Ok(());
    }
    let path = args.out.join(K8S_FILE);
    crate::atomic_file::write(&path, m.yaml.as_bytes()).with_context(|| format!("cannot write {}", path.display()))?;
    let file = path.display();
    println!(
        "wrote {file}: namespace {ns}, headless Service, NetworkPolicy, the workers' token as a Secret and Indexed Job {name} ({n} workers, {image}, {cpu} CPU and {mem} each)\n\
         apply:   kubectl apply -f {file}\n\
         wait:    kubectl wait --namespace {ns} --for=condition=Ready pod --selector {selector} --timeout=5m\n\
         coordinator (add your run's flags; run it where the pods' names resolve, e.g. in the cluster):\n  {run_line}\n\
         remove:  kubectl delete -f {file}   (deletes namespace {ns} with everything in it)",
        ns = opts.namespace,
        name = opts.name,
        n = opts.workers,
        image = opts.image,
        cpu = opts.cpu,
        mem = opts.memory,
    );
    Ok(())
}
