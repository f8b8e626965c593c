//! Builds the engine's [`crate::model::Pod`] and [`crate::model::Node`] from k8s-openapi
//! objects, once, when they enter the cache: requests are aggregated,
//! selectors compiled and validated, so the hot path never re-parses.
//!
//! The rules follow kube-scheduler v1.36 (`k8s.io/component-helpers/resource`
//! `PodRequests`, the scheduler's `PodInfo.CalculateResource`, and the
//! selector parsing of `component-helpers/scheduling/corev1/nodeaffinity`).
//! Manifests given to the simulator have not been through the API server,
//! so the API defaults the scheduler relies on are applied here too:
//! container requests default to limits, pod-level requests to pod-level
//! limits, `hostPort` to `containerPort` under `hostNetwork`, allocatable to
//! capacity, and `matchLabelKeys` merged into selectors. Objects that did
//! come from the API server are unaffected by these (already defaulted).
//! Invalid fields are errors naming the field path, worded like the API's
//! field errors ([`ConvertError`], from the model crate's `field`).
//!
//! One module per kind or concern: `pod` and `node`, `resources` (effective
//! requests, and the non-zero defaults scoring uses), `selectors`,
//! `scheduling` (taints, tolerations, spread constraints), `pdb`, `volumes`,
//! `dra`, and our CRDs, which k8s-openapi lacks: `pod_group` and `queue`,
//! each the kind's one definition (kube-derive's `CustomResource`: the
//! kube-rs resource the live watch reads and the CRD's schema), with
//! schema pieces in `crd`.

mod crd;
mod dra;
mod node;
mod pdb;
mod pod;
mod pod_group;
mod queue;
mod resources;
mod scheduling;
mod selectors;
mod volumes;

pub use dra::{
    allocation_to_k8s, claim_template_from_k8s, device_class_from_k8s, resource_claim_from_k8s, slice_from_k8s,
};
pub use node::node_from_k8s;
pub use pdb::pdb_from_k8s;
pub use pod::pod_from_k8s;
pub use pod_group::{PodGroupObject, PodGroupSpec, PodGroupStatus, pod_group_from_object};
pub use queue::{QUEUE_WEIGHT, QueueObject, QueueSpec, QueueStatus, queue_from_object};
pub use selectors::label_selector;
pub use volumes::{claim_from_k8s, class_from_k8s, csi_node_from_k8s, volume_from_k8s};

/// `metadata.namespace` when a manifest leaves it out.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The label the API server sets on every namespace: its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// `spec.schedulerName` when a manifest leaves it out.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
/// Priorities of the two built-in priority classes, used when a pod names
/// the class but `spec.priority` was not resolved by the API server.
pub const SYSTEM_NODE_CRITICAL: &str = "system-node-critical";
pub const SYSTEM_NODE_CRITICAL_PRIORITY: i32 = 2_000_001_000;
pub const SYSTEM_CLUSTER_CRITICAL: &str = "system-cluster-critical";
pub const SYSTEM_CLUSTER_CRITICAL_PRIORITY: i32 = 2_000_000_000;

pub use gpu_scheduler_model::field::ConvertError;
pub(crate) use gpu_scheduler_model::field::{invalid, required, unsupported};

/// A list of values as the API renders it in errors (JSON; `null` when unset).
pub(super) fn json_values(values: Option<&Vec<String>>) -> String {
    serde_json::to_string(&values).unwrap_or_else(|_| "null".to_string())
}

/// A CRD's int-or-string quantity as text; anything else is an error at
/// `path`.
pub(super) fn int_or_string(v: &serde_json::Value, path: impl Into<String>) -> Result<String, ConvertError> {
    match v {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(invalid(path, other, "must be a quantity")),
    }
}

pub(super) fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

/// Helpers shared by the conversion tests.
#[cfg(test)]
mod testing {
    use k8s_openapi::api::core::v1 as corev1;

    use crate::model::{self, Requirement, SelectorOp};

    pub const MI: i64 = 1 << 20;
    pub const GI: i64 = 1 << 30;

    pub fn pod(yaml: &str) -> corev1::Pod {
        serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("bad test yaml: {e}\n{yaml}"))
    }

    pub fn convert(yaml: &str) -> model::Pod {
        super::pod_from_k8s(&pod(yaml)).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
    }

    pub fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement { key: key.into(), op, values: values.iter().map(|s| s.to_string()).collect() }
    }

    /// kind is `app`, `init` or `sidecar` and "" leaves the request unset.
    pub fn containers_yaml(containers: &[(&str, &str, &str)]) -> String {
        let mut app = String::new();
        let mut init = String::new();
        for (i, (kind, cpu, mem)) in containers.iter().enumerate() {
            let mut c = format!("  - name: c{i}\n");
            if *kind == "sidecar" {
                c.push_str("    restartPolicy: Always\n");
            }
            if !cpu.is_empty() || !mem.is_empty() {
                c.push_str("    resources:\n      requests:\n");
                if !cpu.is_empty() {
                    c.push_str(&format!("        cpu: \"{cpu}\"\n"));
                }
                if !mem.is_empty() {
                    c.push_str(&format!("        memory: \"{mem}\"\n"));
                }
            }
            if *kind == "app" { app.push_str(&c) } else { init.push_str(&c) }
        }
        let mut y = String::from("metadata: {name: p}\nspec:\n");
        if !init.is_empty() {
            y.push_str(&format!("  initContainers:\n{init}"));
        }
        if app.is_empty() {
            y.push_str("  containers: []\n");
        } else {
            y.push_str(&format!("  containers:\n{app}"));
        }
        y
    }
}
