//! A real control plane for a test: `tools/k8s/cluster` in a directory of
//! the test's own, stopped when the guard drops; kubectl from the same
//! build as the client; `gpu-scheduler run` as a child process.

#![allow(dead_code)] // each test binary uses part of it

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The plain manifests, deploy/*.yaml, in name (apply) order.
pub fn deploy_files() -> Vec<PathBuf> {
    let dir = repo().join("deploy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

fn cluster_script() -> PathBuf {
    repo().join("tools/k8s/cluster")
}

/// A running etcd + kube-apiserver + kube-controller-manager.
pub struct Cluster {
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    path: String,
    /// The release it runs, e.g. `v1.35.4`.
    pub version: String,
}

impl Cluster {
    /// Starts a cluster whose state lives in `target/live-tests/NAME`, at
    /// the release `K8S_VERSION` names (tools/k8s/versions.sh; unset: the
    /// default). Builds the control plane first if it is not cached
    /// (minutes).
    pub fn up(name: &str) -> Cluster {
        Cluster::start(name, false)
    }

    /// As [`Cluster::up`], with KWOK playing the kubelets
    /// (tools/k8s/kwok/stages.yaml): nodes turn Ready and keep a Lease,
    /// bound pods run, a pod annotated `gpu-scheduler.io/run-for` succeeds
    /// that long after it started, and a deleted pod goes at the end of its
    /// grace period ([`with_grace`]).
    pub fn up_with_lifecycles(name: &str) -> Cluster {
        Cluster::start(name, true)
    }

    fn start(name: &str, lifecycles: bool) -> Cluster {
        let dir = repo().join("target/live-tests").join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let run = |cmd: &str| {
            let out = Command::new(cluster_script())
                .arg(cmd)
                .env("GPU_SCHEDULER_CLUSTER_DIR", &dir)
                .env("GPU_SCHEDULER_KWOK", if lifecycles { "1" } else { "" })
                .output()
                .unwrap_or_else(|e| panic!("running tools/k8s/cluster {cmd}: {e}"));
            assert!(
                out.status.success(),
                "tools/k8s/cluster {cmd} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        run("up");
        let env = run("env");
        let mut kubeconfig = None;
        let mut bin = None;
        for line in env.lines() {
            if let Some(v) = line.strip_prefix("export KUBECONFIG=") {
                kubeconfig = Some(PathBuf::from(v));
            } else if let Some(v) = line.strip_prefix("export PATH=") {
                bin = v.strip_suffix(":$PATH").map(str::to_string);
            }
        }
        let (Some(kubeconfig), Some(bin)) = (kubeconfig, bin) else { panic!("unexpected cluster env output:\n{env}") };
        let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
        let version = run("version").trim().to_string();
        Cluster { dir, kubeconfig, path, version }
    }

    /// The minor version of its release (35 for v1.35.4).
    pub fn minor(&self) -> u32 {
        let minor = self.version.trim_start_matches('v').split('.').nth(1);
        minor.and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("unexpected release {:?}", self.version))
    }

    /// Whether the release is older than 1.`minor`. When it is, the caller
    /// skips `what` (needing 1.`minor`) for the reason `why`, and this says
    /// so: on stderr, and in the file `GPU_SCHEDULER_SKIP_LOG` names, whose
    /// lines tools/k8s/matrix prints under its table.
    pub fn skip_below(&self, minor: u32, what: &str, why: &str) -> bool {
        if self.minor() >= minor {
            return false;
        }
        let line = format!("skipped {what} (needs Kubernetes 1.{minor}, this is {}): {why}", self.version);
        eprintln!("{line}");
        if let Some(file) = std::env::var_os("GPU_SCHEDULER_SKIP_LOG") {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(e) = appended {
                eprintln!("writing {}: {e}", Path::new(&file).display());
            }
        }
        true
    }

    pub fn restart_apiserver(&self) {
        let out = Command::new(cluster_script())
            .arg("restart-apiserver")
            .env("GPU_SCHEDULER_CLUSTER_DIR", &self.dir)
            .output()
            .unwrap_or_else(|e| panic!("restarting the apiserver: {e}"));
        assert!(out.status.success(), "restart-apiserver: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// PATH with the built kubectl first.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.args(args).env("KUBECONFIG", &self.kubeconfig).env("PATH", &self.path);
        c
    }

    /// Runs kubectl; panics with its output when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_cmd(args).output().unwrap_or_else(|e| panic!("running kubectl: {e}"));
        check("kubectl", args, &out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl; whether it succeeded (for calls that may race, as a
    /// kubelet's do).
    pub fn kubectl_output_ok(&self, args: &[&str]) -> bool {
        self.kubectl_cmd(args).output().is_ok_and(|o| o.status.success())
    }

    /// Runs kubectl with `input` on stdin (`kubectl create -f -`).
    pub fn kubectl_in(&self, args: &[&str], input: &str) -> String {
        let out = self.kubectl_output(args, input);
        check("kubectl", args, &out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl with `input` on stdin, expecting the API server to
    /// refuse; returns what kubectl said (panics if it succeeded).
    pub fn kubectl_refused(&self, args: &[&str], input: &str) -> String {
        let out = self.kubectl_output(args, input);
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "kubectl {args:?} succeeded, a refusal was expected:\n{said}\ninput:\n{input}");
        said
    }

    fn kubectl_output(&self, args: &[&str], input: &str) -> Output {
        output_with_input(&mut self.kubectl_cmd(args), input)
    }

    /// `kubectl get ... -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        let text = self.kubectl(&a);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("kubectl {a:?} printed no JSON ({e}):\n{text}"))
    }

    /// The pods of a namespace: name → node name ("" when pending).
    pub fn placements(&self, namespace: &str) -> Vec<(String, String)> {
        let list = self.get_json(&["pods", "-n", namespace]);
        items(&list).iter().map(|p| (s(&p["metadata"]["name"]), s(&p["spec"]["nodeName"]))).collect()
    }

    /// How many pods of a namespace are bound.
    pub fn bound_count(&self, namespace: &str) -> usize {
        self.placements(namespace).iter().filter(|(_, n)| !n.is_empty()).count()
    }

    /// Pods of a namespace reported scheduled more than once, with the count.
    pub fn scheduled_twice(&self, namespace: &str) -> Vec<(String, u64)> {
        self.scheduled_events(namespace).into_iter().filter(|(_, n)| *n > 1).collect()
    }

    /// `Scheduled` Events (events.k8s.io/v1) of a namespace: pod name →
    /// how many times it was reported scheduled (an Event series counts
    /// its repetitions).
    pub fn scheduled_events(&self, namespace: &str) -> std::collections::HashMap<String, u64> {
        let list = self.get_json(&["events.v1.events.k8s.io", "-n", namespace]);
        let mut counts = std::collections::HashMap::new();
        for e in items(&list) {
            if e["reason"] == "Scheduled" {
                let n = e["series"]["count"].as_u64().unwrap_or(1);
                *counts.entry(s(&e["regarding"]["name"])).or_insert(0) += n;
            }
        }
        counts
    }

    /// `gpu-scheduler snapshot` of this cluster into `name` (in the test's
    /// directory), then `simulate --output json --config CONFIG` of it.
    pub fn simulate_snapshot(&self, config: &Path, name: &str) -> Value {
        let snapshot = self.snapshot(name);
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
            .args(["simulate", "--output", "json", "--config"])
            .arg(config)
            .arg(&snapshot)
            .output()
            .unwrap_or_else(|e| panic!("running simulate: {e}"));
        assert!(out.status.success(), "simulate of the snapshot failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    }

    /// `gpu-scheduler snapshot` of this cluster into `name` (in the test's
    /// directory); panics if it fails.
    pub fn snapshot(&self, name: &str) -> PathBuf {
        let snapshot = self.dir.join(name);
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
            .args(["snapshot", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .arg("--output")
            .arg(&snapshot)
            .output()
            .unwrap_or_else(|e| panic!("running snapshot: {e}"));
        assert!(out.status.success(), "snapshot failed: {}", String::from_utf8_lossy(&out.stderr));
        snapshot
    }

    /// Starts `gpu-scheduler run` with `config`, logging to `log`.
    pub fn start_scheduler(&self, config: &Path, log: &Path) -> Scheduler {
        self.start_scheduler_as(&self.kubeconfig, config, "gpu-scheduler", log, &[])
    }

    /// Starts `gpu-scheduler run` with another kubeconfig, as replica
    /// `hostname` (its Lease identity starts with it).
    pub fn start_scheduler_as(
        &self,
        kubeconfig: &Path,
        config: &Path,
        hostname: &str,
        log: &Path,
        extra_args: &[&str],
    ) -> Scheduler {
        let file = std::fs::File::create(log).unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        let child = Command::new(env!("CARGO_BIN_EXE_gpu-scheduler"))
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--config")
            .arg(config)
            // Several schedulers run side by side: each on a port of its own.
            .args(["--http-address", "127.0.0.1:0"])
            .args(extra_args)
            .env("RUST_LOG", "info,gpu_scheduler_kube=debug")
            .env("HOSTNAME", hostname)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting gpu-scheduler run: {e}"));
        Scheduler { child: Some(child), log: log.to_path_buf() }
    }

    /// Installs the CRDs of deploy/crds/ and waits until the API server
    /// serves PodGroups and Queues.
    pub fn install_crds(&self) {
        let crds = repo().join("deploy/crds");
        self.kubectl(&["apply", "--server-side", "-f", crds.to_str().unwrap_or_default()]);
        for crd in ["crd/podgroups.scheduling.x-k8s.io", "crd/queues.gpu-scheduler.io"] {
            self.kubectl(&["wait", "--for=condition=Established", crd, "--timeout=60s"]);
        }
    }

    /// Writes a file in the cluster's directory and returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        p
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(cluster_script())
            .arg("down")
            .env("GPU_SCHEDULER_CLUSTER_DIR", &self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A `gpu-scheduler run` process, killed if the test ends without
/// stopping it.
pub struct Scheduler {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Scheduler {
    /// SIGTERM, then waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let child = self.child.as_mut().unwrap_or_else(|| panic!("scheduler already stopped"));
        let pid = child.id().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().is_ok_and(|s| s.success());
        assert!(ok, "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("waiting for the scheduler: {e}")) {
                self.child = None;
                return status;
            }
            assert!(Instant::now() < deadline, "the scheduler did not exit within 60 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL: a crash, nothing finished.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// [`wait_for`], and on a timeout the end of this scheduler's log, so
    /// that a failure on a CI machine shows what the scheduler did.
    pub fn wait_for<T>(&self, secs: u64, what: &str, f: impl FnMut() -> Option<T>) -> T {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| wait_for(secs, what, f))) {
            Ok(v) => v,
            Err(panic) => {
                let log = self.log_text();
                let lines: Vec<&str> = log.lines().collect();
                let tail = lines[lines.len().saturating_sub(80)..].join("\n");
                eprintln!("the last lines of {}:\n{tail}", self.log.display());
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// The address its HTTP endpoints listen on, from its log.
    pub fn http_address(&self) -> String {
        wait_for(30, "the scheduler's HTTP address in its log", || {
            let log = self.log_text();
            let line = log.lines().find(|l| l.contains("serving /healthz"))?;
            line.split("addr=").nth(1).map(|a| a.trim().to_string())
        })
    }

    /// GET `path` from its HTTP endpoints: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(&self.http_address(), path)
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `f` every half second until it returns Some, or panics after
/// `secs` saying what was awaited (a liveness guard, not a speed check).
pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A plain HTTP/1.1 GET, enough for /metrics and the probes.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
        .unwrap_or_else(|e| panic!("writing to {addr}: {e}"));
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap_or_else(|e| panic!("reading from {addr}: {e}"));
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// Runs `cmd` with `input` on its stdin and collects its output.
pub fn output_with_input(cmd: &mut Command, input: &str) -> Output {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).unwrap_or_else(|e| panic!("writing to {program}: {e}"));
    }
    child.wait_with_output().unwrap_or_else(|e| panic!("waiting for {program}: {e}"))
}

pub fn items(list: &Value) -> &[Value] {
    list["items"].as_array().map_or(&[], Vec::as_slice)
}

pub fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn check(cmd: &str, args: &[&str], out: &Output) {
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A node manifest: name, labels, allocatable (cpu cores, memory GiB,
/// GPUs), annotations.
pub fn node_yaml(
    name: &str,
    labels: &[(&str, &str)],
    cpu: u32,
    mem_gi: u32,
    gpus: u32,
    annotations: &[(&str, &str)],
) -> String {
    let map = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| format!("{k:?}: {v:?}")).collect::<Vec<_>>().join(", ");
    let gpu = if gpus > 0 { format!(", nvidia.com/gpu: \"{gpus}\"") } else { String::new() };
    let res = format!("{{cpu: \"{cpu}\", memory: {mem_gi}Gi, pods: \"110\"{gpu}}}");
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: {{{}}}\n  annotations: {{{}}}\nstatus:\n  capacity: {res}\n  allocatable: {res}\n---\n",
        map(labels),
        map(annotations)
    )
}

/// A pod manifest for `scheduler`, with labels and the container's
/// requests (as YAML flow map entries, e.g. `cpu: 500m`), GPUs as limits.
pub fn pod_yaml(name: &str, scheduler: &str, labels: &[(&str, &str)], requests: &str, gpus: u32) -> String {
    let map = labels.iter().map(|(k, v)| format!("{k:?}: {v:?}")).collect::<Vec<_>>().join(", ");
    let limits = if gpus > 0 { format!(", limits: {{nvidia.com/gpu: \"{gpus}\"}}") } else { String::new() };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{{map}}}\nspec:\n  schedulerName: {scheduler}\n  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n    resources: {{requests: {{{requests}}}{limits}}}\n---\n"
    )
}

/// `pod` (a manifest of [`pod_yaml`]) with its grace period on deletion:
/// on a cluster with lifecycles the pod goes that long after it is deleted.
pub fn with_grace(pod: &str, secs: u32) -> String {
    pod.replacen("spec:\n", &format!("spec:\n  terminationGracePeriodSeconds: {secs}\n"), 1)
}

/// A configuration with one profile: `scheduler` on the nodes labelled
/// `pool=POOL`, client limits `qps`/`burst`, no leader election.
pub fn config_yaml(scheduler: &str, pool: &str, qps: u32, burst: u32) -> String {
    format!(
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nleaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {qps}, burst: {burst}}}\nprofiles:\n- schedulerName: {scheduler}\n  nodeSelector: {{matchLabels: {{pool: {pool}}}}}\n"
    )
}
