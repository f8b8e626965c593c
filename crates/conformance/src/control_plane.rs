//! The control plane and the two schedulers as child processes:
//! `tools/k8s/cluster` (etcd, kube-apiserver, kube-controller-manager) in
//! a directory of the suite's own, kube-scheduler from the same build, and
//! gpu-scheduler `run` with kube's default profile and the explain
//! endpoint on.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// The control plane, stopped when dropped.
pub struct ControlPlane {
    repo: PathBuf,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    /// Where tools/k8s/build put the binaries (kube-scheduler, kubectl).
    pub bin: PathBuf,
    /// The Kubernetes release it runs (`K8S_VERSION`, tools/k8s/versions.sh).
    pub version: String,
}

impl ControlPlane {
    /// A fresh control plane in `dir`; whatever an interrupted run left
    /// there is stopped first. Builds the binaries if they are not cached.
    pub fn up(repo: &Path, dir: &Path) -> Result<ControlPlane, Error> {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        let script = repo.join("tools/k8s/cluster");
        let cluster = |cmd: &str| {
            Command::new(&script)
                .arg(cmd)
                .env("GPU_SCHEDULER_CLUSTER_DIR", dir)
                .output()
                .map_err(Error::io(format!("running {} {cmd}", script.display())))
        };
        cluster("down")?;
        let out = cluster("up")?;
        if !out.status.success() {
            return Err(Error::ControlPlane(format!(
                "tools/k8s/cluster up failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let bin = std::fs::read_to_string(dir.join("run/bin")).map_err(Error::io("reading the cluster's run/bin"))?;
        let version =
            std::fs::read_to_string(dir.join("run/version")).map_err(Error::io("reading the cluster's run/version"))?;
        Ok(ControlPlane {
            repo: repo.to_path_buf(),
            dir: dir.to_path_buf(),
            kubeconfig: dir.join("kubeconfig"),
            bin: PathBuf::from(bin.trim()),
            version: version.trim().to_string(),
        })
    }

    pub async fn client(&self) -> Result<kube::Client, Error> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| Error::ControlPlane(format!("reading {}: {e}", self.kubeconfig.display())))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| Error::ControlPlane(format!("kubeconfig {}: {e}", self.kubeconfig.display())))?;
        kube::Client::try_from(config).map_err(Error::kube("building a client"))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(self.repo.join("tools/k8s/cluster"))
            .arg("down")
            .env("GPU_SCHEDULER_CLUSTER_DIR", &self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A scheduler process, killed when dropped.
pub struct Process {
    child: Child,
    pub log: PathBuf,
}

impl Process {
    fn spawn(cmd: &mut Command, log: &Path, what: &str) -> Result<Process, Error> {
        let file = std::fs::File::create(log).map_err(Error::io(format!("creating {}", log.display())))?;
        let child = cmd.stdout(Stdio::null()).stderr(file).spawn().map_err(Error::io(format!("starting {what}")))?;
        Ok(Process { child, log: log.to_path_buf() })
    }

    /// Fails if the process has exited (a crash, a bad flag).
    pub fn check_alive(&mut self, what: &str) -> Result<(), Error> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(Error::ControlPlane(format!(
                "{what} exited ({status}); its log {}:\n{}",
                self.log.display(),
                tail(&self.log, 30)
            ))),
            Err(e) => Err(Error::io(format!("waiting for {what}"))(e)),
        }
    }

    /// Kills the process and waits for it (again: nothing).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The log from byte `from` on.
    pub fn log_since(&self, from: u64) -> String {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let start = usize::try_from(from).unwrap_or(usize::MAX).min(text.len());
        String::from_utf8_lossy(&text[start..]).into_owned()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// kube-scheduler's configuration: its default profile (schedulerName
/// `default-scheduler`, every default plugin incl. DynamicResources), no
/// leader election, client limits high enough not to slow the suite.
pub fn kube_scheduler_config(kubeconfig: &Path) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: {}
  qps: 1000
  burst: 1000
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: default-scheduler
",
        kubeconfig.display()
    )
}

/// kube-scheduler with [`kube_scheduler_config`]; `verbosity` 10 logs each
/// plugin's score of each node.
pub fn start_kube_scheduler(cp: &ControlPlane, verbosity: u8, log: &Path) -> Result<Process, Error> {
    let config = cp.dir.join("kube-scheduler-config.yaml");
    let text = kube_scheduler_config(&cp.kubeconfig);
    std::fs::write(&config, text).map_err(Error::io(format!("writing {}", config.display())))?;
    Process::spawn(
        Command::new(cp.bin.join("kube-scheduler")).arg("--config").arg(&config).args([
            "--secure-port",
            "0",
            "-v",
            &verbosity.to_string(),
        ]),
        log,
        "kube-scheduler",
    )
}

/// The configuration gpu-scheduler runs with: the shipped
/// `examples/kube-default-config.yaml` as it is, leader election off.
pub fn our_config(repo: &Path) -> Result<String, Error> {
    let path = repo.join("examples/kube-default-config.yaml");
    let shipped = std::fs::read_to_string(&path).map_err(Error::io(format!("reading {}", path.display())))?;
    Ok(format!("{shipped}leaderElection: {{leaderElect: false}}\n"))
}

/// gpu-scheduler `run` (the binary at `binary`) with [`our_config`] and
/// the explain endpoint; returns the process and its HTTP address.
pub fn start_gpu_scheduler(
    cp: &ControlPlane,
    repo: &Path,
    binary: &Path,
    log: &Path,
) -> Result<(Process, String), Error> {
    let config = cp.dir.join("gpu-scheduler-config.yaml");
    std::fs::write(&config, our_config(repo)?).map_err(Error::io(format!("writing {}", config.display())))?;
    let mut p = Process::spawn(
        Command::new(binary)
            .arg("run")
            .arg("--kubeconfig")
            .arg(&cp.kubeconfig)
            .arg("--config")
            .arg(&config)
            .args(["--http-address", "127.0.0.1:0", "--enable-explain-endpoint"])
            .env("RUST_LOG", "info"),
        log,
        "gpu-scheduler",
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(addr) = text.lines().find(|l| l.contains("serving /healthz")).and_then(|l| l.split("addr=").nth(1))
        {
            return Ok((p, addr.trim().to_string()));
        }
        p.check_alive("gpu-scheduler")?;
        if Instant::now() > deadline {
            return Err(Error::Timeout { what: "gpu-scheduler's HTTP address in its log".into(), secs: 60 });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
