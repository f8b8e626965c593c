//! Queues (`gpu-scheduler.io/v1alpha1` `Queue`, our CRD, cluster-scoped):
//! the object as the API serves it, and its conversion to [`Queue`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use super::{ConvertError, int_or_string, invalid, non_empty, required};
use crate::quantity::Quantity;
use crate::queues::Queue;
use gpu_scheduler_model::gpu::GPU_RESOURCE;

/// A Queue object. Unknown fields are errors, as `kubectl apply`'s strict
/// decoding makes them; the status is the scheduler's to write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueObject {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: QueueSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// Quantities are strings or plain numbers (the CRD's int-or-string).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QueueSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lending_limit: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<bool>,
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
}
