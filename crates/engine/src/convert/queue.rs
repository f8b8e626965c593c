//! Queues (`gpu-scheduler.io/v1alpha1` `Queue`, our CRD, cluster-scoped):
//! the object's one definition, from which kube-derive makes the kube-rs
//! resource the live watch uses and the CRD's YAML in deploy/crds
//! (crates/engine/tests/crds.rs checks it), and its conversion to [`Queue`].

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ConvertError, crd, int_or_string, invalid, non_empty, required};
use crate::quantity::Quantity;
use crate::queues::Queue;
use gpu_scheduler_model::gpu::GPU_RESOURCE;

// What a Queue asks for (no doc comment: the CRD has no description for
// `spec`). Quantities are strings or plain numbers (int-or-string).
// Unknown fields are accepted here, so that the live watch survives a field
// a newer CRD adds; `simulate` rejects them by a round trip
// (crates/sim/src/manifests.rs), as `kubectl apply`'s strict decoding does.
// Each `printcolumn(...)` names its own `type_`: not duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "gpu-scheduler.io",
    version = "v1alpha1",
    kind = "Queue",
    root = "QueueObject",
    status = "QueueStatus",
    derive = "Default",
    derive = "PartialEq",
    crates(kube_core = "::kube_core", k8s_openapi = "::k8s_openapi", schemars = "::schemars"),
    // Metadata and spec default when absent: see the `crd` module.
    attr = "cfg_attr(all(), serde(default), schemars(transform = crd::root))",
    doc = "A queue with quotas. A pod labelled gpu-scheduler.io/queue (or in a namespace so labelled) is scheduled only when its requests fit the queue's quota, or can be borrowed from the unused quota of the queue's siblings (the queues with the same parent), and fit every ancestor's quota.",
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parent"),
    printcolumn(
        name = "GPUs",
        type_ = "string",
        json_path = ".spec.quota.nvidia\\.com/gpu",
        description = "The nominal GPU quota."
    ),
    printcolumn(name = "Weight", type_ = "number", json_path = ".spec.weight"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(default, rename_all = "camelCase")]
pub struct QueueSpec {
    /// The parent queue; siblings lend each other unused quota, and the parent's quota caps their sum.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(max = 253))]
    pub parent: Option<String>,
    /// Nominal quota by resource (cpu, memory, nvidia.com/gpu, any extended resource) and by GPU model (nvidia.com/gpu:a100). A resource not named is not limited by this queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crd::quantities")]
    pub quota: Option<BTreeMap<String, serde_json::Value>>,
    /// How much beyond its quota the queue may borrow, by resource; absent, no limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crd::quantities")]
    pub borrowing_limit: Option<BTreeMap<String, serde_json::Value>>,
    /// How much of its unused quota siblings may borrow, by resource; absent, all of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crd::quantities")]
    pub lending_limit: Option<BTreeMap<String, serde_json::Value>>,
    /// Fair-share weight among siblings (default 1), from 0.000001 to 1000000.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "queue_weight")]
    pub weight: Option<serde_json::Value>,
    /// Whether the queue may take back lent quota by preempting borrowers (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub reclaim: Option<bool>,
}

/// Written by the scheduler; any fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QueueStatus(pub serde_json::Map<String, serde_json::Value>);

impl JsonSchema for QueueStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "QueueStatus".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Written by the scheduler.",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}

/// The schema of `spec.weight`: a number, read as text or number by
/// [`queue_from_object`]; the API server takes numbers only.
fn queue_weight(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "number",
        "exclusiveMinimum": true,
        "minimum": 0,
        "maximum": 1_000_000,
    })
}

/// A resource list of a Queue in the engine's units: GPUs (also per model,
/// `nvidia.com/gpu:MODEL`) and cpu in thousandths, others whole.
fn amounts(
    list: Option<&BTreeMap<String, serde_json::Value>>,
    field: &str,
) -> Result<BTreeMap<String, i64>, ConvertError> {
    let mut out = BTreeMap::new();
    for (key, v) in list.into_iter().flatten() {
        let path = format!("{field}[{key}]");
        let (base, model) = match key.split_once(':') {
            Some((b, m)) => (b, Some(m)),
            None => (key.as_str(), None),
        };
        if base.is_empty() || base.contains(char::is_whitespace) {
            return Err(invalid(path, format!("{key:?}"), "must be a resource name"));
        }
        if let Some(m) = model
            && (base != GPU_RESOURCE || m.is_empty() || m.contains(char::is_whitespace))
        {
            return Err(invalid(path, format!("{key:?}"), "a model is named only as nvidia.com/gpu:MODEL"));
        }
        let text = int_or_string(v, path.clone())?;
        let q = Quantity::parse(&text).map_err(|e| invalid(path.clone(), format!("{text:?}"), e.reason))?;
        if q.signum() < 0 {
            return Err(invalid(path, format!("{text:?}"), "must be greater than or equal to 0"));
        }
        let amount = if base == GPU_RESOURCE || base == "cpu" { q.milli_value() } else { q.value() };
        out.insert(
            match model {
                Some(m) => crate::queues::model_key(&m.to_ascii_lowercase()),
                None => key.clone(),
            },
            amount,
        );
    }
    Ok(out)
}

/// A queue's fair-share weight.
pub const QUEUE_WEIGHT: crate::bounds::Interval = crate::bounds::Interval::closed(1e-6, 1e6);

/// Converts a Queue; errors name the field.
pub fn queue_from_object(obj: &QueueObject) -> Result<Queue, ConvertError> {
    let name = non_empty(obj.metadata.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let spec = &obj.spec;
    let parent = match spec.parent.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(p) if p == name => {
            return Err(invalid("spec.parent", format!("{p:?}"), "a queue cannot be its own parent"));
        }
        Some(p) => Some(p.to_string()),
    };
    let weight = match &spec.weight {
        None => 1.0,
        Some(v) => {
            let w = match v {
                serde_json::Value::Number(n) => n.as_f64(),
                serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            // Usage is divided by it: a weight near 0 or past any sibling's would make shares infinite.
            match w.map(|w| QUEUE_WEIGHT.check(w)) {
                Some(Ok(w)) => w,
                Some(Err(m)) => return Err(invalid("spec.weight", v, &m)),
                None => return Err(invalid("spec.weight", v, &format!("must be a number in {QUEUE_WEIGHT}"))),
            }
        }
    };
    Ok(Queue {
        name,
        parent,
        quota: amounts(spec.quota.as_ref(), "spec.quota")?,
        borrowing_limit: amounts(spec.borrowing_limit.as_ref(), "spec.borrowingLimit")?,
        lending_limit: amounts(spec.lending_limit.as_ref(), "spec.lendingLimit")?,
        weight,
        reclaim: spec.reclaim.unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_core::Resource;
    use serde_json::json;

    fn convert(yaml: &str) -> Result<Queue, ConvertError> {
        let obj: QueueObject = serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        queue_from_object(&obj)
    }

    #[test]
    fn queues_convert() {
        let q = convert(
            "metadata: {name: team-a}\nspec:\n  parent: ml\n  quota: {nvidia.com/gpu: 8, \"nvidia.com/gpu:A100\": \"4\", cpu: \"64\", memory: 512Gi}\n  borrowingLimit: {nvidia.com/gpu: 0.5}\n  lendingLimit: {nvidia.com/gpu: 2}\n  weight: 2\n  reclaim: false\n",
        )
        .unwrap();
        assert_eq!((q.name.as_str(), q.parent.as_deref(), q.weight, q.reclaim), ("team-a", Some("ml"), 2.0, false));
        let quota: Vec<(&str, i64)> = q.quota.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            quota,
            [("cpu", 64_000), ("memory", 512 << 30), ("nvidia.com/gpu", 8000), ("nvidia.com/gpu:a100", 4000)]
        );
        assert_eq!(q.borrowing_limit.get("nvidia.com/gpu"), Some(&500));
        assert_eq!(q.lending_limit.get("nvidia.com/gpu"), Some(&2000));
        let plain = convert("metadata: {name: root}\n").unwrap();
        assert_eq!((plain.parent, plain.weight, plain.reclaim, plain.quota.len()), (None, 1.0, true, 0));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("spec: {}\n", "metadata.name", "Required value"),
            (
                "metadata: {name: a}\nspec: {parent: a}\n",
                "spec.parent",
                "Invalid value: \"a\": a queue cannot be its own parent",
            ),
            (
                "metadata: {name: a}\nspec: {quota: {cpu: lots}}\n",
                "spec.quota[cpu]",
                "Invalid value: \"lots\": unable to parse numeric part of quantity",
            ),
            (
                "metadata: {name: a}\nspec: {quota: {nvidia.com/gpu: \"-1\"}}\n",
                "spec.quota[nvidia.com/gpu]",
                "Invalid value: \"-1\": must be greater than or equal to 0",
            ),
            (
                "metadata: {name: a}\nspec: {lendingLimit: {\"cpu:fast\": 1}}\n",
                "spec.lendingLimit[cpu:fast]",
                "Invalid value: \"cpu:fast\": a model is named only as nvidia.com/gpu:MODEL",
            ),
            (
                "metadata: {name: a}\nspec: {weight: 0}\n",
                "spec.weight",
                "Invalid value: 0: must be in [0.000001, 1000000], got 0",
            ),
            (
                "metadata: {name: a}\nspec: {quota: {nvidia.com/gpu: [1]}}\n",
                "spec.quota[nvidia.com/gpu]",
                "Invalid value: [1]: must be a quantity",
            ),
        ];
        for (yaml, path, message) in cases {
            let err = convert(yaml).expect_err(yaml);
            assert_eq!((err.path.as_str(), err.message.as_str()), (path, message), "{yaml}");
        }
    }

    #[test]
    fn live_queues_convert_leniently() {
        let v = json!({
            "apiVersion": "gpu-scheduler.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "team-a", "uid": "u1"},
            "spec": {"parent": "root", "quota": {"nvidia.com/gpu": 8}, "weight": 2, "futureField": true},
            "status": {"admitted": 3}
        });
        let r: QueueObject = serde_json::from_value(v).unwrap_or_default();
        let q = queue_from_object(&r).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (q.name.as_str(), q.parent.as_deref(), q.quota.get("nvidia.com/gpu"), q.weight),
            ("team-a", Some("root"), Some(&8000), 2.0)
        );
        assert_eq!(QueueObject::url_path(&(), None), "/apis/gpu-scheduler.io/v1alpha1/queues");
        assert_eq!(crate::queues::API_VERSION, QueueObject::api_version(&()));
        assert_eq!(crate::queues::KIND, QueueObject::kind(&()));
    }
}
