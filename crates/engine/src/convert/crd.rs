//! Schema pieces shared by our CRDs' derived types ([`super::QueueSpec`],
//! [`super::PodGroupSpec`]), for what schemars cannot infer from the Rust
//! type: a quantity is a `serde_json::Value` here (conversion reads numbers
//! and strings, and names the field of anything else) but int-or-string in
//! the CRD.
//!
//! Both roots carry `#[kube(attr = "cfg_attr(all(), serde(default),
//! schemars(transform = crd::root))")]`: kube-derive's root requires
//! `metadata` and `spec`, in decoding and in the schema, but neither CRD
//! requires a spec (a Queue with none is valid and must not stop the
//! watch), and a manifest without metadata is reported by conversion as
//! `metadata.name: Required value`. kube-derive refuses a plain `serde` or
//! `schemars` attribute on the root; a `cfg_attr` is expanded to the same
//! attribute before the derives see it. [`root`] then takes out of the
//! schema what that default and the root's `Option` status add.

use schemars::{Schema, SchemaGenerator, json_schema};

/// The root's schema as the CRD had it before kube-derive: `apiVersion`,
/// `kind` and `metadata` named, as `kubectl explain` and controller-gen's
/// CRDs (scheduler-plugins') show them; no `default` for `spec` (the API
/// server would write `spec: {}` into objects created without one); a
/// status not `nullable` (the API server prunes a null status rather than
/// storing it).
pub(super) fn root(schema: &mut Schema) {
    if let Some(properties) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        properties.insert("apiVersion".into(), serde_json::json!({"type": "string"}));
        properties.insert("kind".into(), serde_json::json!({"type": "string"}));
        properties.insert("metadata".into(), serde_json::json!({"type": "object"}));
    }
    if let Some(spec) = schema.get_mut("properties").and_then(|p| p.get_mut("spec")).and_then(|s| s.as_object_mut()) {
        spec.remove("default");
    }
    if let Some(status) = schema.get_mut("properties").and_then(|p| p.get_mut("status")).and_then(|s| s.as_object_mut())
        && status.get("type") == Some(&serde_json::json!(["object", "null"]))
    {
        status.insert("type".into(), "object".into());
    }
}

/// A Kubernetes quantity: `8`, `"8"`, `500m`, `512Gi`, `1e3`. The API
/// server checks int-or-string as integer or string; kube-core's schema
/// rewriter keeps no types inside `anyOf`, so none is given.
pub(super) fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"x-kubernetes-int-or-string": true})
}
/// A resource list: quantities by resource name.
pub(super) fn quantities(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "object", "additionalProperties": quantity(generator)})
}

/// The resource's pattern of a quantity (k8s.io/apimachinery
/// `resource.Quantity`'s OpenAPI definition), as scheduler-plugins' CRD
/// checks `minResources`.
pub(super) const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A resource list whose quantities the API server checks by pattern.
pub(super) fn checked_quantities(generator: &mut SchemaGenerator) -> Schema {
    let mut value = quantity(generator);
    value.insert("pattern".into(), QUANTITY_PATTERN.into());
    json_schema!({"type": "object", "additionalProperties": value})
}
