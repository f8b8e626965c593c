//! `gpu-scheduler run`: the engine's [`Scheduler`] driven by a live
//! cluster.
//!
//! One thread owns the `Scheduler` (the one writer): it applies the
//! watches' changes and the bindings' results, and runs scheduling cycles
//! between them. Bindings run on the async runtime, at most
//! `bind_concurrency` at once; Events and status patches go to the
//! [`Reporter`]'s queue. Nothing else touches the cache.
//!
//! A pod that needs only the Binding (`BindingTask::api_binding_only`) is
//! bound by one async call; any other binding runs `BindingTask::bind` on
//! a blocking thread. A decided pod waits for its binding with its record
//! cut to the outcome (`DecisionRecord::keep_outcome_only`): in a burst
//! the scores of every node were most of the peak memory. A failed
//! binding of a pod that is gone (404) or bound or re-created elsewhere
//! (409) is dropped, not retried. A follower (not leading) applies every
//! change, so a takeover decides at once. On SIGTERM it stops deciding,
//! waits up to 30 s for bindings in flight, releases the Lease and sends
//! the queued reports.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use engine::algorithm::ExplainDetails;
use engine::config::Configuration;
use engine::facts::provided::ProvidedFacts;
use engine::framework::Status;
use engine::gang::GangPhase;
use engine::scheduler::capability::StarvationGuard;
use engine::scheduler::{BindingTask, CycleOutcome, ObjectChange, Scheduler};
use engine::spot_drain::SpotDrainConfig;
use engine::time::Millis;
use tokio::runtime::Handle;
use tokio::sync::{Semaphore, mpsc};
use tracing::{debug, info, warn};

use crate::KubeError;
use crate::binder::{ApiBinder, BindOutcome};
use crate::client::Clients;
use crate::explain::Explanations;
use crate::leader::{Campaign, Elector};
use crate::metrics::{GpuUsage, Metrics};
use crate::rebalancer::Rebalancer;
use crate::reload::{ConfigSource, Loaded, Reload};
use crate::report::{PodId, Report, Reporter};
use crate::watch::{self, Change};

/// Changes and results waiting for the scheduling thread, at most; a full
/// queue holds the watches back.
const INPUT_QUEUE: usize = 8192;
/// The longest the scheduling thread sleeps: the unschedulable pool is
/// flushed on the clock, not on an event.
const IDLE_WAKEUP: Duration = Duration::from_secs(1);
/// How long a stopping scheduler waits for bindings in flight.
const DRAIN_BINDINGS: Duration = Duration::from_secs(30);
/// How long a stopping scheduler waits for queued Events and patches.
const DRAIN_REPORTS: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Bindings in flight at most.
    pub bind_concurrency: usize,
    /// This replica's name in Events (`reportingInstance`).
    pub instance: String,
    /// Campaign for this Lease and schedule only while leading; None:
    /// schedule from the start (one replica, or tests).
    pub leader_election: Option<Campaign>,
    /// Where the run's metrics and health go (the HTTP server reads them).
    pub metrics: Arc<Metrics>,
    /// Keep each pod's last decision for `/debug/explain` (off: None).
    pub explanations: Option<Arc<Explanations>>,
    /// The configuration the scheduler was built from.
    pub config: Configuration,
    /// Force the spot rebalancer into dry-run (`run --dry-run`), whatever
    /// the configuration says.
    pub spot_dry_run: bool,
    /// Watch this file and apply its changes (off: None).
    pub reload: Option<ConfigSource>,
}

/// The spot rebalancer's settings under `cfg`, None when it is off.
pub fn spot_drain_of(cfg: &Configuration, force_dry_run: bool) -> Option<SpotDrainConfig> {
    let mut d = cfg.spot_drain.clone();
    if force_dry_run {
        d.enabled = true;
        d.dry_run = true;
    }
    d.enabled.then_some(d)
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            bind_concurrency: 64,
            instance: "gpu-scheduler".into(),
            leader_election: None,
            metrics: Arc::default(),
            explanations: None,
            config: Configuration::default(),
            spot_dry_run: false,
            reload: None,
        }
    }
}

/// What a run did, for the log line it ends with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub bound: u64,
    pub failed_attempts: u64,
    pub bind_failures: u64,
    /// Bindings still in flight when the drain deadline passed.
    pub abandoned: usize,
    /// Pods still waiting (queued or gated) when the scheduler stopped.
    pub waiting: usize,
}

enum Input {
    Change(Change),
    Bound {
        task: Box<BindingTask>,
        status: Status,
        outcome: Option<BindOutcome>,
        /// When the scheduling attempt started.
        started: Instant,
    },
    /// A binding task died (a panic): its pod is forgotten.
    BindLost {
        uid: String,
    },
    /// This replica became leader (true) or stopped leading (false).
    Leading(bool),
    /// The configuration file changed.
    Reload(Reload),
    Stop,
}

impl From<Change> for Input {
    fn from(c: Change) -> Self {
        Input::Change(c)
    }
}

impl From<Reload> for Input {
    fn from(r: Reload) -> Self {
        Input::Reload(r)
    }
}

/// Schedules the cluster until `shutdown` resolves, then stops taking
/// pods, lets bindings in flight finish and sends the queued reports.
pub async fn run(
    clients: Clients,
    scheduler: Scheduler,
    options: RunOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<RunSummary, KubeError> {
    let names: Vec<String> = scheduler.profiles().iter().map(|p| p.scheduler_name.clone()).collect();
    let (tx, rx) = mpsc::channel::<Input>(INPUT_QUEUE);
    let keep = engine::extender::sources_needed(scheduler.extenders());
    let unserved = watch::unserved(&clients.main, true).await;
    let sources = watch::spawn_all(&clients.main, &names, keep, &unserved, tx.clone());
    // Node facts from outside the Node objects, off the scheduling path.
    let facts = scheduler.cache().facts_config().clone();
    let m = options.metrics.clone();
    crate::alerts::spawn(&clients.main, &facts.hardware_alert_event_reasons, tx.clone(), move |up| {
        m.set_fact_source_up("events", up)
    });
    let m = options.metrics.clone();
    crate::prometheus::spawn(&facts.prometheus, tx.clone(), move |name, up| m.set_fact_source_up(name, up));
    let (reporter, report_worker) = Reporter::start(clients.events.clone(), clients.main.clone(), &options.instance);
    if let Some(source) = &options.reload {
        crate::reload::spawn(source, tx.clone());
    }

    // Followers watch and keep their cache warm; only the leader decides.
    let (stop_election, election_stopped) = tokio::sync::watch::channel(false);
    let leading_from_start = options.leader_election.is_none();
    let election = options.leader_election.map(|campaign| {
        let (leading_tx, mut leading_rx) = tokio::sync::watch::channel(false);
        let elector = Elector::new(clients.lease.clone(), campaign);
        let tx = tx.clone();
        tokio::spawn(async move {
            while leading_rx.changed().await.is_ok() {
                let leading = *leading_rx.borrow_and_update();
                if tx.send(Input::Leading(leading)).await.is_err() {
                    break;
                }
            }
        });
        tokio::spawn(elector.run(leading_tx, election_stopped))
    });
    options.metrics.set_leader(leading_from_start);
    let mut scheduler = scheduler;
    scheduler.set_instrument(options.metrics.instrument());
    if options.explanations.is_some() {
        scheduler.set_explain_details(ExplainDetails::All);
    }
    let driver = Driver {
        explanations: options.explanations.clone(),
        metrics: options.metrics.clone(),
        metrics_at: None,
        leading: leading_from_start,
        sched: scheduler,
        runtime: Handle::current(),
        tx: tx.clone(),
        client: clients.main.clone(),
        reporter: reporter.clone(),
        bind_slots: Arc::new(Semaphore::new(options.bind_concurrency.max(1))),
        unsynced: sources.len(),
        in_flight: 0,
        pending: HashSet::new(),
        conditions: HashMap::new(),
        gang_phases: HashMap::new(),
        provided: HashMap::new(),
        queue_statuses: HashMap::new(),
        rebalancer: None,
        controller: names.first().cloned().unwrap_or_else(|| "gpu-scheduler".into()),
        spot_dry_run: options.spot_dry_run,
        config_map: options.reload.as_ref().and_then(|r| r.config_map.clone()),
        config_generation: 1,
        config: options.config,
        summary: RunSummary::default(),
    };
    let mut driver = driver;
    driver.rebalancer = spot_drain_of(&driver.config, driver.spot_dry_run).map(|cfg| driver.rebalancer_for(cfg));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("scheduling".into())
        .spawn(move || {
            // A panic drops `done_tx`, which the caller sees as an error.
            let _ = done_tx.send(driver.run(rx));
        })
        .map_err(|e| KubeError::Runtime(format!("starting the scheduling thread: {e}")))?;
    info!(schedulers = ?names, "watching the cluster");

    tokio::pin!(done_rx);
    let finished = tokio::select! {
        _ = shutdown => None,
        r = &mut done_rx => Some(r),
    };
    let result = match finished {
        Some(r) => r,
        None => {
            info!("stopping: no new pods, finishing bindings in flight");
            // The thread may already be gone; then there is nothing to tell.
            let _ = tx.send(Input::Stop).await;
            done_rx.await
        }
    };
    drop(tx);
    // Bindings are done: release the Lease so another replica takes over
    // at once.
    let _ = stop_election.send(true);
    if let Some(election) = election
        && tokio::time::timeout(DRAIN_REPORTS, election).await.is_err()
    {
        warn!("gave up releasing the lease");
    }
    let summary = result.map_err(|_| KubeError::Runtime("the scheduling thread failed".into()))?;
    let dropped = reporter.dropped();
    drop(reporter);
    if tokio::time::timeout(DRAIN_REPORTS, report_worker).await.is_err() {
        warn!("gave up sending queued Events after {DRAIN_REPORTS:?}");
    }
    info!(
        bound = summary.bound,
        failed_attempts = summary.failed_attempts,
        bind_failures = summary.bind_failures,
        abandoned = summary.abandoned,
        waiting = summary.waiting,
        dropped_reports = dropped,
        "stopped"
    );
    Ok(summary)
}

fn now_ms() -> Millis {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as Millis)
}

struct Driver {
    sched: Scheduler,
    explanations: Option<Arc<Explanations>>,
    metrics: Arc<Metrics>,
    /// When the queue and GPU gauges were last refreshed.
    metrics_at: Option<Instant>,
    /// Whether this replica holds the Lease (always, without election).
    leading: bool,
    runtime: Handle,
    tx: mpsc::Sender<Input>,
    client: kube::Client,
    reporter: Reporter,
    bind_slots: Arc<Semaphore>,
    /// Watches that have not finished their first list: no decision is
    /// taken on a partial view of the cluster.
    unsynced: usize,
    in_flight: usize,
    /// Pending pods the API server has, by UID: a failed binding of a pod
    /// no longer here is dropped, not retried.
    pending: HashSet<String>,
    /// The last unschedulable message written to each pod's condition,
    /// so a retry that fails the same way patches nothing.
    conditions: HashMap<String, String>,
    /// The phase last written to each PodGroup, for the gangs gauge.
    gang_phases: HashMap<String, GangPhase>,
    /// What alert Events and Prometheus say of each node.
    provided: HashMap<String, ProvidedFacts>,
    /// The status last written to each Queue.
    queue_statuses: HashMap<String, serde_json::Value>,
    /// The spot rebalancer, when on; it acts only while leading.
    rebalancer: Option<Rebalancer>,
    /// The reporting controller of Events not about a pod (the first
    /// profile's schedulerName).
    controller: String,
    spot_dry_run: bool,
    /// Where reload Events go (namespace, name).
    config_map: Option<(String, String)>,
    /// The configuration in force, and how many have been (1 as started).
    config: Configuration,
    config_generation: u64,
    summary: RunSummary,
}

impl Driver {
    fn run(mut self, mut rx: mpsc::Receiver<Input>) -> RunSummary {
        let mut stopping = false;
        while !stopping {
            loop {
                match rx.try_recv() {
                    Ok(Input::Stop) => stopping = true,
                    Ok(input) => self.handle(input),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        stopping = true;
                        break;
                    }
                }
            }
            self.expire_assumed_pods();
            self.report_fact_warnings();
            self.report_gang_statuses();
            self.report_policy_switches();
            self.refresh_metrics();
            if stopping {
                break;
            }
            if self.unsynced == 0
                && self.leading
                && let Some(r) = &mut self.rebalancer
            {
                r.tick(self.sched.cache(), now_ms());
            }
            if self.unsynced == 0 && self.leading {
                let now = now_ms();
                let started = Instant::now();
                if let Some(outcome) = self.sched.schedule_one(now) {
                    self.decided(outcome, started);
                    continue;
                }
                if self.sched.queue().lengths().active > 0 {
                    continue;
                }
            }
            let wait = self.idle_wait();
            match self.runtime.block_on(async { tokio::time::timeout(wait, rx.recv()).await }) {
                Ok(Some(Input::Stop)) | Ok(None) => stopping = true,
                Ok(Some(input)) => self.handle(input),
                Err(_) => {} // time to look at the backoff queue again
            }
        }
        self.drain(rx)
    }

    /// Waits for the bindings in flight, up to a deadline.
    fn drain(mut self, mut rx: mpsc::Receiver<Input>) -> RunSummary {
        let deadline = std::time::Instant::now() + DRAIN_BINDINGS;
        while self.in_flight > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let next = self.runtime.block_on(async { tokio::time::timeout(left, rx.recv()).await });
            match next {
                Ok(Some(input @ (Input::Bound { .. } | Input::BindLost { .. }))) => self.handle(input),
                Ok(Some(_)) => {} // cluster changes no longer matter
                Ok(None) | Err(_) => break,
            }
        }
        self.summary.abandoned = self.in_flight;
        let l = self.sched.queue().lengths();
        self.summary.waiting = l.active + l.backoff + l.unschedulable + self.sched.gated_pods().count();
        self.summary
    }

    fn idle_wait(&self) -> Duration {
        if self.unsynced > 0 || !self.leading {
            return IDLE_WAKEUP;
        }
        match self.sched.queue().next_backoff_expiry() {
            Some(at) => Duration::from_millis(at.saturating_sub(now_ms()).max(1)).min(IDLE_WAKEUP),
            None => IDLE_WAKEUP,
        }
    }

    fn handle(&mut self, input: Input) {
        let now = now_ms();
        match input {
            Input::Change(c) => self.change(c, now),
            Input::Bound { task, status, outcome, started } => self.bound(*task, status, outcome, started, now),
            Input::BindLost { uid } => {
                self.in_flight -= 1;
                self.metrics.set_bindings_in_flight(self.in_flight);
                self.summary.bind_failures += 1;
                // Without its task the assumption can only be dropped; the
                // pod comes back with the next change the watch reports.
                self.sched.on_pod_delete(&uid, now);
            }
            Input::Leading(leading) => {
                if leading != self.leading {
                    info!(leading, "leadership changed");
                }
                self.leading = leading;
                self.metrics.set_leader(leading);
            }
            Input::Reload(r) => self.reload(r, now),
            Input::Stop => {}
        }
    }

    fn rebalancer_for(&self, cfg: SpotDrainConfig) -> Rebalancer {
        Rebalancer::new(
            cfg,
            self.client.clone(),
            self.metrics.clone(),
            self.reporter.clone(),
            self.runtime.clone(),
            self.controller.clone(),
        )
    }

    /// Applies a changed configuration file between cycles, or keeps the
    /// one in force and says why.
    fn reload(&mut self, reload: Reload, now: Millis) {
        let loaded = match reload {
            Reload::Valid(loaded) => loaded,
            Reload::Invalid(e) => return self.config_rejected(e),
        };
        let Loaded { config, profiles, extenders } = *loaded;
        if let Err(e) = self.sched.reconfigure(&config, profiles, extenders, now) {
            return self.config_rejected(e.to_string());
        }
        let restart = self.config.restart_needed(&config);
        let spot = spot_drain_of(&config, self.spot_dry_run);
        if spot != spot_drain_of(&self.config, self.spot_dry_run) {
            self.rebalancer = spot.map(|cfg| self.rebalancer_for(cfg));
        }
        self.config = config;
        self.config_generation += 1;
        self.metrics.set_config_generation(self.config_generation);
        self.metrics.config_reload("applied");
        let mut note = format!("configuration generation {} applied", self.config_generation);
        if restart.is_empty() {
            info!(generation = self.config_generation, "configuration reloaded");
        } else {
            warn!(
                generation = self.config_generation,
                unchanged_until_restart = ?restart,
                "configuration reloaded; these settings take effect at the next restart"
            );
            note.push_str(&format!("; {} take effect at the next restart", restart.join(", ")));
        }
        self.config_event("ConfigReloaded", note, false);
    }

    fn config_rejected(&mut self, error: String) {
        warn!(generation = self.config_generation, "configuration file refused, the one in force kept: {error}");
        self.metrics.config_reload("rejected");
        let note = format!("kept configuration generation {}: {error}", self.config_generation);
        self.config_event("ConfigRejected", note, true);
    }

    fn config_event(&self, reason: &'static str, note: String, warning: bool) {
        if let Some((namespace, name)) = &self.config_map {
            self.reporter.send(Report::ConfigNote {
                namespace: namespace.clone(),
                name: name.clone(),
                reason,
                note,
                warning,
                controller: self.controller.clone(),
            });
        }
    }

    /// Logs, counts and records the policy rules that changed.
    fn report_policy_switches(&mut self) {
        let switches = self.sched.take_policy_switches();
        if switches.is_empty() {
            return;
        }
        for s in &switches {
            info!(profile = %s.scheduler_name, from = ?s.from, to = ?s.to, "{}", s.message());
            self.metrics.policy_switch(&s.scheduler_name, s.to.as_deref());
            self.config_event("PolicySwitched", s.message(), false);
        }
        self.metrics.set_active_policies(&self.sched.active_policies());
    }

    fn change(&mut self, change: Change, now: Millis) {
        match change {
            Change::Object(c) => {
                if let ObjectChange::PodGroupDeleted(key) = &c {
                    self.gang_phases.remove(key);
                }
                self.sched.apply(c, now);
            }
            Change::Pod(p) if p.node_name.is_none() && p.terminating => {
                // Being deleted: kube-scheduler does not schedule it.
                self.pending_gone(&p.uid);
            }
            Change::Pod(p) => {
                if p.node_name.is_none() {
                    self.pending.insert(p.uid.clone());
                } else {
                    // Bound (by us or another scheduler): no longer pending.
                    self.pending.remove(&p.uid);
                    self.conditions.remove(&p.uid);
                }
                self.sched.on_pod_upsert(*p, now);
            }
            // Last seen pending: leaves the queue (an assumed binding in
            // flight ends on its own, 404); last seen bound: leaves its node.
            Change::PodGone(uid) if self.pending.contains(&uid) => self.pending_gone(&uid),
            Change::PodGone(uid) => self.sched.on_pod_delete(&uid, now),
            Change::NodeAlert(node, at) => {
                let mut facts = self.provided.get(&node).cloned().unwrap_or_default();
                facts.event_alert = at;
                self.provide(node, facts, now);
            }
            Change::NodeNumbers(fact, values) => {
                let mut nodes: HashSet<String> = values.keys().cloned().collect();
                nodes.extend(
                    self.provided.iter().filter(|(_, f)| f.numbers.contains_key(&fact)).map(|(n, _)| n.clone()),
                );
                for node in nodes {
                    let mut facts = self.provided.get(&node).cloned().unwrap_or_default();
                    match values.get(&node) {
                        Some(v) => facts.numbers.insert(fact.clone(), *v),
                        None => facts.numbers.remove(&fact),
                    };
                    self.provide(node, facts, now);
                }
            }
            Change::Synced(source) => {
                self.unsynced = self.unsynced.saturating_sub(1);
                debug!(?source, "synced");
                if self.unsynced == 0 {
                    self.metrics.set_synced();
                    info!(
                        nodes = self.sched.cache().node_count(),
                        pending = self.pending.len(),
                        "cluster state synced; scheduling"
                    );
                }
            }
        }
    }

    fn provide(&mut self, node: String, facts: ProvidedFacts, now: Millis) {
        self.sched.on_node_provided_facts(&node, facts.clone(), now);
        if facts.is_empty() {
            self.provided.remove(&node);
        } else {
            self.provided.insert(node, facts);
        }
    }

    fn pending_gone(&mut self, uid: &str) {
        debug!(%uid, "pending pod gone");
        self.pending.remove(uid);
        self.conditions.remove(uid);
        self.sched.on_unassigned_pod_delete(uid);
    }

    fn decided(&mut self, outcome: CycleOutcome, started: Instant) {
        if let Some(e) = &self.explanations {
            match &outcome {
                CycleOutcome::Assumed(task) => e.record(&task.record),
                CycleOutcome::Failed(f) => e.record(&f.record),
            }
        }
        match outcome {
            CycleOutcome::Assumed(mut task) => {
                // Explained above if at all; the scores would only wait
                // with the binding (thousands of them in a burst).
                task.record.keep_outcome_only();
                self.bind(task, started)
            }
            CycleOutcome::Failed(f) => {
                self.summary.failed_attempts += 1;
                let result = if f.unschedulable { "unschedulable" } else { "error" };
                let profile = f.record.profile.clone();
                self.metrics.attempt(result, &profile, started.elapsed());
                let pod = PodId::of(&f.pod);
                if f.preemption_attempted {
                    self.metrics.preemption(f.victims.len());
                }
                if let Some(node) = &f.nominated_node {
                    // A queue taking back the quota it lent, not a priority.
                    let reclaim = (f.victims_chosen_by == Some(engine::queues::QUEUE_QUOTA))
                        .then(|| engine::queues::queue_of(&f.pod, self.sched.cache().namespaces()).map(str::to_string))
                        .flatten();
                    for v in &f.victims {
                        info!(victim = %v.key(), preemptor = %f.pod.key(), %node, reclaim = ?reclaim, "preempting");
                        let report = Report::Preempt {
                            victim: PodId::of(v),
                            node: node.clone(),
                            preemptor: pod.clone(),
                            reclaim: reclaim.clone(),
                        };
                        self.reporter.send_reliably(report);
                    }
                }
                debug!(pod = %f.pod.key(), "unschedulable: {}", f.message);
                let condition = self.conditions.get(&pod.uid) != Some(&f.message);
                if condition {
                    self.conditions.insert(pod.uid.clone(), f.message.clone());
                }
                let reason = if f.unschedulable { "Unschedulable" } else { "SchedulerError" };
                self.reporter.send(Report::Failed {
                    pod,
                    message: f.message,
                    reason,
                    condition,
                    nominated_node: f.nominated_node,
                });
            }
        }
    }

    /// Runs the binding in the background: a pod that needs only the API
    /// call is bound on the runtime; otherwise PreBind and Bind plugins run
    /// on a blocking thread, the API calls on the runtime. (A blocking
    /// thread for every pod cost, in a drain of 10,000 pods, a context
    /// switch or two per pod and spread its allocations over glibc's
    /// per-thread arenas.)
    fn bind(&mut self, mut task: Box<BindingTask>, started: Instant) {
        self.in_flight += 1;
        self.metrics.set_bindings_in_flight(self.in_flight);
        let slots = self.bind_slots.clone();
        let tx = self.tx.clone();
        let client = self.client.clone();
        if task.api_binding_only() {
            self.runtime.spawn(async move {
                let Ok(_slot) = slots.acquire_owned().await else { return };
                let (result, outcome) = crate::binder::post_binding(&client, &task.pod, &task.node).await;
                let status = task.api_binding_done(result);
                // A closed input means the scheduler is gone; nothing to report to.
                let _ = tx.send(Input::Bound { task, status, outcome: Some(outcome), started }).await;
            });
            return;
        }
        let runtime = self.runtime.clone();
        let uid = task.pod.uid.clone();
        self.runtime.spawn(async move {
            let Ok(_slot) = slots.acquire_owned().await else { return };
            let done = tokio::task::spawn_blocking(move || {
                let binder = ApiBinder::new(client, runtime);
                let status = task.bind(&binder);
                let outcome = binder.outcome();
                Input::Bound { task, status, outcome, started }
            })
            .await;
            let input = done.unwrap_or_else(|e| {
                warn!(%uid, "binding task failed: {e}");
                Input::BindLost { uid }
            });
            // A closed input means the scheduler is gone; nothing to report to.
            let _ = tx.send(input).await;
        });
    }

    fn bound(
        &mut self,
        task: BindingTask,
        status: Status,
        outcome: Option<BindOutcome>,
        started: Instant,
        now: Millis,
    ) {
        self.in_flight -= 1;
        self.metrics.set_bindings_in_flight(self.in_flight);
        let pod = PodId::of(&task.pod);
        let node = task.node.clone();
        let uid = pod.uid.clone();
        let profile = task.profile.scheduler_name.clone();
        let (attempts, first_seen) = (task.queued.attempts, task.queued.first_seen);
        self.sched.finish_binding(task, &status, now);
        if status.is_success() {
            self.summary.bound += 1;
            self.metrics.attempt("scheduled", &profile, started.elapsed());
            self.metrics.scheduled(attempts, Duration::from_millis(now.saturating_sub(first_seen)));
            self.conditions.remove(&uid);
            debug!(pod = %format!("{}/{}", pod.namespace, pod.name), %node, "bound");
            self.reporter.send(Report::Scheduled { pod, node });
            return;
        }
        self.summary.bind_failures += 1;
        self.metrics.attempt("error", &profile, started.elapsed());
        self.metrics.binding_error(match outcome {
            Some(BindOutcome::PodGone) => "pod_gone",
            Some(BindOutcome::Conflict) => "conflict",
            _ => "other",
        });
        let message = status.message();
        if matches!(outcome, Some(BindOutcome::PodGone | BindOutcome::Conflict)) || !self.pending.contains(&uid) {
            // Deleted, bound by another scheduler (409: the bound pods'
            // watch says where), or re-created under its name (409: the
            // UID differs, the new pod is queued on its own): nothing to
            // retry, as kube-scheduler drops a pod already assigned.
            debug!(pod = %format!("{}/{}", pod.namespace, pod.name), "binding dropped: {message}");
            self.sched.on_unassigned_pod_delete(&uid);
            return;
        }
        warn!(pod = %format!("{}/{}", pod.namespace, pod.name), %node, "binding failed, retrying: {message}");
        self.reporter.send(Report::Failed {
            pod,
            message: format!("Binding rejected: {message}"),
            reason: "SchedulerError",
            condition: false,
            nominated_node: None,
        });
    }

    /// Forgets pods bound long ago whose bound view never came (see
    /// `assumedPodTTLSeconds`); one the pod watch still shows pending is
    /// queued again.
    fn expire_assumed_pods(&mut self) {
        let now = now_ms();
        for pod in self.sched.expire_assumed_pods(now) {
            let still_pending = self.pending.contains(&pod.uid);
            warn!(pod = %pod.key(), node = ?pod.node_name, still_pending, "bound, but never seen bound: forgotten");
            self.metrics.binding_error("expired");
            if still_pending {
                let mut p = (*pod).clone();
                p.node_name = None;
                self.sched.on_pod_upsert(p, now);
            }
        }
    }

    /// The gauges, at most once a second: the GPU sums walk every node.
    fn refresh_metrics(&mut self) {
        self.metrics.beat();
        if self.metrics_at.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        self.metrics_at = Some(Instant::now());
        self.metrics.set_queue(&self.sched.queue().lengths(), self.sched.gated_pods().count());
        self.metrics.set_gpus(GpuUsage::of(self.sched.cache()));
        let held = self.sched.capability::<StarvationGuard>().map_or(0, |g| g.holds().held_gpus());
        self.metrics.set_held_gpus(held);
        self.metrics.set_dropped_reports(self.reporter.dropped());
        self.report_queues();
    }

    /// Queue gauges, and (on the leader) the status of each Queue whose
    /// use, borrowing or pod counts changed.
    fn report_queues(&mut self) {
        let queues = self.sched.cache().queues();
        if queues.is_empty() {
            return;
        }
        let mut pending: HashMap<String, usize> = HashMap::new();
        let mut seen = HashSet::new();
        for p in self.sched.queue().pending_pods() {
            if seen.insert(p.uid.clone())
                && let Some(q) = engine::queues::queue_of(&p, self.sched.cache().namespaces())
            {
                *pending.entry(q.to_string()).or_default() += 1;
            }
        }
        for st in queues.statuses() {
            let quota = queues.get(&st.name).map(|q| q.quota.clone()).unwrap_or_default();
            let waiting = pending.get(&st.name).copied().unwrap_or(0);
            self.metrics.set_queue_status(&st, &quota, waiting);
            if !self.leading {
                continue;
            }
            let amounts = |m: &std::collections::BTreeMap<String, i64>| -> serde_json::Value {
                m.iter().map(|(k, v)| (k.clone(), serde_json::json!(engine::queues::quantity(k, *v)))).collect()
            };
            let status = serde_json::json!({
                "usage": amounts(&st.usage),
                "borrowed": amounts(&st.borrowed),
                "admitted": st.admitted,
                "pending": waiting,
            });
            if self.queue_statuses.get(&st.name) != Some(&status) {
                self.queue_statuses.insert(st.name.clone(), status.clone());
                self.reporter.send(Report::QueueStatus { name: st.name, status });
            }
        }
    }

    /// Writes the PodGroup statuses that changed, and the gangs gauge.
    fn report_gang_statuses(&mut self) {
        let statuses = self.sched.take_gang_statuses();
        if statuses.is_empty() {
            return;
        }
        for (group, status) in statuses {
            self.gang_phases.insert(group.key(), status.phase);
            self.reporter.send(Report::GangStatus {
                namespace: group.namespace.clone(),
                name: group.name.clone(),
                status,
            });
        }
        let by_phase: Vec<(GangPhase, usize)> =
            GangPhase::ALL.iter().map(|p| (*p, self.gang_phases.values().filter(|q| *q == p).count())).collect();
        self.metrics.set_gangs(&by_phase);
    }

    fn report_fact_warnings(&mut self) {
        for w in self.sched.take_warnings() {
            warn!("{w}");
            let controller = self.sched.profiles().first().map(|p| p.scheduler_name.clone()).unwrap_or_default();
            self.reporter.send(Report::NodeWarning { node: w.node.clone(), message: w.to_string(), controller });
        }
    }
}
