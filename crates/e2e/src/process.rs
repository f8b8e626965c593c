//! A scheduler under test as a child process: gpu-scheduler, or a build of
//! kube-scheduler (the control plane's, or scheduler-plugins'), started on
//! a cluster with a configuration of one profile, and what it costs.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use crate::cluster::{CLIENT_QPS, ClusterGuard};

/// CPU seconds of a process so far, from /proc.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): utime is the
    // 14th field, stime the 15th, in clock ticks (100 per second).
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// A scheduler process, stopped by [`Process::stop`].
pub struct Process {
    child: Child,
}

impl Process {
    /// gpu-scheduler `binary` with the default profile named `scheduler`;
    /// `profile` is YAML added to that profile (indented by four spaces),
    /// empty for none. Its log: `DIR/gpu-scheduler.log` of the cluster.
    pub fn gpu_scheduler(binary: &Path, cluster: &ClusterGuard, scheduler: &str, profile: &str) -> Result<Process> {
        let config = cluster.dir.join("gpu-scheduler-config.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nleaderElection: {{leaderElect: false}}\nclientConnection: {{qps: {CLIENT_QPS}, burst: {CLIENT_QPS}}}\nprofiles:\n- schedulerName: {scheduler}\n{profile}"
            ),
        )?;
        let log = std::fs::File::create(cluster.dir.join("gpu-scheduler.log"))?;
        let child = Command::new(binary)
            .arg("run")
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .arg("--config")
            .arg(&config)
            .args(["--http-address", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Process { child })
    }

    /// A kube-scheduler `binary` with one profile named `scheduler`;
    /// `profile` is YAML added to it (indented by two spaces: `plugins:`,
    /// `pluginConfig:`), empty for the default plugins. Its log is named
    /// after the binary, in the cluster's directory.
    pub fn kube_scheduler(binary: &Path, cluster: &ClusterGuard, scheduler: &str, profile: &str) -> Result<Process> {
        let name = binary.file_name().and_then(|n| n.to_str()).unwrap_or("kube-scheduler");
        let config = cluster.dir.join(format!("{name}-config.yaml"));
        std::fs::write(
            &config,
            format!(
                "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: {}\n  qps: {CLIENT_QPS}\n  burst: {CLIENT_QPS}\nleaderElection: {{leaderElect: false}}\nprofiles:\n- schedulerName: {scheduler}\n{profile}",
                cluster.kubeconfig.display()
            ),
        )?;
        let log = std::fs::File::create(cluster.dir.join(format!("{name}.log")))?;
        let child = Command::new(binary)
            .arg("--config")
            .arg(&config)
            .args(["--secure-port", "0", "-v", "1"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Process { child })
    }

    /// Peak RSS (MiB) and CPU seconds so far, from /proc.
    pub fn usage(&self) -> (Option<f64>, Option<f64>) {
        let pid = self.child.id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .map(|kib| kib / 1024.0);
        (rss, cpu_seconds(pid))
    }

    /// Whether the process has exited (it should not, while measured).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGTERM, then SIGKILL after 10 s.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A run that fails part-way leaves no scheduler behind.
impl Drop for Process {
    fn drop(&mut self) {
        self.terminate();
    }
}
