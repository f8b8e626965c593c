//! Reading Kubernetes manifests: multi-document YAML of Nodes, Pods,
//! Namespaces, PriorityClasses, workloads, PodDisruptionBudgets,
//! PodGroups, Queues, and the volume and DRA kinds; other kinds are
//! counted and ignored. Decoding is strict, as
//! `kubectl apply` is: a field the API does not know is an error, and every
//! error names the file, the document's index and the field. k8s-openapi's
//! types and our CRDs' (which the live watch shares, so they are lenient)
//! ignore unknown fields: a round trip finds them ([`decode`]).

use std::fmt;

use engine::convert::{PodGroupObject, QueueObject};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use thiserror::Error;

/// Where an object came from: file and 0-based document index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub file: String,
    pub index: usize,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.index)
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ManifestError {
    #[error("{file}: {message}")]
    Read { file: String, message: String },
    #[error("{at}: {message}")]
    Yaml { at: Source, message: String },
    /// A field is wrong; `path` is inside the object (e.g. `spec.replicas`).
    #[error("{at} ({object}): {path}: {message}")]
    Field { at: Source, object: String, path: String, message: String },
}

/// One decoded object.
#[derive(Debug, Clone)]
pub enum Object {
    Node(Box<Node>),
    Pod(Box<Pod>),
    Namespace(Box<Namespace>),
    PriorityClass(Box<PriorityClass>),
    Deployment(Box<Deployment>),
    ReplicaSet(Box<ReplicaSet>),
    StatefulSet(Box<StatefulSet>),
    Job(Box<Job>),
    PodGroup(Box<PodGroupObject>),
    Queue(Box<QueueObject>),
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    PersistentVolumeClaim(Box<PersistentVolumeClaim>),
    PersistentVolume(Box<PersistentVolume>),
    StorageClass(Box<StorageClass>),
    CsiNode(Box<CSINode>),
    ResourceSlice(Box<ResourceSlice>),
    DeviceClass(Box<DeviceClass>),
    ResourceClaim(Box<ResourceClaim>),
    ResourceClaimTemplate(Box<ResourceClaimTemplate>),
    /// Only its selector matters (default spreading).
    Service(Box<Service>),
}

/// Everything read, in input order, with where each came from; `ignored`
/// counts objects of kinds that do not affect scheduling (Services, ...).
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    pub objects: Vec<(Source, Object)>,
    pub ignored: Vec<(Source, String)>,
}

impl Manifests {
    /// Reads one file's documents and appends them.
    pub fn add_file(&mut self, file: &str) -> Result<(), ManifestError> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| ManifestError::Read { file: file.to_string(), message: e.to_string() })?;
        self.add_str(file, &text)
    }

    /// Parses YAML text (named `file` in errors) and appends its objects.
    pub fn add_str(&mut self, file: &str, text: &str) -> Result<(), ManifestError> {
        for (index, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let source = Source { file: file.to_string(), index };
            let value = serde_yaml_ng::Value::deserialize(doc)
                .map_err(|e| ManifestError::Yaml { at: source.clone(), message: e.to_string() })?;
            if value.is_null() {
                continue; // an empty document, e.g. after a trailing `---`
            }
            let json: serde_json::Value = serde_json::to_value(&value)
                .map_err(|e| ManifestError::Yaml { at: source.clone(), message: e.to_string() })?;
            self.add_value(source, json)?;
        }
        Ok(())
    }

    fn add_value(&mut self, source: Source, json: serde_json::Value) -> Result<(), ManifestError> {
        let field = |path: &str, message: String, object: &str| ManifestError::Field {
            at: source.clone(),
            object: object.to_string(),
            path: path.to_string(),
            message,
        };
        let Some(obj) = json.as_object() else {
            return Err(field("(root)", "expected a Kubernetes object (a mapping)".into(), "?"));
        };
        let api_version = obj.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default();
        let kind = obj.get("kind").and_then(|v| v.as_str()).unwrap_or_default();
        let name = obj.get("metadata").and_then(|m| m.get("name")).and_then(|n| n.as_str()).unwrap_or("<unnamed>");
        let label = format!("{} {name}", if kind.is_empty() { "?" } else { kind });
        if kind.is_empty() {
            return Err(field("kind", "missing".into(), &label));
        }
        if api_version.is_empty() {
            return Err(field("apiVersion", "missing".into(), &label));
        }
        let object = match (api_version, kind) {
            ("v1", "Node") => Object::Node(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?)),
            ("v1", "Pod") => Object::Pod(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?)),
            ("v1", "Namespace") => Object::Namespace(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?)),
            ("scheduling.k8s.io/v1", "PriorityClass") => {
                Object::PriorityClass(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("apps/v1", "Deployment") => {
                Object::Deployment(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("apps/v1", "ReplicaSet") => {
                Object::ReplicaSet(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("apps/v1", "StatefulSet") => {
                Object::StatefulSet(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("batch/v1", "Job") => Object::Job(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?)),
            (engine::gang::API_VERSION, engine::gang::KIND) => {
                Object::PodGroup(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            (engine::queues::API_VERSION, engine::queues::KIND) => {
                Object::Queue(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("policy/v1", "PodDisruptionBudget") => {
                Object::PodDisruptionBudget(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("v1", "PersistentVolumeClaim") => {
                Object::PersistentVolumeClaim(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("v1", "PersistentVolume") => {
                Object::PersistentVolume(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("storage.k8s.io/v1", "StorageClass") => {
                Object::StorageClass(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("v1", "Service") => Object::Service(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?)),
            ("storage.k8s.io/v1", "CSINode") => {
                Object::CsiNode(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("resource.k8s.io/v1", "ResourceSlice") => {
                Object::ResourceSlice(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("resource.k8s.io/v1", "DeviceClass") => {
                Object::DeviceClass(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("resource.k8s.io/v1", "ResourceClaim") => {
                Object::ResourceClaim(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            ("resource.k8s.io/v1", "ResourceClaimTemplate") => {
                Object::ResourceClaimTemplate(Box::new(decode(&json).map_err(|(p, m)| field(&p, m, &label))?))
            }
            (
                _,
                "Node"
                | "Pod"
                | "Namespace"
                | "PriorityClass"
                | "Deployment"
                | "ReplicaSet"
                | "StatefulSet"
                | "Job"
                | "PodDisruptionBudget"
                | "ResourceSlice"
                | "DeviceClass"
                | "ResourceClaim"
                | "ResourceClaimTemplate",
            ) => {
                return Err(field(
                    "apiVersion",
                    format!("{api_version:?} is not a supported version of {kind}"),
                    &label,
                ));
            }
            _ => {
                self.ignored.push((source, label));
                return Ok(());
            }
        };
        self.objects.push((source, object));
        Ok(())
    }
}

/// Decodes `json` into `T`, strictly: type errors and fields `T` does not
/// have are reported with their path.
fn decode<T: DeserializeOwned + serde::Serialize>(json: &serde_json::Value) -> Result<T, (String, String)> {
    let typed: T = serde_path_to_error::deserialize(json).map_err(|e| {
        let path = e.path().to_string();
        (path, e.into_inner().to_string())
    })?;
    // k8s-openapi ignores unknown fields; find them by what did not survive a round trip.
    let back = serde_json::to_value(&typed).map_err(|e| ("(root)".to_string(), e.to_string()))?;
    if let Some(path) = unknown_field(json, &back, "") {
        return Err((path, "unknown field (not part of the Kubernetes API for this kind)".into()));
    }
    Ok(typed)
}

/// The path of the first key present (and not null) in `input` but missing from `decoded`.
fn unknown_field(input: &serde_json::Value, decoded: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match (input, decoded) {
        (Value::Object(i), Value::Object(d)) => i.iter().find_map(|(k, v)| match d.get(k) {
            Some(dv) => unknown_field(v, dv, &join(k)),
            None if v.is_null() || is_empty(v) => None,
            None => Some(join(k)),
        }),
        (Value::Array(i), Value::Array(d)) => {
            i.iter().zip(d).enumerate().find_map(|(n, (iv, dv))| unknown_field(iv, dv, &format!("{path}[{n}]")))
        }
        _ => None,
    }
}

/// Empty maps and lists may be dropped by serialisation without loss.
fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => m.values().all(|x| x.is_null() || is_empty(x)),
        serde_json::Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Manifests, ManifestError> {
        let mut m = Manifests::default();
        m.add_str("test.yaml", text)?;
        Ok(m)
    }

    #[test]
    fn reads_kinds_and_skips_empty_and_foreign_documents() {
        let m = load(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: nginx}]}\n",
        )
        .unwrap();
        assert_eq!(m.objects.len(), 2);
        assert_eq!(m.ignored.len(), 1);
        assert_eq!(m.objects[1].0.index, 3);
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "type error",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: three\n  selector: {}\n  template: {}\n",
                "test.yaml: document 0 (Deployment web): spec.replicas:",
            ),
            (
                "unknown field",
                "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x, resources: {requets: {cpu: 1}}}]\n",
                "test.yaml: document 0 (Pod p): spec.containers[0].resources.requets:",
            ),
            (
                "unknown PodGroup field",
                "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMembers: 2}\n",
                "test.yaml: document 0 (PodGroup g): spec.minMembers: unknown field",
            ),
            (
                "unknown Queue field",
                "apiVersion: gpu-scheduler.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec: {quotas: {cpu: 1}}\n",
                "test.yaml: document 0 (Queue q): spec.quotas: unknown field",
            ),
            (
                "PodGroup int32 as a type error",
                "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: two}\n",
                "test.yaml: document 0 (PodGroup g): spec.minMember:",
            ),
            ("missing kind", "apiVersion: v1\nmetadata: {name: p}\n", "test.yaml: document 0 (? p)"),
            ("bad version", "apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\n", "apiVersion"),
            ("not yaml", "a: [1, 2\n", "test.yaml: document 0"),
            ("scalar document", "---\n42\n", "(root)"),
        ];
        for (name, text, want) in cases {
            let err = load(text).expect_err(name).to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
    }
}
