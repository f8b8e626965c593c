//! Queues with quotas, the first level of two-level scheduling (Kueue's
//! ClusterQueue and cohort, in one cluster-scoped CRD `gpu-scheduler.io/
//! v1alpha1` `Queue`): a pod joins the queue named by its label
//! `gpu-scheduler.io/queue`, else by its namespace's label of that name.
//! Before any node is looked at, the pod's requests must fit its queue's
//! quota, or be borrowed from the unused quota of the queue's siblings
//! (the children of the same parent), within the borrower's
//! `borrowingLimit` and each lender's `lendingLimit`; and every ancestor's
//! quota too. A quota per GPU model (`nvidia.com/gpu:a100`) is checked per
//! node, as the model depends on the node.
//!
//! Amounts are the engine's units: cpu in thousandths, memory in bytes,
//! `nvidia.com/gpu` in thousandths of a GPU (a share counts its part),
//! other resources as counts. A queue limits only the resources its quota
//! names.
//!
//! [`Queues`] holds the specs and each queue's own pods' use, kept by the
//! cache as pods are added, assumed and removed, and carried in the
//! snapshot. Its checks: `admit` (the quota up the chain, whose error is the
//! pod's reason), `fair` (fair sharing by weight against the siblings with
//! pods [`Waiting`], which the scheduler keeps per queue and hands to each
//! cycle), `reclaim` (the borrowers' pods to evict for a queue within its
//! quota) and `statuses` (use for status and metrics); [`demand`] is what a
//! pod takes. The checks run in the QueueQuota plugin, whose name is here
//! ([`QUEUE_QUOTA`]) so that drivers report its victims as a reclaim.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::model::{Labels, Pod, PodRef};
use gpu_scheduler_model::gpu::{GPU_RESOURCE, GpuKind};

/// The Queue CRD's group/version and kind.
pub const API_VERSION: &str = "gpu-scheduler.io/v1alpha1";
pub const KIND: &str = "Queue";

/// The pod (or namespace) label naming a pod's queue.
pub const LABEL_QUEUE: &str = "gpu-scheduler.io/queue";
/// The plugin that admits pods by quota and reclaims lent quota (its
/// victims are reported as a reclaim, not a priority preemption).
pub const QUEUE_QUOTA: &str = "QueueQuota";

/// How deep a hierarchy is followed (a longer chain, or a cycle, is an
/// error of the queues' configuration).
const MAX_DEPTH: usize = 16;

/// A Queue, converted (`convert::queue_from_object`).
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    pub name: String,
    pub parent: Option<String>,
    /// Nominal quota by resource key (`cpu`, `memory`, `nvidia.com/gpu`,
    /// `nvidia.com/gpu:MODEL`, any extended resource).
    pub quota: BTreeMap<String, i64>,
    /// How much beyond its quota it may borrow; absent: no limit.
    pub borrowing_limit: BTreeMap<String, i64>,
    /// How much of its unused quota siblings may borrow; absent: all.
    pub lending_limit: BTreeMap<String, i64>,
    /// Fair-share weight among siblings.
    pub weight: f64,
    /// Whether it may take back lent quota by preempting borrowers.
    pub reclaim: bool,
}

/// The queue key of a GPU model's quota.
pub fn model_key(model: &str) -> String {
    format!("{GPU_RESOURCE}:{model}")
}

/// A resource key for people: GPUs in GPUs (`nvidia.com/gpu` counts
/// thousandths), cpu in cores, memory in GiB.
pub fn show(key: &str, amount: i64) -> String {
    let base = key.split(':').next().unwrap_or(key);
    match base {
        GPU_RESOURCE => trim(amount as f64 / 1000.0),
        "cpu" => trim(amount as f64 / 1000.0),
        "memory" => format!("{}Gi", trim(amount as f64 / f64::from(1u32 << 30))),
        _ => amount.to_string(),
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The name a resource key goes by in messages (`GPUs`, `cpu`, ...).
fn noun(key: &str) -> String {
    match key.split_once(':') {
        None if key == GPU_RESOURCE => "GPUs".into(),
        Some((GPU_RESOURCE, model)) => format!("{model} GPUs"),
        _ => key.to_string(),
    }
}

/// The queue `pod` belongs to: its label, else its namespace's.
pub fn queue_of<'a>(pod: &'a Pod, namespaces: &'a HashMap<String, Labels>) -> Option<&'a str> {
    pod.labels
        .get(LABEL_QUEUE)
        .or_else(|| namespaces.get(&pod.namespace).and_then(|l| l.get(LABEL_QUEUE)))
        .map(String::as_str)
        .filter(|q| !q.is_empty())
}

/// What a pod takes of its queue, wherever it runs: cpu, memory, GPU
/// thousandths and other requested resources (the model's key is added
/// per node, [`model_key`]).
pub fn demand(pod: &Pod) -> Vec<(String, i64)> {
    let r = &pod.requests;
    let mut out = vec![("cpu".to_string(), r.milli_cpu), ("memory".to_string(), r.memory)];
    for (name, v) in r.scalars() {
        if &**name != GPU_RESOURCE {
            out.push((name.to_string(), *v));
        }
    }
    let gpu = match pod.gpu.kind {
        GpuKind::Whole { .. } | GpuKind::Share { .. } => i64::try_from(pod.gpu.total_milli()).unwrap_or(i64::MAX),
        _ => 0,
    };
    if gpu > 0 {
        out.push((GPU_RESOURCE.to_string(), gpu));
    }
    out.retain(|(_, v)| *v > 0);
    out
}

/// Pods waiting in the scheduling queue per queue, for fair sharing:
/// those not yet tried, and those QueueQuota refused last time (pods
/// refused for other reasons do not compete for quota). Kept by the
/// scheduler, handed to each cycle.
#[derive(Debug, Clone, Default)]
pub struct Waiting(pub std::sync::Arc<HashMap<String, usize>>);

/// Left in the cycle state by an admission refusal, so that the
/// scheduler keeps counting the pod as waiting for quota.
#[derive(Debug, Clone, Copy)]
pub struct QuotaRefusal;

/// A queue's state (`Queues::statuses`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStatus {
    pub name: String,
    /// In use by the queue and its descendants, by key (engine units).
    pub usage: BTreeMap<String, i64>,
    /// What of that is beyond its quota (borrowed from siblings).
    pub borrowed: BTreeMap<String, i64>,
    /// Its own bound or assumed pods.
    pub admitted: usize,
}

/// An amount as a Kubernetes quantity: GPUs and cpu from thousandths
/// (`12`, `1500m`), the rest as counts or bytes.
pub fn quantity(key: &str, amount: i64) -> String {
    let base = key.split(':').next().unwrap_or(key);
    if (base == GPU_RESOURCE || base == "cpu") && amount % 1000 != 0 {
        format!("{amount}m")
    } else if base == GPU_RESOURCE || base == "cpu" {
        (amount / 1000).to_string()
    } else {
        amount.to_string()
    }
}

/// A running pod as reclaim sees it: the pod, its queue, its node's GPU
/// model.
#[derive(Debug, Clone)]
pub struct QueuedUse {
    pub pod: PodRef,
    pub queue: String,
    pub model: Option<Arc<str>>,
}

/// The Queue objects, by name, with each parent's children: shared by
/// every copy of [`Queues`], which pods' accounting copies often (the
/// cache's copy is written while a snapshot holds the last one).
#[derive(Debug, Clone, Default)]
struct Specs {
    by_name: BTreeMap<String, Queue>,
    children: HashMap<String, Vec<String>>,
}

impl Specs {
    fn index_children(&mut self) {
        self.children.clear();
        for q in self.by_name.values() {
            if let Some(p) = &q.parent {
                self.children.entry(p.clone()).or_default().push(q.name.clone());
            }
        }
    }
}

/// The queues and what their pods use.
#[derive(Debug, Clone, Default)]
pub struct Queues {
    specs: Arc<Specs>,
    /// Each queue's own pods' use (not its descendants'), by key.
    usage: HashMap<String, BTreeMap<String, i64>>,
    /// Bound or assumed pods per queue.
    pods: HashMap<String, usize>,
}

impl Queues {
    pub fn is_empty(&self) -> bool {
        self.specs.by_name.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Queue> {
        self.specs.by_name.get(name)
    }

    pub fn upsert(&mut self, q: Queue) {
        let specs = Arc::make_mut(&mut self.specs);
        specs.by_name.insert(q.name.clone(), q);
        specs.index_children();
    }

    /// A queue's spec to edit in place (its parent unchanged).
    #[cfg(test)]
    fn spec_mut(&mut self, name: &str) -> Option<&mut Queue> {
        Arc::make_mut(&mut self.specs).by_name.get_mut(name)
    }

    pub fn remove(&mut self, name: &str) {
        let specs = Arc::make_mut(&mut self.specs);
        specs.by_name.remove(name);
        specs.index_children();
    }

    /// Adds (`sign` 1) or removes (-1) a pod's use: `demand` plus, on a
    /// node of a known GPU model, the model's key.
    pub fn account(&mut self, queue: &str, demand: &[(String, i64)], model: Option<&str>, sign: i64) {
        let usage = self.usage.entry(queue.to_string()).or_default();
        for (k, v) in demand {
            *usage.entry(k.clone()).or_default() += sign * v;
            if k == GPU_RESOURCE
                && let Some(m) = model
            {
                *usage.entry(model_key(m)).or_default() += sign * v;
            }
        }
        usage.retain(|_, v| *v != 0);
        let n = self.pods.entry(queue.to_string()).or_default();
        *n = n.saturating_add_signed(sign as isize);
        if *n == 0 {
            self.pods.remove(queue);
            self.usage.remove(queue);
        }
    }

    /// What a queue's own pods use of `key`.
    pub fn own_usage(&self, queue: &str, key: &str) -> i64 {
        self.usage.get(queue).and_then(|u| u.get(key)).copied().unwrap_or(0)
    }

    fn children(&self, parent: &str) -> impl Iterator<Item = &Queue> {
        let specs = &self.specs;
        specs.children.get(parent).into_iter().flatten().filter_map(|name| specs.by_name.get(name))
    }

    /// What a queue and its descendants use of `key`.
    pub fn usage(&self, queue: &str, key: &str) -> i64 {
        self.subtree_usage(queue, key, 0)
    }

    fn subtree_usage(&self, queue: &str, key: &str, depth: usize) -> i64 {
        if depth > MAX_DEPTH {
            return 0;
        }
        let own = self.own_usage(queue, key);
        own + self.children(queue).map(|c| self.subtree_usage(&c.name, key, depth + 1)).sum::<i64>()
    }

    /// The chain from `queue` up to its root; an error when a queue is
    /// missing or the chain loops.
    fn chain<'a>(&'a self, queue: &str) -> Result<Vec<&'a Queue>, String> {
        let mut out: Vec<&Queue> = Vec::new();
        // The first name is the caller's; the others borrow from the specs.
        let first = self.specs.by_name.get_key_value(queue).map(|(k, _)| k.as_str());
        let mut name: &'a str = match first {
            Some(n) => n,
            None => return Err(format!("queue {queue} does not exist")),
        };
        loop {
            let Some(q) = self.specs.by_name.get(name) else {
                return Err(match out.last() {
                    None => format!("queue {name} does not exist"),
                    Some(child) => format!("queue {}: its parent {name} does not exist", child.name),
                });
            };
            if out.len() >= MAX_DEPTH || out.iter().any(|o| o.name == q.name) {
                return Err(format!("queue {queue}: its parents form a cycle or a chain deeper than {MAX_DEPTH}"));
            }
            out.push(q);
            match &q.parent {
                Some(p) => name = p,
                None => return Ok(out),
            }
        }
    }

    /// Whether `demand` more fits queue `queue` (and its ancestors), for
    /// the keys `demand` names; the error says which queue is full and why
    /// it cannot borrow.
    pub fn admit(&self, queue: &str, demand: &[(String, i64)]) -> Result<(), String> {
        for q in self.chain(queue)? {
            for (key, n) in demand {
                self.admit_at(q, key, *n)?;
            }
        }
        Ok(())
    }

    fn admit_at(&self, q: &Queue, key: &str, n: i64) -> Result<(), String> {
        let Some(&quota) = q.quota.get(key) else { return Ok(()) };
        let used = self.usage(&q.name, key);
        let over = used + n - quota;
        let what = || format!("queue {}: {}/{} {} in use", q.name, show(key, used), show(key, quota), noun(key));
        let Some(parent) = q.parent.as_deref() else {
            return if over > 0 { Err(format!("{}, and it has no parent to borrow from", what())) } else { Ok(()) };
        };
        if let Some(&limit) = q.borrowing_limit.get(key)
            && over > limit
        {
            return Err(format!("{}, its borrowing limit is {}", what(), show(key, limit)));
        }
        // The siblings' unused quota that they lend, against what is
        // borrowed from it: by the others, and by this queue after `n`.
        let (mut lent_out, mut lendable) = (over.max(0), 0);
        let lends = |s: &Queue| {
            let s_quota = s.quota.get(key).copied().unwrap_or(0);
            let s_used = self.usage(&s.name, key);
            let lends = (s_quota - s_used).max(0).min(s.lending_limit.get(key).copied().unwrap_or(i64::MAX));
            (lends, (s_used - s_quota).max(0))
        };
        for s in self.children(parent).filter(|s| s.name != q.name) {
            let (lends, borrows) = lends(s);
            lendable += lends;
            lent_out += borrows;
        }
        // This queue's own unused quota (after n) is lent out too.
        let own_lends = (quota - used - n).max(0).min(q.lending_limit.get(key).copied().unwrap_or(i64::MAX));
        if lent_out <= lendable + own_lends {
            return Ok(());
        }
        if over <= 0 {
            // Within its quota, but siblings borrowed what it lent.
            return Err(format!("{}, within its quota, but its siblings borrow it", what()));
        }
        // The message only on refusal: admission runs every cycle.
        let lenders: Vec<String> = self
            .children(parent)
            .filter(|s| s.name != q.name)
            .map(|s| format!("{} lends {}", s.name, show(key, lends(s).0)))
            .collect();
        let mut lenders = if lenders.is_empty() { "no sibling queue".to_string() } else { lenders.join(", ") };
        // What is borrowed already, by this queue and the others.
        let already = lent_out - over.max(0) + (used - quota).max(0);
        if already > 0 {
            lenders.push_str(&format!(", {} borrowed already", show(key, already)));
        }
        Err(format!("{}, cannot borrow: {lenders}", what()))
    }

    /// The first queue of `queue`'s chain that refuses `demand`, and
    /// whether that queue is within its own quota there (its siblings
    /// borrow what it lent).
    fn refusing_level(&self, queue: &str, demand: &[(String, i64)]) -> Option<(&Queue, bool)> {
        let chain = self.chain(queue).ok()?;
        for q in chain {
            for (key, n) in demand {
                if self.admit_at(q, key, *n).is_err() {
                    let quota = q.quota.get(key).copied().unwrap_or(0);
                    let within = self.usage(&q.name, key) + n <= quota;
                    return Some((q, within));
                }
            }
        }
        None
    }

    /// Reclaim: when `queue` (or the ancestor that refuses `demand`) is
    /// within its own quota but its siblings borrowed what it lent, and
    /// it may reclaim, the pods to evict from the borrowing siblings so
    /// that `demand` fits: lowest priority first, then the newest, then
    /// by name from the last; a gang's members all together. `pods` are
    /// the pods running, each with its queue and its node's GPU model.
    /// None when reclaim does not apply or cannot free enough.
    pub fn reclaim(&self, queue: &str, demand: &[(String, i64)], pods: &[QueuedUse]) -> Option<Vec<PodRef>> {
        let (level, within) = self.refusing_level(queue, demand)?;
        if !within || !level.reclaim {
            return None;
        }
        let parent = level.parent.as_deref()?;
        // The siblings that borrow, with every queue below them.
        let borrowing: Vec<&Queue> = self
            .children(parent)
            .filter(|s| s.name != level.name)
            .filter(|s| demand.iter().any(|(k, _)| self.usage(&s.name, k) > s.quota.get(k).copied().unwrap_or(0)))
            .collect();
        let under = |q: &str, root: &str| self.chain(q).is_ok_and(|c| c.iter().any(|a| a.name == root));
        let mut candidates: Vec<&QueuedUse> =
            pods.iter().filter(|u| borrowing.iter().any(|s| under(&u.queue, &s.name))).collect();
        candidates.sort_by(|a, b| {
            (a.pod.priority, std::cmp::Reverse(a.pod.start_time), std::cmp::Reverse(a.pod.key())).cmp(&(
                b.pod.priority,
                std::cmp::Reverse(b.pod.start_time),
                std::cmp::Reverse(b.pod.key()),
            ))
        });
        let mut trial = self.clone();
        let mut victims: Vec<PodRef> = Vec::new();
        for c in candidates {
            if victims.iter().any(|v| v.uid == c.pod.uid) {
                continue; // taken with its gang already
            }
            // Only from a sibling that still borrows.
            let sibling = borrowing.iter().find(|s| under(&c.queue, &s.name))?;
            let still =
                demand.iter().any(|(k, _)| trial.usage(&sibling.name, k) > sibling.quota.get(k).copied().unwrap_or(0));
            if !still {
                continue;
            }
            let unit: Vec<&QueuedUse> = match c.pod.group_key() {
                Some(g) => pods.iter().filter(|u| u.pod.group_key().as_deref() == Some(g.as_str())).collect(),
                None => vec![c],
            };
            for u in unit {
                trial.account(&u.queue, &self::demand(&u.pod), u.model.as_deref(), -1);
                victims.push(u.pod.clone());
            }
            if trial.admit(queue, demand).is_ok() {
                return Some(victims);
            }
        }
        None
    }

    /// Whether `queue` is `root` or below it.
    fn is_under(&self, queue: &str, root: &str) -> bool {
        self.chain(queue).is_ok_and(|c| c.iter().any(|q| q.name == root))
    }

    /// Fair sharing of what siblings lend: where `queue` (or an ancestor)
    /// would borrow for `demand`, a sibling that also borrows and has pods
    /// `waiting` goes first while its borrowed share, divided by its
    /// `weight`, would stay below this one's (dominant resource fairness
    /// over the borrowed resources, one pod at a time).
    pub fn fair(&self, queue: &str, demand: &[(String, i64)], waiting: &HashMap<String, usize>) -> Result<(), String> {
        for level in self.chain(queue)? {
            let Some(parent) = level.parent.as_deref() else { continue };
            for (key, n) in demand {
                let Some(&quota) = level.quota.get(key) else { continue };
                let after = self.usage(&level.name, key) + n - quota;
                if after <= 0 {
                    continue; // within its own quota here
                }
                let mine = after as f64 / level.weight;
                for s in self.children(parent).filter(|s| s.name != level.name) {
                    let waits = waiting.iter().any(|(q, n)| *n > 0 && self.is_under(q, &s.name));
                    let s_after = self.usage(&s.name, key) + n - s.quota.get(key).copied().unwrap_or(0);
                    // Its next pod within its own quota does not compete.
                    if !waits || s_after <= 0 {
                        continue;
                    }
                    if mine > s_after as f64 / s.weight + 1e-9 {
                        return Err(format!(
                            "queue {}: waits for its fair share of borrowed {}: {} (weight {}) has pods waiting and borrows less",
                            level.name,
                            noun(key),
                            s.name,
                            s.weight
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Each queue's state for its status and metrics: what it and its
    /// descendants use of the resources its quota names or its pods use,
    /// what of that is borrowed, and its own pods.
    pub fn statuses(&self) -> Vec<QueueStatus> {
        self.specs
            .by_name
            .values()
            .map(|q| {
                let mut keys: Vec<&String> = q.quota.keys().collect();
                if let Some(own) = self.usage.get(&q.name) {
                    keys.extend(own.keys());
                }
                keys.sort();
                keys.dedup();
                let usage: BTreeMap<String, i64> =
                    keys.iter().map(|k| ((*k).clone(), self.usage(&q.name, k))).collect();
                let borrowed = q
                    .quota
                    .iter()
                    .filter_map(|(k, quota)| {
                        let over = usage.get(k).copied().unwrap_or(0) - quota;
                        (over > 0).then(|| (k.clone(), over))
                    })
                    .collect();
                QueueStatus { name: q.name.clone(), usage, borrowed, admitted: self.pod_count(&q.name) }
            })
            .collect()
    }

    /// Whether any queue in `queue`'s chain has a quota per GPU model.
    pub fn limits_models(&self, queue: &str) -> bool {
        self.chain(queue).is_ok_and(|c| c.iter().any(|q| q.quota.keys().any(|k| k.contains(':'))))
    }

    /// Bound or assumed pods of `queue` itself.
    pub fn pod_count(&self, queue: &str) -> usize {
        self.pods.get(queue).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPU: &str = GPU_RESOURCE;

    fn q(name: &str, parent: Option<&str>, gpus: Option<i64>) -> Queue {
        Queue {
            name: name.into(),
            parent: parent.map(str::to_string),
            quota: gpus.map(|g| (GPU.to_string(), g * 1000)).into_iter().collect(),
            borrowing_limit: BTreeMap::new(),
            lending_limit: BTreeMap::new(),
            weight: 1.0,
            reclaim: true,
        }
    }

    fn gpus(n: i64) -> Vec<(String, i64)> {
        vec![(GPU.to_string(), n * 1000)]
    }

    /// Two teams of 8 GPUs under a root of 16.
    fn teams() -> Queues {
        let mut qs = Queues::default();
        qs.upsert(q("root", None, Some(16)));
        qs.upsert(q("team-a", Some("root"), Some(8)));
        qs.upsert(q("team-b", Some("root"), Some(8)));
        qs
    }

    #[test]
    fn admission_table() {
        // (what team-a and team-b use, the queue asking, GPUs asked, error or none)
        let cases: &[(i64, i64, &str, i64, Option<&str>)] = &[
            (0, 0, "team-a", 8, None),
            (0, 0, "team-a", 16, None),
            (8, 0, "team-a", 8, None),
            (
                16,
                0,
                "team-a",
                1,
                Some("queue team-a: 16/8 GPUs in use, cannot borrow: team-b lends 8, 8 borrowed already"),
            ),
            (8, 4, "team-a", 5, Some("queue team-a: 8/8 GPUs in use, cannot borrow: team-b lends 4")),
            (8, 4, "team-a", 4, None),
            (16, 0, "team-b", 1, Some("queue team-b: 0/8 GPUs in use, within its quota, but its siblings borrow it")),
            (4, 4, "team-b", 8, None),
            (0, 0, "team-a", 17, Some("queue team-a: 0/8 GPUs in use, cannot borrow: team-b lends 8")),
        ];
        for &(a, b, who, n, want) in cases {
            let mut qs = teams();
            qs.account("team-a", &gpus(a), None, 1);
            qs.account("team-b", &gpus(b), None, 1);
            let got = qs.admit(who, &gpus(n)).err();
            assert_eq!(got.as_deref(), want, "a={a} b={b}: {who} asks {n}");
        }
    }

    #[test]
    fn limits_and_hierarchy() {
        let mut qs = teams();
        qs.spec_mut("team-a").unwrap().borrowing_limit.insert(GPU.into(), 2000);
        qs.spec_mut("team-b").unwrap().lending_limit.insert(GPU.into(), 1000);
        assert_eq!(
            qs.admit("team-a", &gpus(11)).unwrap_err(),
            "queue team-a: 0/8 GPUs in use, its borrowing limit is 2"
        );
        assert_eq!(
            qs.admit("team-a", &gpus(10)).unwrap_err(),
            "queue team-a: 0/8 GPUs in use, cannot borrow: team-b lends 1"
        );
        assert!(qs.admit("team-a", &gpus(9)).is_ok());
        // The root's own quota caps the sum of its children.
        let mut qs = teams();
        qs.spec_mut("team-a").unwrap().quota.insert(GPU.into(), 12_000);
        qs.account("team-b", &gpus(8), None, 1);
        assert_eq!(
            qs.admit("team-a", &gpus(9)).unwrap_err(),
            "queue root: 8/16 GPUs in use, and it has no parent to borrow from"
        );
        assert!(qs.admit("team-a", &gpus(8)).is_ok());
        // A queue limits only what its quota names.
        assert!(qs.admit("team-a", &[("cpu".into(), 1_000_000)]).is_ok());
        assert_eq!(qs.admit("team-c", &gpus(1)).unwrap_err(), "queue team-c does not exist");
        qs.upsert(q("loop-1", Some("loop-2"), Some(1)));
        qs.upsert(q("loop-2", Some("loop-1"), Some(1)));
        assert!(qs.admit("loop-1", &gpus(1)).unwrap_err().contains("cycle"));
        qs.upsert(q("orphan", Some("gone"), Some(1)));
        assert_eq!(qs.admit("orphan", &gpus(1)).unwrap_err(), "queue orphan: its parent gone does not exist");
    }

    #[test]
    fn fair_sharing_by_weight() {
        let mut qs = Queues::default();
        qs.upsert(q("root", None, None));
        qs.upsert(q("lender", Some("root"), Some(12)));
        let mut a = q("team-a", Some("root"), Some(0));
        a.weight = 2.0;
        qs.upsert(a);
        qs.upsert(q("team-b", Some("root"), Some(0)));
        let both: HashMap<String, usize> = [("team-a".to_string(), 5), ("team-b".to_string(), 5)].into();
        let one = gpus(1);
        // (a's GPUs, b's GPUs, who asks, admitted)
        let cases = [
            (0, 0, "team-a", true),
            (1, 0, "team-a", true),
            (2, 0, "team-a", false),
            (2, 0, "team-b", true),
            (2, 1, "team-b", false),
            (3, 1, "team-a", true),
            (8, 4, "team-a", true),
            (7, 3, "team-b", true),
        ];
        for (ga, gb, who, ok) in cases {
            let mut t = qs.clone();
            t.account("team-a", &gpus(ga), None, 1);
            t.account("team-b", &gpus(gb), None, 1);
            assert_eq!(t.fair(who, &one, &both).is_ok(), ok, "a={ga} b={gb}: {who}");
        }
        // Nobody else waiting: no limit from fairness.
        let mut t = qs.clone();
        t.account("team-a", &gpus(10), None, 1);
        assert!(t.fair("team-a", &one, &[("team-a".to_string(), 3)].into()).is_ok());
        assert_eq!(
            t.fair("team-a", &one, &both).unwrap_err(),
            "queue team-a: waits for its fair share of borrowed GPUs: team-b (weight 1) has pods waiting and borrows less"
        );
    }

    #[test]
    fn statuses_say_use_and_borrowing() {
        let mut qs = teams();
        qs.account("team-a", &gpus(10), Some("a100"), 1);
        let st: Vec<QueueStatus> = qs.statuses();
        let a = st.iter().find(|s| s.name == "team-a").unwrap();
        assert_eq!(a.usage.get(GPU), Some(&10_000));
        assert_eq!(a.usage.get(&model_key("a100")), Some(&10_000));
        assert_eq!(a.borrowed.get(GPU), Some(&2000));
        assert_eq!(a.admitted, 1);
        let root = st.iter().find(|s| s.name == "root").unwrap();
        assert_eq!((root.usage.get(GPU), root.borrowed.len(), root.admitted), (Some(&10_000), 0, 0));
    }

    #[test]
    fn reclaim_takes_back_lent_quota_from_borrowers_gangs_whole() {
        use crate::testing::pod;
        use std::sync::Arc;
        let mut qs = teams();
        let gpu_pod = |name: &str, group: Option<&str>, priority: i32| -> PodRef {
            Arc::new(
                pod(name)
                    .priority(priority)
                    .with(|p| {
                        p.gpu = gpu_scheduler_model::gpu::GpuRequest::whole(1);
                        p.pod_group = group.map(str::to_string);
                    })
                    .build(),
            )
        };
        // team-a runs 8 of its own and a gang of 4 plus 4 single pods
        // borrowed from team-b.
        let mut pods = Vec::new();
        let mut add = |qs: &mut Queues, p: PodRef, queue: &str| {
            qs.account(queue, &demand(&p), None, 1);
            pods.push(QueuedUse { pod: p, queue: queue.into(), model: None });
        };
        for i in 0..8 {
            add(&mut qs, gpu_pod(&format!("own-{i}"), None, 10), "team-a");
        }
        for i in 0..4 {
            add(&mut qs, gpu_pod(&format!("gang-{i}"), Some("g"), 0), "team-a");
            add(&mut qs, gpu_pod(&format!("single-{i}"), None, 5), "team-a");
        }
        let one = gpus(1);
        assert!(qs.admit("team-b", &one).unwrap_err().contains("within its quota"));
        // Lowest priority first: the gang, whole (4 GPUs for 1 needed).
        let victims = qs.reclaim("team-b", &one, &pods).unwrap();
        let mut names: Vec<&str> = victims.iter().map(|v| v.name.as_str()).collect();
        names.sort();
        assert_eq!(names, ["gang-0", "gang-1", "gang-2", "gang-3"]);
        // 6 needed: the gang and two singles, the last by name first.
        let victims = qs.reclaim("team-b", &gpus(6), &pods).unwrap();
        let names: Vec<&str> = victims.iter().map(|v| v.name.as_str()).skip(4).collect();
        assert_eq!(names, ["single-3", "single-2"]);
        // Never below what team-a may keep: 9 GPUs for team-b cannot be reclaimed.
        assert!(qs.reclaim("team-b", &gpus(9), &pods).is_none());
        // A borrower over its own quota does not reclaim; nor a queue that may not.
        assert!(qs.reclaim("team-a", &one, &pods).is_none());
        qs.spec_mut("team-b").unwrap().reclaim = false;
        assert!(qs.reclaim("team-b", &one, &pods).is_none());
    }

    #[test]
    fn usage_follows_pods_and_models() {
        let mut qs = teams();
        qs.account("team-a", &gpus(2), Some("a100"), 1);
        qs.account("team-a", &gpus(1), None, 1);
        assert_eq!(qs.usage("team-a", GPU), 3000);
        assert_eq!(qs.usage("team-a", &model_key("a100")), 2000);
        assert_eq!(qs.usage("root", GPU), 3000, "a parent's use is its children's");
        assert_eq!(qs.pod_count("team-a"), 2);
        qs.account("team-a", &gpus(2), Some("a100"), -1);
        qs.account("team-a", &gpus(1), None, -1);
        assert_eq!((qs.usage("root", GPU), qs.pod_count("team-a")), (0, 0));
        assert_eq!(show(GPU, 1500), "1.5");
        assert_eq!(
            (quantity(GPU, 1500), quantity(GPU, 8000), quantity("memory", 1 << 30)),
            ("1500m".into(), "8".into(), "1073741824".into())
        );
        assert_eq!(show("memory", 3 << 30), "3Gi");
    }
}
