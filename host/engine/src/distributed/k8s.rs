//! Kubernetes manifests for workers (`scalebench deploy k8s`).
//!
//! A pure function of [`Options`]: five documents (a Namespace, a headless
//! Service, a NetworkPolicy, the Secret holding the workers' control-API
//! token and an Indexed Job whose pods are `scalebench worker`s) and the
//! worker URLs a coordinator passes to `scalebench run --workers`. Every pod
//! of an Indexed Job is named `<job>-<index>`; with `subdomain` set to the
//! headless Service's name it resolves, once ready, as
//! `<job>-<index>.<service>.<namespace>.svc.<cluster domain>`. The job and
//! the service share one name. Each worker learns its index from
//! `SCALEBENCH_WORKER_INDEX`, taken from the pod's
//! `batch.kubernetes.io/job-completion-index` annotation (Kubernetes also
//! sets `JOB_COMPLETION_INDEX`, the worker's fallback). See docs/scale-out.md.
//!
//! As a cluster operator would accept them: the pod runs as a non-root
//! user on a read-only root filesystem (its plugin cache and /tmp are
//! emptyDirs), no privilege escalation, every capability dropped; a
//! NetworkPolicy lets only the coordinator's pods reach the control port;
//! the memory limit holds the worker's plugin limit plus its own working
//! set ([`WORKING_SET_MIB`]), so a plugin's limit trips before the pod is
//! OOM-killed; a pod that fails is retried for its own index only
//! (`backoffLimitPerIndex`), never taking the healthy workers down; and
//! the headless Service publishes every pod's name from the start
//! (`publishNotReadyAddresses`), so a worker slow to answer its readiness
//! probe under CPU throttling keeps its DNS name mid-run.

use serde_json::{json, Value};

use crate::error::usage;

/// The worker's control port (`scalebench worker --listen`'s default).
pub const DEFAULT_PORT: u16 = 27100;
/// The image `scripts/docker-images.sh` builds for workers.
pub const DEFAULT_IMAGE: &str = "scale-worker:bookworm";
pub const DEFAULT_NAMESPACE: &str = "scalebench";
pub const DEFAULT_NAME: &str = "scalebench-workers";
pub const DEFAULT_CPU: &str = "1";
pub const DEFAULT_MEMORY: &str = "2Gi";
/// What a worker holds beside its plugin instances (runtime, channels, the
/// in-flight window, histograms), MiB: the pod's memory limit minus this is
/// the worker's `--plugin-memory-mb`.
pub const WORKING_SET_MIB: u64 = 512;
/// The smallest plugin memory limit a worker is given, MiB.
pub const MIN_PLUGIN_MIB: u64 = 256;
/// The non-root user and group the worker runs as.
pub const RUN_AS: u64 = 65532;
/// The label a coordinator's pod carries to reach the workers' control port
/// (the NetworkPolicy admits pods with it, in the workers' namespace).
pub const COORDINATOR_LABEL: (&str, &str) = ("app.kubernetes.io/name", "scalebench-coordinator");
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// The path of the worker's readiness answer (200 "ok").
pub const HEALTH_PATH: &str = "/v1/health";
/// The env var a worker reads its index from (before `JOB_COMPLETION_INDEX`).
pub const INDEX_ENV: &str = "SCALEBENCH_WORKER_INDEX";
/// The pod annotation an Indexed Job writes each pod's index into.
pub const INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// Failures of one index's pod the Job replaces before that index gives up
/// (a replacement keeps its index and so its DNS name; the run it was part
/// of has lost that worker's shard all the same, and the coordinator says
/// so). Per index: one worker failing never ends the others.
pub const BACKOFF_LIMIT_PER_INDEX: u32 = 3;
/// Kubernetes' own ceiling on an Indexed Job's completions.
pub const MAX_WORKERS: u32 = 100_000;
/// The label every object carries and the Service selects the pods by
/// (with `app.kubernetes.io/instance: <name>`).
const APP_LABEL: (&str, &str) = ("app.kubernetes.io/name", "scalebench-worker");

/// What `scalebench deploy k8s` was asked for (its `Debug` leaves the
/// token out: an error or a log line that prints the options never
/// carries it).
#[derive(Clone, PartialEq, Eq)]
pub struct Options {
    /// How many workers (pods of the Indexed Job).
    pub workers: u32,
    pub image: String,
    pub namespace: String,
    /// The Job's and the headless Service's name.
    pub name: String,
    /// CPU request and limit of each worker, a Kubernetes quantity (`1`, `500m`).
    pub cpu: String,
    /// Memory request and limit of each worker, a Kubernetes quantity (`1Gi`, `512Mi`).
    pub memory: String,
    pub port: u16,
    /// The cluster's DNS domain (`cluster.local` unless the cluster was set up otherwise).
    pub cluster_domain: String,
    /// The workers' control-API token ([`super::token`]), kept in a Secret
    /// the pods read it from.
    pub token: String,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("workers", &self.workers)
            .field("image", &self.image)
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("cpu", &self.cpu)
            .field("memory", &self.memory)
            .field("port", &self.port)
            .field("cluster_domain", &self.cluster_domain)
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 1,
            image: DEFAULT_IMAGE.into(),
            namespace: DEFAULT_NAMESPACE.into(),
            name: DEFAULT_NAME.into(),
            cpu: DEFAULT_CPU.into(),
            memory: DEFAULT_MEMORY.into(),
            port: DEFAULT_PORT,
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.into(),
            token: String::new(),
        }
    }
}

/// The manifests and where the coordinator finds the workers.
#[derive(Debug, Clone)]
pub struct Manifests {
    /// Namespace, Service, Job, in the order `kubectl apply` needs them.
    pub documents: Vec<Value>,
    /// The documents as one YAML stream (`---` between them), with a comment
    /// header naming the coordinator's `--workers` value.
    pub yaml: String,
    /// `http://<job>-<i>.<service>.<namespace>.svc.<domain>:<port>`, index order.
    pub worker_urls: Vec<String>,
}

impl Manifests {
    /// The value of the coordinator's `--workers` flag.
    pub fn workers_flag(&self) -> String {
        self.worker_urls.join(",")
    }
}

/// The key of the workers' token in their Secret.
pub const TOKEN_KEY: &str = "token";

/// The coordinator's command: the workers' token from their Secret, then
/// `run --workers`.
pub fn coordinator_line(namespace: &str, name: &str, workers: &str) -> String {
    format!(
        "{}=$(kubectl get secret {name} --namespace {namespace} -o jsonpath='{{.data.{TOKEN_KEY}}}' | base64 -d) scalebench run --workers {workers}",
        super::token::ENV
    )
}

/// The manifests for `opts`, or a usage error naming the bad flag.
///
/// Long on purpose: the manifests as one document in the order kubectl applies them.
pub fn manifests(opts: &Options) -> anyhow::Result<Manifests> {
    check(opts)?;
    let Options { workers, image, namespace, name, cpu, memory, port, cluster_domain, token } = opts;
    let plugin_mib = memory_quantity(memory)? / (1 << 20) - WORKING_SET_MIB;
    let labels = json!({ APP_LABEL.0: APP_LABEL.1, "app.kubernetes.io/instance": name, "app.kubernetes.io/part-of": "scalebench" });
    let selector = json!({ APP_LABEL.0: APP_LABEL.1, "app.kubernetes.io/instance": name });
    let namespace_doc = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": namespace, "labels": { "app.kubernetes.io/part-of": "scalebench" } },
    });
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": {
            "clusterIP": "None",
            // Names from the start, ready or not: a throttled worker keeps its name.
            "publishNotReadyAddresses": true,
            "selector": selector,
            "ports": [{ "name": "control", "port": port, "targetPort": port, "protocol": "TCP" }],
        },
    });
    let probe = |period: u32, failures: u32| {
        json!({
            "httpGet": { "path": HEALTH_PATH, "port": port },
            "periodSeconds": period,
            "timeoutSeconds": 5,
            "failureThreshold": failures,
        })
    };
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": {
            "completionMode": "Indexed",
            "completions": workers,
            "parallelism": workers,
            "backoffLimitPerIndex": BACKOFF_LIMIT_PER_INDEX,
            "template": {
                "metadata": { "labels": labels },
                "spec": {
                    "subdomain": name,
                    "restartPolicy": "Never",
                    // A worker calls no Kubernetes API.
                    "automountServiceAccountToken": false,
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": { "type": "RuntimeDefault" },
                    },
                    // The only writable places: the compiled-plugin cache and /tmp.
                    "volumes": [
                        { "name": "cache", "emptyDir": {} },
                        { "name": "tmp", "emptyDir": {} },
                    ],
                    // Generators on one node share its CPUs: spread them when the cluster can.
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": { "matchLabels": selector },
                    }],
                    "containers": [{
                        "name": "worker",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": [
                            "scalebench", "worker", "--listen", format!("0.0.0.0:{port}"),
                            "--plugin-memory-mb", plugin_mib.to_string(),
                        ],
                        "env": [
                            {
                                "name": INDEX_ENV,
                                "valueFrom": { "fieldRef": { "fieldPath": format!("metadata.annotations['{INDEX_ANNOTATION}']") } },
                            },
                            {
                                "name": super::token::ENV,
                                "valueFrom": { "secretKeyRef": { "name": name, "key": TOKEN_KEY } },
                            },
                            { "name": "XDG_CACHE_HOME", "value": "/cache" },
                            { "name": "TMPDIR", "value": "/tmp" },
                        ],
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": { "drop": ["ALL"] },
                        },
                        "volumeMounts": [
                            { "name": "cache", "mountPath": "/cache" },
                            { "name": "tmp", "mountPath": "/tmp" },
                        ],
                        "ports": [{ "name": "control", "containerPort": port, "protocol": "TCP" }],
                        "resources": {
                            "requests": { "cpu": cpu, "memory": memory },
                            "limits": { "cpu": cpu, "memory": memory },
                        },
                        // A worker busy offering load may answer late: one
                        // late answer does not mark it unready, and only a
                        // minute of silence replaces it.
                        "readinessProbe": probe(2, 3),
                        "livenessProbe": probe(10, 6),
                    }],
                },
            },
        },
    });
    let worker_urls: Vec<String> =
        (0..*workers).map(|i| format!("http://{name}-{i}.{name}.{namespace}.svc.{cluster_domain}:{port}")).collect();
    // Only the coordinator reaches the control port; the workers' own
    // connections (to the system under test) are left alone.
    let policy = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "spec": {
            "podSelector": { "matchLabels": selector },
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{ "podSelector": { "matchLabels": { COORDINATOR_LABEL.0: COORDINATOR_LABEL.1 } } }],
                "ports": [{ "protocol": "TCP", "port": port }],
            }],
        },
    });
    // The control API's token: the pods read it from here, the coordinator
    // from here too (see the header's line).
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": { "name": name, "namespace": namespace, "labels": labels },
        "type": "Opaque",
        "stringData": { TOKEN_KEY: token },
    });
    let documents = vec![namespace_doc, service, policy, secret, job];
    let mut yaml = format!(
        "# scalebench workers: {workers} x `scalebench worker` ({image}, {cpu} CPU, {memory}) in namespace {namespace}.\n\
         # Written by `scalebench deploy k8s`; see docs/scale-out.md.\n\
         # Apply: kubectl apply -f <this file>. Remove (the namespace with everything in it): kubectl delete -f <this file>.\n\
         # Coordinator (where these names resolve: a pod in namespace {namespace} labelled\n\
         # {}={}, which the NetworkPolicy lets reach the workers):\n\
         #   {}\n",
        COORDINATOR_LABEL.0,
        COORDINATOR_LABEL.1,
        coordinator_line(namespace, name, &worker_urls.join(","))
    );
    for (i, doc) in documents.iter().enumerate() {
        if i > 0 {
            yaml.push_str("---\n");
        }
        yaml.push_str(&serde_yaml::to_string(doc)?);
    }
    Ok(Manifests { documents, yaml, worker_urls })
}

/// Every option checked, the first problem as a usage error in the flag's words.
fn check(opts: &Options) -> anyhow::Result<()> {
    if opts.workers == 0 {
        return Err(usage(
            "--workers 0: a deployment needs at least one worker\nhint: give the number of worker pods, e.g. --workers 3".into(),
        ));
    }
    if opts.workers > MAX_WORKERS {
        return Err(usage(format!(
            "--workers {}: Kubernetes runs at most {MAX_WORKERS} pods in one Indexed Job\nhint: use fewer, larger workers (--cpu, --memory)",
            opts.workers
        )));
    }
    dns_label("--namespace", &opts.namespace, false)?;
    if ["default", "kube-system", "kube-public", "kube-node-lease"].contains(&opts.namespace.as_str()) {
        return Err(usage(format!(
            "--namespace {}: the manifests create their namespace, and `kubectl delete -f` deletes it with everything in it\n\
             hint: give the workers a namespace of their own, e.g. --namespace {DEFAULT_NAMESPACE}",
            opts.namespace
        )));
    }
    // The name is the Service's (a DNS-1035 label: it starts with a letter)
    // and, with `-<index>`, each pod's hostname (at most 63 characters).
    dns_label("--name", &opts.name, true)?;
    let longest = format!("{}-{}", opts.name, opts.workers - 1);
    if longest.len() > 63 {
        return Err(usage(format!(
            "--name {}: the last worker's hostname `{longest}` is {} characters; Kubernetes allows 63\n\
             hint: use a name of at most {} characters",
            opts.name,
            longest.len(),
            63 - (longest.len() - opts.name.len())
        )));
    }
    if opts.image.is_empty() || opts.image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(usage(format!(
            "--image `{}` is not an image reference\nhint: give REPOSITORY[:TAG], e.g. --image registry.example:5000/{DEFAULT_IMAGE}",
            opts.image
        )));
    }
    cpu_quantity(&opts.cpu)?;
    let mib = memory_quantity(&opts.memory)? / (1 << 20);
    if mib < WORKING_SET_MIB + MIN_PLUGIN_MIB {
        return Err(usage(format!(
            "--memory {}: a worker needs {WORKING_SET_MIB} MiB of its own and at least {MIN_PLUGIN_MIB} MiB for its plugins\n\
             hint: give at least --memory {}Mi (the default is {DEFAULT_MEMORY})",
            opts.memory,
            WORKING_SET_MIB + MIN_PLUGIN_MIB
        )));
    }
    if opts.port == 0 {
        return Err(usage(format!(
            "--port 0: a worker listens on a fixed port the coordinator connects to\nhint: leave the default, --port {DEFAULT_PORT}"
        )));
    }
    for label in opts.cluster_domain.split('.') {
        dns_label("--cluster-domain", label, false).map_err(|_| {
            usage(format!(
                "--cluster-domain `{}` is not a DNS domain\nhint: the cluster's DNS domain, {DEFAULT_CLUSTER_DOMAIN} unless the cluster was set up otherwise",
                opts.cluster_domain
            ))
        })?;
    }
    Ok(())
}

/// A DNS label as Kubernetes wants it: 1–63 of `a-z`, `0-9` and `-`,
/// alphanumeric at both ends (and a letter first when `letter_first`).
fn dns_label(flag: &str, s: &str, letter_first: bool) -> anyhow::Result<()> {
    let ok_chars = s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let first_ok = s.bytes().next().is_some_and(|b| if letter_first { b.is_ascii_lowercase() } else { b != b'-' });
    let last_ok = s.bytes().last().is_some_and(|b| b != b'-');
    if !s.is_empty() && s.len() <= 63 && ok_chars && first_ok && last_ok {
        return Ok(());
    }
    let start = if letter_first { "a letter" } else { "a letter or digit" };
    Err(usage(format!(
        "{flag} `{s}` is not a Kubernetes name\n\
         hint: use 1 to 63 lowercase letters, digits and `-`, starting with {start} and ending with a letter or digit, e.g. {flag} {}",
        if flag == "--namespace" { DEFAULT_NAMESPACE } else { DEFAULT_NAME }
    )))
}

/// A positive decimal number, and what follows it.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    let valid = !num.is_empty() && !num.starts_with('.') && !num.ends_with('.') && num.matches('.').count() <= 1;
    let value: f64 = if valid { num.parse().ok()? } else { return None };
    (value > 0.0).then_some((value, suffix))
}

/// A CPU quantity: cores (`1`, `0.5`) or millicores (`500m`), above zero.
fn cpu_quantity(s: &str) -> anyhow::Result<()> {
    match split_number(s) {
        Some((_, "")) => Ok(()),
        Some((v, "m")) if v.fract() == 0.0 => Ok(()),
        _ => Err(usage(format!(
            "--cpu `{s}` is not a CPU quantity\nhint: give cores or millicores, above zero: --cpu 1, --cpu 0.5 or --cpu 500m"
        ))),
    }
}

/// A memory quantity with a Kubernetes suffix (`1Gi`, `512Mi`, `1G`), above
/// zero, in bytes.
fn memory_quantity(s: &str) -> anyhow::Result<u64> {
    const SUFFIXES: [(&str, f64); 13] = [
        ("", 1.0),
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    match split_number(s) {
        Some((v, suffix)) if SUFFIXES.iter().any(|(x, _)| *x == suffix) => {
            let scale = SUFFIXES.iter().find(|(x, _)| *x == suffix).map_or(1.0, |(_, m)| *m);
            Ok((v * scale) as u64)
        }
        other => {
            let hint = match other.map(|(_, suffix)| suffix) {
                Some(x) if x.eq_ignore_ascii_case("gb") || x.eq_ignore_ascii_case("g") => {
                    " (Kubernetes writes gibibytes as Gi)"
                }
                Some(x) if x.eq_ignore_ascii_case("mb") || x == "m" => {
                    " (Kubernetes writes mebibytes as Mi; a lowercase m means thousandths)"
                }
                _ => "",
            };
            Err(usage(format!(
                "--memory `{s}` is not a memory quantity{hint}\nhint: give bytes with a Kubernetes suffix, above zero: --memory 1Gi, --memory 512Mi or --memory 2G"
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(workers: u32) -> Options {
        Options { workers, ..Options::default() }
    }

    fn err(o: &Options) -> String {
        let Err(e) = manifests(o) else { panic!("{o:?} was accepted") };
        assert_eq!(crate::error::exit_code(&e), 2, "a usage error: {e}");
        e.to_string()
    }

    fn doc<'a>(m: &'a Manifests, kind: &str) -> &'a Value {
        m.documents.iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
    }

    #[test]
    fn four_documents_a_namespace_a_headless_service_a_network_policy_and_an_indexed_job() {
        let m = manifests(&opts(3)).unwrap();
        let kinds: Vec<&str> = m.documents.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "Service", "NetworkPolicy", "Secret", "Job"]);
        assert_eq!(doc(&m, "Namespace")["metadata"]["name"], "scalebench");
        let svc = doc(&m, "Service");
        assert_eq!(svc["spec"]["clusterIP"], "None");
        assert_eq!(svc["spec"]["ports"][0]["port"], 27100);
        let job = &doc(&m, "Job")["spec"];
        assert_eq!(job["completionMode"], "Indexed");
        assert_eq!((job["completions"].as_u64(), job["parallelism"].as_u64()), (Some(3), Some(3)));
        let pod = &job["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["subdomain"], svc["metadata"]["name"]);
        assert_eq!(doc(&m, "Job")["metadata"]["name"], svc["metadata"]["name"], "pod names are <job>-<i>");
        // The Service selects exactly the job's pods.
        let pod_labels = job["template"]["metadata"]["labels"].as_object().unwrap();
        for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
            assert_eq!(pod_labels.get(k), Some(v), "selector {k}");
        }
        for d in &m.documents[1..] {
            assert_eq!(d["metadata"]["namespace"], "scalebench");
        }
    }

    #[test]
    fn the_container_is_a_worker_with_its_index_limits_and_probes() {
        let m = manifests(&Options { cpu: "500m".into(), memory: "1536Mi".into(), port: 27200, ..opts(2) }).unwrap();
        let c = &doc(&m, "Job")["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "scale-worker:bookworm");
        assert_eq!(
            c["command"],
            json!(["scalebench", "worker", "--listen", "0.0.0.0:27200", "--plugin-memory-mb", "1024"]),
            "the plugin limit is the pod's limit less the worker's own working set"
        );
        assert_eq!(c["env"][0]["name"], "SCALEBENCH_WORKER_INDEX");
        assert_eq!(
            c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        for side in ["requests", "limits"] {
            assert_eq!(c["resources"][side], json!({ "cpu": "500m", "memory": "1536Mi" }), "{side}");
        }
        assert_eq!(c["readinessProbe"]["httpGet"], json!({ "path": "/v1/health", "port": 27200 }));
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/v1/health");
        assert_eq!(doc(&m, "Service")["spec"]["ports"][0]["targetPort"], 27200);
    }

    /// What a cluster operator's admission policy asks of a workload.
    #[test]
    fn the_workers_read_their_token_from_the_secret_the_coordinator_reads_it_from() {
        let m = manifests(&Options { token: "0123456789abcdef0123456789abcdef".into(), ..opts(2) }).unwrap();
        let secret = doc(&m, "Secret");
        assert_eq!(secret["metadata"]["name"], "scalebench-workers");
        assert_eq!(secret["stringData"][TOKEN_KEY], "0123456789abcdef0123456789abcdef");
        let env = doc(&m, "Job")["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap().clone();
        let token = env.iter().find(|e| e["name"] == crate::distributed::token::ENV).expect("the token's env var");
        assert_eq!(token["valueFrom"]["secretKeyRef"], json!({ "name": "scalebench-workers", "key": TOKEN_KEY }));
        assert!(token.get("value").is_none(), "from the Secret, not written into the pod spec");
    }

    #[test]
    fn the_options_print_without_their_token() {
        let o = Options { token: "0123456789abcdef0123456789abcdef".into(), ..opts(2) };
        let shown = format!("{o:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        assert!(shown.contains("workers: 2"), "{shown}");
    }

    #[test]
    fn the_pods_run_as_a_cluster_operator_would_accept() {
        let m = manifests(&opts(3)).unwrap();
        let job = &doc(&m, "Job")["spec"];
        let pod = &job["template"]["spec"];
        let c = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert!(pod["securityContext"]["runAsUser"].as_u64().unwrap() > 0);
        assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        // What a worker writes goes to emptyDirs: the plugin cache and /tmp.
        let mounts: Vec<&str> =
            c["volumeMounts"].as_array().unwrap().iter().map(|v| v["mountPath"].as_str().unwrap()).collect();
        assert_eq!(mounts, ["/cache", "/tmp"]);
        assert!(c["env"].as_array().unwrap().iter().any(|e| e["name"] == "XDG_CACHE_HOME" && e["value"] == "/cache"));
        // The memory limit holds the plugin limit and the worker's own set.
        let cmd: Vec<&str> = c["command"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let at = cmd.iter().position(|a| *a == "--plugin-memory-mb").expect("the plugin limit is set");
        let plugin_mib: u64 = cmd[at + 1].parse().unwrap();
        let limit_mib = memory_quantity(c["resources"]["limits"]["memory"].as_str().unwrap()).unwrap() >> 20;
        assert!(plugin_mib + WORKING_SET_MIB <= limit_mib, "{plugin_mib} + {WORKING_SET_MIB} > {limit_mib}");
        // One failing index is retried on its own; no Job-wide limit ends the rest.
        assert_eq!(job["backoffLimitPerIndex"], 3);
        assert!(job.get("backoffLimit").is_none(), "{job}");
        // Names from the start, ready or not.
        assert_eq!(doc(&m, "Service")["spec"]["publishNotReadyAddresses"], true);
        // Only the coordinator's pods reach the control port.
        let np = &doc(&m, "NetworkPolicy")["spec"];
        assert_eq!(np["podSelector"]["matchLabels"], doc(&m, "Service")["spec"]["selector"]);
        assert_eq!(np["policyTypes"], json!(["Ingress"]));
        let rule = &np["ingress"][0];
        assert_eq!(np["ingress"].as_array().unwrap().len(), 1);
        assert_eq!(
            rule["from"],
            json!([{ "podSelector": { "matchLabels": { "app.kubernetes.io/name": "scalebench-coordinator" } } }])
        );
        assert_eq!(rule["ports"], json!([{ "protocol": "TCP", "port": 27100 }]));
    }

    #[test]
    fn worker_urls_are_the_pods_dns_names_in_index_order() {
        let m = manifests(&Options { namespace: "load".into(), name: "gen".into(), ..opts(3) }).unwrap();
        assert_eq!(
            m.worker_urls,
            [
                "http://gen-0.gen.load.svc.cluster.local:27100",
                "http://gen-1.gen.load.svc.cluster.local:27100",
                "http://gen-2.gen.load.svc.cluster.local:27100",
            ]
        );
        assert_eq!(m.workers_flag(), m.worker_urls.join(","));
        let m = manifests(&Options { cluster_domain: "k8s.example".into(), ..opts(1) }).unwrap();
        assert_eq!(m.worker_urls, ["http://scalebench-workers-0.scalebench-workers.scalebench.svc.k8s.example:27100"]);
    }

    #[test]
    fn the_yaml_stream_parses_back_into_the_same_documents() {
        let m = manifests(&opts(4)).unwrap();
        assert!(m.yaml.starts_with("# scalebench workers: 4 x"));
        assert!(m.yaml.contains(&format!(
            "#   SCALEBENCH_WORKER_TOKEN=$(kubectl get secret scalebench-workers --namespace scalebench -o jsonpath='{{.data.token}}' | base64 -d) scalebench run --workers {}\n",
            m.workers_flag()
        )));
        assert_eq!(m.yaml.matches("\n---\n").count(), 4);
        let parsed: Vec<Value> =
            serde_yaml::Deserializer::from_str(&m.yaml).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
        assert_eq!(parsed, m.documents);
        // Quantities stay strings: `1` must not become a YAML integer the
        // validator then reads differently from what was asked.
        assert!(m.yaml.contains("cpu: '1'"), "{}", m.yaml);
    }

    #[test]
    fn bad_options_are_named_in_the_users_words() {
        for (o, words) in [
            (opts(0), "--workers 0: a deployment needs at least one worker"),
            (opts(MAX_WORKERS + 1), "at most 100000 pods in one Indexed Job"),
            (
                Options { memory: "1GB".into(), ..opts(1) },
                "--memory `1GB` is not a memory quantity (Kubernetes writes gibibytes as Gi)",
            ),
            (Options { memory: "512m".into(), ..opts(1) }, "a lowercase m means thousandths"),
            (Options { memory: "0Gi".into(), ..opts(1) }, "--memory `0Gi`"),
            (Options { memory: "512Mi".into(), ..opts(1) }, "--memory 512Mi: a worker needs 512 MiB of its own"),
            (Options { memory: "lots".into(), ..opts(1) }, "--memory `lots`"),
            (Options { cpu: "two".into(), ..opts(1) }, "--cpu `two` is not a CPU quantity"),
            (Options { cpu: "0".into(), ..opts(1) }, "--cpu `0`"),
            (Options { cpu: "0.5m".into(), ..opts(1) }, "--cpu `0.5m`"),
            (Options { namespace: "Load_Test".into(), ..opts(1) }, "--namespace `Load_Test` is not a Kubernetes name"),
            (Options { namespace: "kube-system".into(), ..opts(1) }, "a namespace of their own"),
            (Options { name: "1gen".into(), ..opts(1) }, "starting with a letter"),
            (Options { name: "g".repeat(61), ..opts(100) }, "hostname `gggg"),
            (Options { image: "".into(), ..opts(1) }, "--image `` is not an image reference"),
            (Options { port: 0, ..opts(1) }, "--port 0"),
            (Options { cluster_domain: "cluster..local".into(), ..opts(1) }, "--cluster-domain"),
        ] {
            let e = err(&o);
            assert!(e.contains(words), "{o:?}: {e}");
            assert!(e.contains("\nhint: "), "{e}");
        }
    }

    #[test]
    fn valid_quantities_and_the_longest_name_pass() {
        for (cpu, memory) in [("1", "1Gi"), ("0.5", "768Mi"), ("250m", "2G"), ("16", "1073741824"), ("2", "1.5Gi")] {
            manifests(&Options { cpu: cpu.into(), memory: memory.into(), ..opts(1) }).unwrap();
        }
        // 61 characters, "-9": a 63-character hostname.
        manifests(&Options { name: "g".repeat(61), ..opts(10) }).unwrap();
        err(&Options { name: "g".repeat(61), ..opts(11) });
    }
}
