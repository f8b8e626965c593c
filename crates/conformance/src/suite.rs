//! The suite: one control plane, both schedulers, scenarios one after
//! another (they cannot share nodes: both schedulers see every node), and
//! what to do with a disagreement: run the scenario again with a longer
//! settle and kube-scheduler at `-v=10`. Agreeing then means the first
//! view was stale (recorded, not failed); disagreeing again is a
//! divergence, reported with kube's per-plugin scores.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::ResourceExt;

use crate::Error;
use crate::compare::{Decision, Verdict};
use crate::control_plane::{ControlPlane, Process, start_gpu_scheduler, start_kube_scheduler};
use crate::report::{Entry, Summary, disagreement, kube_scores};
use crate::runner::{Harness, Outcome};
use crate::scenario::{Run, Scenario};

/// The pause between a run's objects and its pod: long enough for the
/// schedulers' watches to deliver them on this machine (they take a few
/// milliseconds), short enough for hundreds of scenarios a minute.
pub const SETTLE: Duration = Duration::from_millis(150);
/// kube-scheduler's usual log level (its decisions, not every request).
const KUBE_VERBOSITY: u8 = 2;

pub struct Suite {
    // Dropped in this order: schedulers first, then the control plane.
    kube: Process,
    _ours: Process,
    harness: Harness,
    control_plane: ControlPlane,
    dir: PathBuf,
    pub settle: Duration,
    pub summary: Summary,
    /// The report of each divergence and error.
    pub reports: Vec<String>,
    started: Instant,
}

impl Suite {
    /// Starts the control plane in `dir/cluster` and both schedulers
    /// (`our_binary` is gpu-scheduler); logs go to `dir`.
    pub async fn start(repo: &Path, our_binary: &Path, dir: &Path) -> Result<Suite, Error> {
        let control_plane = ControlPlane::up(repo, &dir.join("cluster"))?;
        let client = control_plane.client().await?;
        let kube = start_kube_scheduler(&control_plane, KUBE_VERBOSITY, &dir.join("kube-scheduler.log"))?;
        let (ours, addr) = start_gpu_scheduler(&control_plane, repo, our_binary, &dir.join("gpu-scheduler.log"))?;
        let summary = Summary { kube_version: control_plane.version.clone(), ..Summary::default() };
        Ok(Suite {
            kube,
            _ours: ours,
            harness: Harness::new(client, addr),
            control_plane,
            dir: dir.to_path_buf(),
            settle: SETTLE,
            summary,
            reports: Vec::new(),
            started: Instant::now(),
        })
    }

    fn restart_kube(&mut self, verbosity: u8, log: &str) -> Result<(), Error> {
        // The old one must be gone before the next starts: two
        // default-schedulers would race for the pod.
        self.kube.stop();
        self.kube = start_kube_scheduler(&self.control_plane, verbosity, &self.dir.join(log))?;
        Ok(())
    }

    /// Runs `s` and records the result; a divergence or error adds a report.
    pub async fn check(&mut self, s: &Scenario) -> Result<(), Error> {
        let t = Instant::now();
        let first = self.harness.run(s, self.settle).await;
        let (result, outcome) = match first {
            Ok(o) if o.verdict.agrees() => (result_of(&o.verdict, "agree"), Some(o)),
            Ok(_) | Err(Error::Stale(_)) => self.rerun(s).await?,
            Err(e) => {
                self.kube.check_alive("kube-scheduler")?;
                self.reports.push(format!("=== {}: ERROR: {e}\nscenario:\n{}", s.name, s.to_yaml()?));
                (format!("error: {e}"), None)
            }
        };
        let millis = u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (ours, kube) =
            outcome.as_ref().map_or((String::new(), String::new()), |o| (o.ours.to_string(), o.kube.to_string()));
        let agreed_scheduled =
            outcome.as_ref().filter(|o| o.verdict.agrees()).map(|o| matches!(o.kube, Decision::Scheduled(_)));
        self.summary.add(Entry { name: s.name.clone(), ours, kube, result, millis }, agreed_scheduled);
        Ok(())
    }

    /// The second run of a scenario that disagreed or ran on a stale view.
    async fn rerun(&mut self, s: &Scenario) -> Result<(String, Option<Outcome>), Error> {
        self.restart_kube(10, "kube-scheduler-verbose.log")?;
        let second = self.harness.run(s, self.settle * 10).await;
        let pod = format!("{}/{}", s.namespace(), s.run_objects(Run::Kube).pod.name_any());
        let scores = kube_scores(&self.kube.log_since(0), &pod);
        self.restart_kube(KUBE_VERBOSITY, "kube-scheduler.log")?;
        Ok(match second {
            Ok(o) if o.verdict.agrees() => (result_of(&o.verdict, "timing"), Some(o)),
            Ok(o) => {
                self.reports.push(disagreement(s, &o, &scores)?);
                let why = match &o.verdict {
                    Verdict::Disagree(w) => w.clone(),
                    Verdict::Agree | Verdict::ByDesign(_) => String::new(),
                };
                (format!("divergence: {why}"), Some(o))
            }
            Err(e) => {
                self.reports.push(format!("=== {}: ERROR on the second run: {e}\nscenario:\n{}", s.name, s.to_yaml()?));
                (format!("error: {e}"), None)
            }
        })
    }

    /// Writes the summary into the suite's directory and returns it.
    pub fn finish(&mut self) -> Result<&Summary, Error> {
        self.summary.seconds = self.started.elapsed().as_secs_f64();
        self.summary.write(&self.dir)?;
        std::fs::write(self.dir.join("divergences.txt"), self.reports.join("\n"))
            .map_err(Error::io("writing divergences.txt"))?;
        Ok(&self.summary)
    }
}

/// A summary's result for an agreeing verdict: `plain`, or the by-design
/// difference it names.
fn result_of(v: &Verdict, plain: &str) -> String {
    match v {
        Verdict::ByDesign(why) => format!("{plain}, {why}"),
        Verdict::Agree | Verdict::Disagree(_) => plain.to_string(),
    }
}
