//! QueueQuota: admission by queue, the first level of two-level scheduling
//! (docs/POLICIES.md, "Queues"). A pod of a queue (label
//! `gpu-scheduler.io/queue`, or its namespace's) is looked at only when its
//! requests fit the queue's quota, or can be borrowed from its siblings'
//! unused quota, and fit every ancestor's quota (PreFilter: one verdict for
//! all nodes, saying which queue is full and why it cannot borrow). A quota
//! per GPU model (`nvidia.com/gpu:a100`) is checked per node, as the
//! model is the node's (Filter). Pods without a queue are not concerned.
//!
//! Fair sharing: where a pod would borrow, a sibling queue that borrows
//! less for its weight and has pods waiting goes first.
//!
//! Reclaim (PostFilter, before preemption): a queue refused while within
//! its own quota, because its siblings borrowed what it lent, takes it
//! back (`reclaim: true`, the default): the borrowers' pods are evicted,
//! lowest priority and newest first, gangs whole, and the pod is
//! nominated to a node where it fits once they are gone. Pods nominated
//! that way count against their queue's quota meanwhile, so that the
//! borrowers do not take the freed quota again first.

use std::borrow::Cow;
use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::framework::{
    ClusterEvent, Code, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PostFilterContext,
    PostFilterPlugin, PostFilterResult, PreFilterPlugin, PreFilterResult, Status,
};
use framework::model::Pod;
use framework::queues::{QueuedUse, Queues, QuotaRefusal, Waiting, demand, model_key, queue_of};
use framework::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = framework::queues::QUEUE_QUOTA;

#[derive(Debug, Default, Clone, Copy)]
pub struct QueueQuota;

/// A refusal PostFilter may turn into a reclaim.
struct Refused {
    queue: String,
    demand: Vec<(String, i64)>,
    queues: Arc<Queues>,
}

/// What PreFilter found, for Filter's per-model checks.
struct ModelCheck {
    queue: String,
    gpu_milli: i64,
    queues: Arc<Queues>,
}

impl Plugin for QueueQuota {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Quota frees up when a pod of the queue (or of a borrowing sibling)
    /// goes, and changes with the Queues; a pod placed changes the shares
    /// fair sharing compares; namespace labels may move a pod to another
    /// queue.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Add),
            ClusterEvent::any(EventResource::Queue),
            ClusterEvent::any(EventResource::Namespace),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_post_filter(&self) -> Option<&dyn PostFilterPlugin> {
        Some(self)
    }
}

/// The queues as admission sees them: with the pods nominated to a node
/// (waiting for their victims) counted in their queues, other than `pod`.
fn with_nominated(queues: &Arc<Queues>, state: &CycleState, pod: &Pod, snapshot: &Snapshot) -> Arc<Queues> {
    let Some(nominated) = state.nominated() else { return queues.clone() };
    let mut out: Option<Queues> = None;
    for p in nominated.pods().filter(|p| p.uid != pod.uid) {
        if let Some(q) = queue_of(p, snapshot.namespaces()) {
            out.get_or_insert_with(|| (**queues).clone()).account(q, &demand(p), None, 1);
        }
    }
    out.map_or_else(|| queues.clone(), Arc::new)
}

impl PreFilterPlugin for QueueQuota {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let Some(queue) = queue_of(pod, snapshot.namespaces()) else {
            return (PreFilterResult::default(), Status::skip());
        };
        let queues = with_nominated(snapshot.queues(), state, pod, snapshot);
        let want = demand(pod);
        if let Err(why) = queues.admit(queue, &want) {
            // Preempting pods on nodes would not free quota: only reclaim
            // (this plugin's PostFilter) or pods leaving can.
            state.write(QuotaRefusal);
            state.write(Refused { queue: queue.to_string(), demand: want, queues: queues.clone() });
            return (PreFilterResult::default(), Status::unresolvable(why));
        }
        if let Some(Waiting(waiting)) = state.read::<Waiting>()
            && let Err(why) = queues.fair(queue, &want, waiting)
        {
            // Another queue's turn to borrow: retried as pods are placed.
            state.write(QuotaRefusal);
            return (PreFilterResult::default(), Status::unresolvable(why));
        }
        let gpu_milli = want.iter().find(|(k, _)| k == framework::facts::GPU_RESOURCE).map_or(0, |(_, v)| *v);
        let by_model = gpu_milli > 0 && queues.limits_models(queue);
        if !by_model {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(ModelCheck { queue: queue.to_string(), gpu_milli, queues: queues.clone() });
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for QueueQuota {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(check) = state.read::<ModelCheck>() else { return Status::success() };
        let Some(model) = node.facts.gpu_model.as_deref() else { return Status::success() };
        match check.queues.admit(&check.queue, &[(model_key(model), check.gpu_milli)]) {
            Ok(()) => Status::success(),
            Err(why) => Status::unschedulable(Cow::Owned(why)),
        }
    }
}

impl PostFilterPlugin for QueueQuota {
    fn post_filter(&self, ctx: &PostFilterContext<'_>, state: &CycleState, pod: &Pod) -> PostFilterResult {
        let pass =
            || PostFilterResult { nominated_node: None, victims: Vec::new(), status: Status::skip(), record: None };
        let Some(refused) = state.read::<Refused>() else { return pass() };
        let snapshot = ctx.snapshot;
        let running: Vec<QueuedUse> = snapshot
            .nodes()
            .iter()
            .flat_map(|info| {
                let model = info.facts.gpu_model.clone();
                info.pods.iter().filter_map(move |p| {
                    queue_of(p, snapshot.namespaces()).map(|q| QueuedUse {
                        pod: p.clone(),
                        queue: q.to_string(),
                        model: model.clone(),
                    })
                })
            })
            .collect();
        let Some(victims) = refused.queues.reclaim(&refused.queue, &refused.demand, &running) else { return pass() };
        // A node where the pod fits once the victims there are gone.
        for (position, info) in snapshot.nodes().iter().enumerate() {
            let mut node = (**info).clone();
            for v in victims.iter().filter(|v| v.node_name.as_deref() == Some(info.node.name.as_str())) {
                node.remove_pod(&v.uid);
            }
            if ctx.filter(state, pod, position, &node).is_ok() {
                return PostFilterResult {
                    nominated_node: Some(info.node.name.clone()),
                    victims,
                    status: Status::success(),
                    record: None,
                };
            }
        }
        PostFilterResult {
            nominated_node: None,
            victims: Vec::new(),
            status: Status::new(
                Code::Unschedulable,
                "queue reclaim: the quota can be taken back, but no node would fit the pod",
            ),
            record: None,
        }
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(QueueQuota))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use framework::cache::Cache;
    use framework::facts::{GPU_RESOURCE, LABEL_GPU_MODEL};
    use framework::framework::Code;
    use framework::queues::{LABEL_QUEUE, Queue};
    use framework::testing::{node, pod};

    fn queue(name: &str, parent: Option<&str>, quota: &[(&str, i64)]) -> Queue {
        Queue {
            name: name.into(),
            parent: parent.map(str::to_string),
            quota: quota.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            borrowing_limit: BTreeMap::new(),
            lending_limit: BTreeMap::new(),
            weight: 1.0,
            reclaim: true,
        }
    }

    fn gpu_pod(name: &str, queue: &str, gpus: u32) -> Pod {
        pod(name).label(LABEL_QUEUE, queue).with(|p| p.gpu = framework::devices::GpuRequest::whole(gpus)).build()
    }

    fn bound(mut p: Pod, node: &str) -> Pod {
        p.node_name = Some(node.into());
        p
    }

    #[test]
    fn pre_filter_and_filter_table() {
        let mut cache = Cache::new();
        cache.upsert_queue(queue("root", None, &[(GPU_RESOURCE, 16_000)]));
        cache.upsert_queue(queue("team-a", Some("root"), &[(GPU_RESOURCE, 8000), ("nvidia.com/gpu:a100", 2000)]));
        cache.upsert_queue(queue("team-b", Some("root"), &[(GPU_RESOURCE, 8000)]));
        cache.upsert_node(node("a100").label(LABEL_GPU_MODEL, "a100").resource(GPU_RESOURCE, 8).build());
        cache.upsert_node(node("t4").label(LABEL_GPU_MODEL, "t4").resource(GPU_RESOURCE, 8).build());
        cache.add_pod(Arc::new(bound(gpu_pod("b-running", "team-b", 8), "t4"))).unwrap();
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let plugin = new(None).unwrap();
        let (pf, f) = (plugin.as_pre_filter().unwrap(), plugin.as_filter().unwrap());
        // (pod, PreFilter code and message, Filter on a100, Filter on t4)
        let cases: Vec<(Pod, Code, &str, bool, bool)> = vec![
            (pod("no-queue").build(), Code::Skip, "", true, true),
            (gpu_pod("fits", "team-a", 2), Code::Success, "", true, true),
            (gpu_pod("a100-over-quota", "team-a", 3), Code::Success, "", false, true),
            (
                gpu_pod("cannot-borrow", "team-a", 9),
                Code::UnschedulableAndUnresolvable,
                "queue team-a: 0/8 GPUs in use, cannot borrow: team-b lends 0",
                true,
                true,
            ),
            (
                gpu_pod("b-over", "team-b", 9),
                Code::UnschedulableAndUnresolvable,
                "queue team-b: 8/8 GPUs in use, cannot borrow: team-a lends 8",
                true,
                true,
            ),
            (
                gpu_pod("nowhere", "team-z", 1),
                Code::UnschedulableAndUnresolvable,
                "queue team-z does not exist",
                true,
                true,
            ),
        ];
        for (p, code, message, on_a100, on_t4) in cases {
            let mut state = CycleState::new();
            let (_, s) = pf.pre_filter(&mut state, &p, &snap);
            assert_eq!((s.code, s.message().as_str()), (code, message), "{}", p.name);
            if s.code != Code::Success {
                continue;
            }
            for i in 0..2 {
                let view = snap.view(i);
                let want = if view.node.name == "a100" { on_a100 } else { on_t4 };
                assert_eq!(f.filter(&state, &p, &view).is_success(), want, "{} on {}", p.name, view.node.name);
            }
        }
        // The per-model refusal names the model's quota.
        let mut state = CycleState::new();
        let p = gpu_pod("a100-over-quota", "team-a", 3);
        let _ = pf.pre_filter(&mut state, &p, &snap);
        let a100 = (0..2).map(|i| snap.view(i)).find(|v| v.node.name == "a100").unwrap();
        assert_eq!(
            f.filter(&state, &p, &a100).message(),
            "queue team-a: 0/2 a100 GPUs in use, cannot borrow: team-b lends 0"
        );
    }
}
