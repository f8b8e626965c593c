//! VolumeBinding: a pod's PersistentVolumeClaims, with kube-scheduler
//! v1.36's semantics and messages (`framework/plugins/volumebinding`).
//!
//! - PreFilter: every claim must exist and not be deleting; a claim of an
//!   `Immediate` class must be bound already (the PV controller binds
//!   those); claims of `WaitForFirstConsumer` classes wait for the pod.
//! - Filter: a bound claim's volume must exist and its node affinity admit
//!   the node; each unbound delayed claim needs, on the node, a matching
//!   available volume (same class, enough capacity, the access modes, the
//!   claim's selector, node affinity; the smallest wins, none taken twice)
//!   or a class whose provisioner may create one there (allowed
//!   topologies). A claim already marked for provisioning on another node
//!   (`volume.kubernetes.io/selected-node`) rules every other node out.
//! - Reserve: the chosen node's bindings go into the cycle state; the
//!   engine assumes them in its cache (the next pods do not take the same
//!   volume) and forgets them if the binding fails.
//! - PreBind: the binder writes them (the volume's claimRef; the claim's
//!   selected node) and waits for the PV controller to bind the claims, up
//!   to `bindTimeoutSeconds`.
//!
//! Storage capacity tracking (CSIStorageCapacity) is not read: a class
//! that provisions is taken to have room wherever its topology allows.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use framework::cache::{NodeView, Snapshot};
use framework::framework::Binder;
use framework::framework::{
    ClusterEvent, CycleState, FilterPlugin, Plugin, PreBindPlugin, PreFilterPlugin, PreFilterResult, ReservePlugin,
    Status,
};
use framework::model::{Node, Pod};
use framework::registry::{ArgsError, decode_args};
use framework::volumes::{Claim, ClaimRef, PodVolumeBindings, Volume, VolumeObjects};
use serde::Deserialize;

use crate::volumes::{pod_claim, volume_events};

pub const NAME: &str = "VolumeBinding";

pub const ERR_REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) didn't match PersistentVolume's node affinity";
pub const ERR_REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const ERR_REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// `VolumeBindingArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VolumeBindingArgs {
    /// How long PreBind waits for the PV controller to bind the claims.
    #[serde(default = "default_timeout")]
    pub bind_timeout_seconds: i64,
}

fn default_timeout() -> i64 {
    600
}

impl Default for VolumeBindingArgs {
    fn default() -> Self {
        VolumeBindingArgs { bind_timeout_seconds: default_timeout() }
    }
}

#[derive(Debug, Clone)]
pub struct VolumeBinding {
    timeout_seconds: u64,
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    let args: VolumeBindingArgs = decode_args(args)?;
    // kube multiplies it by time.Second: past Go's longest duration it would wrap.
    let max = framework::bounds::MAX_SECONDS as i64;
    let timeout = ArgsError::check("bindTimeoutSeconds", framework::bounds::int(args.bind_timeout_seconds, 0, max))
        .map_err(|e| ArgsError::new(e.path, format!("invalid BindTimeoutSeconds: {}", e.message)))?;
    Ok(Arc::new(VolumeBinding { timeout_seconds: timeout.unsigned_abs() }))
}

/// The pod's claims, sorted out once per cycle.
struct PodClaims {
    objects: Arc<VolumeObjects>,
    /// Claims bound (or pre-bound) to a volume, with the volume if it exists.
    bound: Vec<(Arc<Claim>, Option<Arc<Volume>>)>,
    /// Unbound claims of `WaitForFirstConsumer` classes.
    delayed: Vec<Arc<Claim>>,
    /// The bindings found on each node that passed, for Reserve.
    by_node: Mutex<HashMap<String, PodVolumeBindings>>,
}

impl Plugin for VolumeBinding {
    fn name(&self) -> &'static str {
        NAME
    }

    fn events_to_register(&self) -> Vec<ClusterEvent> {
        volume_events()
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }

    fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
        Some(self)
    }

    fn as_pre_bind(&self) -> Option<&dyn PreBindPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snap: &Snapshot) -> (PreFilterResult, Status) {
        let objects = snap.volumes_arc();
        let mut claims = PodClaims {
            objects: objects.clone(),
            bound: Vec::new(),
            delayed: Vec::new(),
            by_node: Mutex::new(HashMap::new()),
        };
        let mut any = false;
        for v in &pod.volumes {
            let claim = match pod_claim(objects, pod, v) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                Err(s) => return (PreFilterResult::default(), s),
            };
            any = true;
            let claim =
                objects.claim(&claim.namespace, &claim.name).cloned().unwrap_or_else(|| Arc::new(claim.clone()));
            if let Some(pv) = &claim.volume_name {
                let volume = objects.volume(pv).cloned();
                claims.bound.push((claim, volume));
                continue;
            }
            let delayed = objects.class(&claim.class).is_some_and(|c| c.wait_for_first_consumer);
            if !delayed {
                return (PreFilterResult::default(), Status::unresolvable(ERR_REASON_UNBOUND_IMMEDIATE));
            }
            claims.delayed.push(claim);
        }
        if !any {
            return (PreFilterResult::default(), Status::skip());
        }
        state.write(claims);
        (PreFilterResult::default(), Status::success())
    }
}

/// Whether `volume` may hold `claim` on `node` (kube's FindMatchingVolume
/// checks, less the volume mode).
fn matches(claim: &Claim, volume: &Volume, node: &Node) -> bool {
    let free = match &volume.claim_ref {
        None => true,
        Some(r) => r.namespace == claim.namespace && r.name == claim.name && (r.uid.is_empty() || r.uid == claim.uid),
    };
    free && volume.available
        && volume.class == claim.class
        && volume.capacity >= claim.request
        && claim.access_modes.iter().all(|m| volume.access_modes.contains(m))
        && claim.selector.as_ref().is_none_or(|s| s.matches(&volume.labels))
        && volume.node_affinity.as_ref().is_none_or(|a| a.matches(node))
}

/// The bindings of the pod's delayed claims on `node`, or why none exist.
fn find_bindings(claims: &PodClaims, node: &Node) -> Result<PodVolumeBindings, &'static str> {
    let mut out = PodVolumeBindings { node: node.name.clone(), ..Default::default() };
    let mut to_provision: Vec<&Arc<Claim>> = Vec::new();
    for claim in &claims.delayed {
        if let Some(selected) = &claim.selected_node {
            if *selected != node.name {
                return Err(ERR_REASON_BIND_CONFLICT);
            }
            to_provision.push(claim);
            continue;
        }
        // A volume pre-bound to this claim first, then the smallest match.
        let chosen = claims
            .objects
            .volumes()
            .filter(|v| !out.static_bindings.iter().any(|(_, taken)| *taken == v.name))
            .filter(|v| matches(claim, v, node))
            .min_by(|a, b| {
                let pre = |v: &Volume| {
                    v.claim_ref
                        .as_ref()
                        .is_none_or(|r: &ClaimRef| r.name != claim.name || r.namespace != claim.namespace)
                };
                pre(a).cmp(&pre(b)).then(a.capacity.cmp(&b.capacity)).then(a.name.cmp(&b.name))
            });
        match chosen {
            Some(v) => out.static_bindings.push((claim.key(), v.name.clone())),
            None => to_provision.push(claim),
        }
    }
    for claim in to_provision {
        let Some(class) = claims.objects.class(&claim.class) else { return Err(ERR_REASON_BIND_CONFLICT) };
        let topology_ok =
            class.allowed_topologies.is_empty() || class.allowed_topologies.iter().any(|t| t.matches(node));
        if !class.provisions() || !topology_ok {
            return Err(ERR_REASON_BIND_CONFLICT);
        }
        out.provisionings.push(claim.key());
    }
    Ok(out)
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let Some(claims) = state.read::<PodClaims>() else {
            return Status::error("VolumeBinding: no PreFilter state");
        };
        let mut reasons: Vec<&'static str> = Vec::new();
        for (_, volume) in &claims.bound {
            match volume {
                None => {
                    if !reasons.contains(&ERR_REASON_PV_NOT_EXIST) {
                        reasons.push(ERR_REASON_PV_NOT_EXIST);
                    }
                }
                Some(v) if v.node_affinity.as_ref().is_some_and(|a| !a.matches(&node.node)) => {
                    if !reasons.contains(&ERR_REASON_NODE_CONFLICT) {
                        reasons.push(ERR_REASON_NODE_CONFLICT);
                    }
                }
                Some(_) => {}
            }
        }
        if !claims.delayed.is_empty() {
            match find_bindings(claims, &node.node) {
                Ok(b) if reasons.is_empty() => {
                    claims.by_node.lock().unwrap_or_else(|e| e.into_inner()).insert(node.name().to_string(), b);
                }
                Ok(_) => {}
                Err(r) => reasons.push(r),
            }
        }
        match reasons.as_slice() {
            [] => Status::success(),
            [first, rest @ ..] => {
                let mut s = Status::unschedulable(*first);
                s.reasons.extend(rest.iter().map(|r| (*r).into()));
                // A volume that cannot exist here cannot be made to by evictions.
                s.code = framework::framework::Code::UnschedulableAndUnresolvable;
                s
            }
        }
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, _pod: &Pod, node: &str) -> Status {
        let bindings = match state.read::<PodClaims>() {
            Some(c) if !c.delayed.is_empty() => c.by_node.lock().unwrap_or_else(|e| e.into_inner()).remove(node),
            _ => return Status::success(),
        };
        match bindings {
            Some(b) => {
                state.write(b);
                Status::success()
            }
            // Filter found bindings on every node it passed: a node without
            // them was not passed by this plugin.
            None => Status::error(format!("no volume bindings found for node {node}")),
        }
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &Pod, _node: &str) {
        // The engine forgets the assumed bindings with the pod.
        state.write(PodVolumeBindings::default());
    }
}

impl PreBindPlugin for VolumeBinding {
    fn pre_bind_pre_flight(&self, state: &CycleState, _pod: &Pod, _node: &str) -> Status {
        match state.read::<PodVolumeBindings>() {
            Some(b) if !b.is_empty() => Status::success(),
            _ => Status::skip(),
        }
    }

    fn pre_bind(&self, state: &mut CycleState, pod: &Pod, _node: &str, binder: &dyn Binder) -> Status {
        let Some(b) = state.read::<PodVolumeBindings>().filter(|b| !b.is_empty()) else {
            return Status::success();
        };
        match binder.bind_volumes(pod, b, self.timeout_seconds) {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::model::{NodeSelector, NodeSelectorTerm, Requirement, SelectorOp};
    use framework::testing::{node, pod};
    use framework::volumes::{AccessMode, PodVolume, StorageClass};

    fn claim(name: &str, class: &str, gib: i64) -> Claim {
        Claim {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            class: class.into(),
            volume_name: None,
            bound: false,
            access_modes: vec![AccessMode::ReadWriteOnce],
            request: gib << 30,
            selector: None,
            selected_node: None,
            terminating: false,
        }
    }

    fn on_host(host: &str) -> NodeSelector {
        NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![Requirement {
                    key: "kubernetes.io/hostname".into(),
                    op: SelectorOp::In,
                    values: vec![host.into()],
                }],
                match_fields: vec![],
            }],
        }
    }

    fn volume(name: &str, class: &str, gib: i64, host: Option<&str>) -> Volume {
        Volume {
            name: name.into(),
            class: class.into(),
            capacity: gib << 30,
            access_modes: vec![AccessMode::ReadWriteOnce],
            node_affinity: host.map(on_host),
            claim_ref: None,
            labels: Default::default(),
            csi: None,
            disk: None,
            available: true,
        }
    }

    fn class(name: &str, provisioner: &str, wait: bool) -> StorageClass {
        StorageClass {
            name: name.into(),
            provisioner: provisioner.into(),
            wait_for_first_consumer: wait,
            allowed_topologies: vec![],
        }
    }

    /// Filters `claims` of one pod over nodes n1, n2: the verdict per node,
    /// and what Reserve keeps for the first node that passed.
    fn run(
        claims: Vec<Claim>,
        volumes: Vec<Volume>,
        classes: Vec<StorageClass>,
    ) -> (Result<Vec<Status>, Status>, Option<PodVolumeBindings>) {
        let mut cache = framework::cache::Cache::new();
        for n in ["n1", "n2"] {
            cache.upsert_node(node(n).build());
        }
        let mut p = pod("p");
        for c in &claims {
            let name = c.name.clone();
            p = p.with(|p| p.volumes.push(PodVolume::Claim { claim: name, read_only: false }));
        }
        for c in claims {
            cache.upsert_claim(c);
        }
        for v in volumes {
            cache.upsert_volume(v);
        }
        for c in classes {
            cache.upsert_storage_class(c);
        }
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let plugin = VolumeBinding { timeout_seconds: 600 };
        let p = p.build();
        let mut state = CycleState::new();
        let (_, s) = plugin.pre_filter(&mut state, &p, &snap);
        if !s.is_success() {
            return (Err(s), None);
        }
        let verdicts: Vec<Status> = (0..2).map(|i| plugin.filter(&state, &p, &snap.view(i))).collect();
        let passed = (0..2).find(|i| verdicts[*i].is_success()).map(|i| snap.names()[i].clone());
        let kept = passed.and_then(|n| {
            plugin.reserve(&mut state, &p, &n);
            state.read::<PodVolumeBindings>().cloned()
        });
        (Ok(verdicts), kept)
    }

    fn reasons(r: &Result<Vec<Status>, Status>) -> Vec<String> {
        match r {
            Ok(v) => v.iter().map(|s| if s.is_success() { "ok".to_string() } else { s.message() }).collect(),
            Err(s) => vec![format!("prefilter: {}", s.message())],
        }
    }

    #[test]
    fn claims_find_volumes_or_provisioners_as_kube_does() {
        let wffc = || class("local", "kubernetes.io/no-provisioner", true);
        let dynamic = || class("fast", "ebs.csi.aws.com", true);
        let mut bound = claim("bound", "local", 1);
        bound.volume_name = Some("pv-n2".into());
        let mut missing_pv = claim("gone", "local", 1);
        missing_pv.volume_name = Some("pv-gone".into());
        let mut elsewhere = claim("selected", "fast", 1);
        elsewhere.selected_node = Some("n2".into());
        // (case, claims, volumes, classes, verdicts on n1 and n2, static bindings kept)
        type Case = (
            &'static str,
            Vec<Claim>,
            Vec<Volume>,
            Vec<StorageClass>,
            Vec<&'static str>,
            Vec<(&'static str, &'static str)>,
        );
        let cases: Vec<Case> = vec![
            (
                "a static volume with node affinity picks the node",
                vec![claim("data", "local", 5)],
                vec![
                    volume("pv-big", "local", 100, Some("n1")),
                    volume("pv-small", "local", 10, Some("n1")),
                    volume("pv-tiny", "local", 1, Some("n2")),
                ],
                vec![wffc()],
                vec!["ok", ERR_REASON_BIND_CONFLICT],
                vec![("default/data", "pv-small")],
            ),
            (
                "two claims never take one volume",
                vec![claim("a", "local", 5), claim("b", "local", 5)],
                vec![volume("pv1", "local", 10, Some("n1")), volume("pv2", "local", 10, Some("n2"))],
                vec![wffc()],
                vec![ERR_REASON_BIND_CONFLICT, ERR_REASON_BIND_CONFLICT],
                vec![],
            ),
            (
                "a bound claim's volume affinity",
                vec![bound.clone()],
                vec![volume("pv-n2", "local", 10, Some("n2"))],
                vec![wffc()],
                vec![ERR_REASON_NODE_CONFLICT, "ok"],
                vec![],
            ),
            (
                "a bound claim whose volume is gone",
                vec![missing_pv],
                vec![],
                vec![wffc()],
                vec![ERR_REASON_PV_NOT_EXIST, ERR_REASON_PV_NOT_EXIST],
                vec![],
            ),
            (
                "a provisioner makes room anywhere",
                vec![claim("new", "fast", 50)],
                vec![],
                vec![dynamic()],
                vec!["ok", "ok"],
                vec![],
            ),
            (
                "a claim already selected for another node",
                vec![elsewhere],
                vec![],
                vec![dynamic()],
                vec![ERR_REASON_BIND_CONFLICT, "ok"],
                vec![],
            ),
        ];
        for (name, claims, volumes, classes, want, want_static) in cases {
            let (verdicts, kept) = run(claims, volumes, classes);
            assert_eq!(reasons(&verdicts), want, "{name}");
            let got: Vec<(String, String)> = kept.map(|k| k.static_bindings).unwrap_or_default();
            let want_static: Vec<(String, String)> =
                want_static.iter().map(|(c, v)| (c.to_string(), v.to_string())).collect();
            assert_eq!(got, want_static, "{name}");
        }
    }

    #[test]
    fn prefilter_errors_are_kubes() {
        let immediate = class("std", "ebs.csi.aws.com", false);
        let mut deleting = claim("old", "std", 1);
        deleting.terminating = true;
        let cases = [
            (vec![claim("c", "std", 1)], "prefilter: pod has unbound immediate PersistentVolumeClaims"),
            (vec![deleting], "prefilter: persistentvolumeclaim \"old\" is being deleted"),
        ];
        for (claims, want) in cases {
            let (verdicts, _) = run(claims, vec![], vec![immediate.clone()]);
            assert_eq!(reasons(&verdicts), [want]);
        }
        // A claim the pod names but nobody created.
        let mut cache = framework::cache::Cache::new();
        cache.upsert_node(node("n1").build());
        let mut snap = Snapshot::new();
        cache.update_snapshot(&mut snap);
        let p = pod("p").with(|p| p.volumes.push(PodVolume::Claim { claim: "nope".into(), read_only: false })).build();
        let (_, s) = VolumeBinding { timeout_seconds: 1 }.pre_filter(&mut CycleState::new(), &p, &snap);
        assert_eq!(s.message(), "persistentvolumeclaim \"nope\" not found");
        let (_, s) =
            VolumeBinding { timeout_seconds: 1 }.pre_filter(&mut CycleState::new(), &pod("plain").build(), &snap);
        assert!(s.is_skip(), "a pod without claims skips the plugin");
    }

    #[test]
    fn args_are_checked() {
        assert_eq!(
            new(Some(&serde_json::json!({"bindTimeoutSeconds": -1}))).err().map(|e| e.path),
            Some("bindTimeoutSeconds".into())
        );
        assert!(new(None).is_ok());
    }
}
