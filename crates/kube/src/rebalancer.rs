//! The spot rebalancer of `run`: every `spotDrain.interval`, on the
//! leader, it takes [`engine::spot_drain::plan`] of the cache and carries
//! it out: taints nodes inside the expiry window, removes the taint from
//! nodes whose expiry moved out, and evicts the pods of tainted nodes
//! through the Eviction API, at most `maxEvictions` at once and per
//! interval, so that PodDisruptionBudgets are honoured by the API server
//! (a 429 is tried again at a later interval). With `dryRun` it only says
//! what it would do. Its API calls run on the async runtime; the
//! scheduling thread only starts them.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine::cache::Cache;
use engine::model::PodRef;
use engine::spot_drain::{self, DrainPlan, Eviction, SpotDrainConfig, TAINT_SPOT_EXPIRING};
use engine::time::Millis;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;
use tokio::runtime::Handle;
use tracing::{debug, info, warn};

use crate::metrics::Metrics;
use crate::report::{PodId, Report, Reporter};

/// How long an evicted pod is not asked again while its deletion has not
/// reached the cache.
const EVICTED_QUIET: Duration = Duration::from_secs(120);

pub struct Rebalancer {
    cfg: SpotDrainConfig,
    client: Client,
    metrics: Arc<Metrics>,
    reporter: Reporter,
    runtime: Handle,
    /// The reporting controller of its Events (the first profile's name).
    controller: String,
    in_flight: Arc<AtomicUsize>,
    /// Pods not to evict again before the time given, by UID.
    quiet: Arc<Mutex<HashMap<String, Instant>>>,
    /// Nodes whose taint patch is in flight.
    patching: Arc<Mutex<HashSet<String>>>,
    last: Option<Instant>,
    /// Dry run: what was already reported, so each is said once.
    said: HashSet<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn rfc3339(ms: Millis) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(|| ms.to_string(), |t| t.to_string())
}

impl Rebalancer {
    pub fn new(
        cfg: SpotDrainConfig,
        client: Client,
        metrics: Arc<Metrics>,
        reporter: Reporter,
        runtime: Handle,
        controller: String,
    ) -> Rebalancer {
        if cfg.dry_run {
            info!(window = ?cfg.window, "spot rebalancer in dry-run: it reports, it neither taints nor evicts");
        } else {
            info!(window = ?cfg.window, interval = ?cfg.interval, max_evictions = cfg.max_evictions, "spot rebalancer on");
        }
        Rebalancer {
            cfg,
            client,
            metrics,
            reporter,
            runtime,
            controller,
            in_flight: Arc::default(),
            quiet: Arc::default(),
            patching: Arc::default(),
            last: None,
            said: HashSet::new(),
        }
    }

    /// Called on every turn of the scheduling loop while leading; acts
    /// once per interval.
    pub fn tick(&mut self, cache: &Cache, now: Millis) {
        if self.last.is_some_and(|t| t.elapsed() < self.cfg.interval) {
            return;
        }
        self.last = Some(Instant::now());
        let plan = spot_drain::plan(cache, &self.cfg, now);
        self.metrics.set_spot_draining_nodes(plan.draining.len());
        if self.cfg.dry_run {
            self.report_dry_run(&plan);
            return;
        }
        for node in &plan.taint {
            self.patch_taint(node, true, &plan);
        }
        for node in &plan.untaint {
            self.patch_taint(node, false, &plan);
        }
        let allowance = self.cfg.max_evictions as usize;
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let budget = allowance.saturating_sub(in_flight);
        let now_i = Instant::now();
        let quiet = {
            let mut q = lock(&self.quiet);
            q.retain(|_, until| *until > now_i);
            q.keys().cloned().collect::<HashSet<String>>()
        };
        let batch = spot_drain::take_batch(&plan.evict, budget, allowance, in_flight, |e| {
            e.pods.iter().any(|p| quiet.contains(&p.uid))
        });
        for e in batch {
            self.evict(e);
        }
    }

    fn report_dry_run(&mut self, plan: &DrainPlan) {
        for node in &plan.taint {
            if self.said.insert(format!("taint {node}")) {
                info!(%node, "dry run: would taint {TAINT_SPOT_EXPIRING}:NoSchedule (spot expiry within the window)");
            }
        }
        for node in &plan.untaint {
            if self.said.insert(format!("untaint {node}")) {
                info!(%node, "dry run: would remove the taint {TAINT_SPOT_EXPIRING} (expiry out of the window)");
            }
        }
        // Evictions wait for the taint, which a dry run never puts on:
        // report the pods of every draining node.
        for d in &plan.draining {
            if self.said.insert(format!("drain {} {}", d.node, d.expiry)) {
                info!(node = %d.node, expiry = %rfc3339(d.expiry), pods = d.to_evict, "dry run: would evict the node's pods");
                self.metrics.spot_eviction_n("dry_run", d.to_evict);
            }
        }
        for (pod, why) in &plan.kept {
            if self.said.insert(format!("keep {}", pod.uid)) {
                info!(pod = %pod.key(), node = pod.node_name.as_deref().unwrap_or(""), "spot drain keeps the pod: {why}");
            }
        }
    }

    fn patch_taint(&self, node: &str, on: bool, plan: &DrainPlan) {
        if !lock(&self.patching).insert(node.to_string()) {
            return; // one patch per node at a time
        }
        let api: Api<Node> = Api::all(self.client.clone());
        let patching = self.patching.clone();
        let node = node.to_string();
        let expiry = plan.draining.iter().find(|d| d.node == node).map(|d| rfc3339(d.expiry));
        let reporter = self.reporter.clone();
        let controller = self.controller.clone();
        self.runtime.spawn(async move {
            match set_taint(&api, &node, on).await {
                Ok(true) => {
                    let note = match (on, expiry) {
                        (true, Some(at)) => format!("spot node expires at {at}: tainted {TAINT_SPOT_EXPIRING}:NoSchedule, its pods will be evicted"),
                        _ => format!("spot expiry no longer within the window: taint {TAINT_SPOT_EXPIRING} removed"),
                    };
                    info!(%node, "{note}");
                    reporter.send(Report::NodeNote { node: node.clone(), reason: if on { "SpotDraining" } else { "SpotDrainCancelled" }, note, controller });
                }
                Ok(false) => {}
                Err(e) => warn!(%node, "could not {} the spot taint: {e}", if on { "set" } else { "remove" }),
            }
            lock(&patching).remove(&node);
        });
    }

    fn evict(&self, e: &Eviction) {
        let n = e.pods.len();
        self.in_flight.fetch_add(n, Ordering::Relaxed);
        {
            let until = Instant::now() + EVICTED_QUIET;
            let mut q = lock(&self.quiet);
            for p in &e.pods {
                q.insert(p.uid.clone(), until);
            }
        }
        let why = match &e.gang {
            Some(g) => {
                format!("spot node {} expires at {}: evicting gang {g} whole ({n} pods)", e.node, rfc3339(e.expiry))
            }
            None => format!("spot node {} expires at {}", e.node, rfc3339(e.expiry)),
        };
        for pod in e.pods.clone() {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
            let (metrics, reporter, quiet, in_flight) =
                (self.metrics.clone(), self.reporter.clone(), self.quiet.clone(), self.in_flight.clone());
            let why = why.clone();
            let controller = self.controller.clone();
            self.runtime.spawn(async move {
                let result = evict_pod(&api, &pod).await;
                metrics.spot_eviction(result.label());
                match result {
                    EvictResult::Evicted => {
                        info!(pod = %pod.key(), "evicted: {why}");
                        let id = PodId { scheduler_name: controller, ..PodId::of(&pod) };
                        reporter.send(Report::PodNote {
                            pod: id,
                            reason: "SpotEvicted",
                            note: format!("Evicted: {why}"),
                        });
                    }
                    EvictResult::Refused(msg) => {
                        // A PodDisruptionBudget: asked again at a later interval.
                        debug!(pod = %pod.key(), "eviction refused, trying later: {msg}");
                        lock(&quiet).remove(&pod.uid);
                    }
                    EvictResult::Gone => {}
                    EvictResult::Failed(msg) => {
                        warn!(pod = %pod.key(), "eviction failed: {msg}");
                        lock(&quiet).remove(&pod.uid);
                    }
                }
                in_flight.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }
}

enum EvictResult {
    Evicted,
    /// 429: a PodDisruptionBudget does not allow it now.
    Refused(String),
    Gone,
    Failed(String),
}

impl EvictResult {
    fn label(&self) -> &'static str {
        match self {
            EvictResult::Evicted => "evicted",
            EvictResult::Refused(_) => "refused",
            EvictResult::Gone => "gone",
            EvictResult::Failed(_) => "failed",
        }
    }
}

async fn evict_pod(api: &Api<Pod>, pod: &PodRef) -> EvictResult {
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: Some(Preconditions { uid: Some(pod.uid.clone()), resource_version: None }),
            ..Default::default()
        }),
        ..Default::default()
    };
    match api.evict(&pod.name, &params).await {
        Ok(_) => EvictResult::Evicted,
        Err(kube::Error::Api(s)) if s.code == 429 => EvictResult::Refused(s.message.clone()),
        // Gone, or re-created under the same name (the UID precondition).
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => EvictResult::Gone,
        Err(e) => EvictResult::Failed(e.to_string()),
    }
}

/// Puts the spot taint on `node` or takes it off; returns whether the
/// node changed. A concurrent change of other taints is never
/// overwritten: the write is conditional on the version read, and read
/// again on a conflict.
async fn set_taint(api: &Api<Node>, node: &str, on: bool) -> Result<bool, kube::Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = match api.get(node).await {
            Ok(n) => n,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => return Err(e),
        };
        let taints = current.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        let ours = |t: &k8s_openapi::api::core::v1::Taint| t.key == TAINT_SPOT_EXPIRING && t.effect == "NoSchedule";
        let has = taints.iter().any(ours);
        if has == on {
            return Ok(false);
        }
        let mut next: Vec<_> = taints.into_iter().filter(|t| !ours(t)).collect();
        if on {
            next.push(k8s_openapi::api::core::v1::Taint {
                key: TAINT_SPOT_EXPIRING.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        }
        // A merge patch carrying the resourceVersion read is refused
        // with 409 if the node changed since; the list is replaced whole.
        let rv = current.metadata.resource_version.clone().unwrap_or_default();
        let patch = json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": next}});
        match api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => continue,
            Err(e) => return Err(e),
        }
    }
}
