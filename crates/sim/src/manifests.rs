//! Reading Kubernetes manifests: multi-document YAML of Pods, the objects
//! a simulation makes pods from (PriorityClasses, Deployments,
//! ReplicaSets, StatefulSets, Jobs, ResourceClaimTemplates), and every kind
//! the engine registers (`engine::scheduler::visit_kinds`: Nodes,
//! Namespaces, PodGroups, Queues, the volume and DRA kinds, ...); other
//! kinds are counted, named in the simulation's warnings and ignored. Decoding is strict, as `kubectl apply`
//! is: a field the API does not know is an error, and every error names the
//! file, the document's index and the field. k8s-openapi's types and our
//! CRDs' (which the live watch shares, so they are lenient) ignore unknown
//! fields: a round trip finds them ([`decode`]).

use std::fmt;

use std::sync::Arc;

use engine::convert::ConvertError;
use engine::scheduler::{Kind, KindVisitor, ObjectChange, ReadOptions, key, visit_kinds};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube_core::Resource;
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
    Pod(Box<Pod>),
    PriorityClass(Box<PriorityClass>),
    Deployment(Box<Deployment>),
    ReplicaSet(Box<ReplicaSet>),
    StatefulSet(Box<StatefulSet>),
    Job(Box<Job>),
    ResourceClaimTemplate(Box<ResourceClaimTemplate>),
    /// An object of a kind the engine registers.
    Cluster(ClusterObject),
}

/// An object of a kind the engine registers, decoded into its API type.
#[derive(Debug, Clone)]
pub struct ClusterObject(Arc<dyn Registered>);

impl ClusterObject {
    /// An object of the registered kind `K`, as a manifest gives it.
    pub fn new<K: Kind>(obj: K::Object) -> ClusterObject {
        ClusterObject(Arc::new(Typed::<K>(obj)))
    }

    /// Its kind (`Node`, `PodGroup`, ...).
    pub fn kind(&self) -> String {
        self.0.kind()
    }

    /// Its name, or `NAMESPACE/NAME`.
    pub fn key(&self) -> String {
        self.0.key()
    }

    /// The change it makes.
    pub fn change(&self, read: ReadOptions) -> Result<ObjectChange, ConvertError> {
        self.0.change(read)
    }
}

trait Registered: fmt::Debug + Send + Sync {
    fn kind(&self) -> String;
    fn key(&self) -> String;
    fn change(&self, read: ReadOptions) -> Result<ObjectChange, ConvertError>;
}

struct Typed<K: Kind>(K::Object);

impl<K: Kind> fmt::Debug for Typed<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<K: Kind> Registered for Typed<K> {
    fn kind(&self) -> String {
        K::Object::kind(&()).into_owned()
    }

    fn key(&self) -> String {
        key::<K>(&self.0)
    }

    fn change(&self, read: ReadOptions) -> Result<ObjectChange, ConvertError> {
        K::change(&self.0, read)
    }
}

/// Finds the registered kind of a document and decodes it.
struct Decoder<'a> {
    api_version: &'a str,
    kind: &'a str,
    json: &'a serde_json::Value,
    /// Some kind of that name is registered (at some version).
    kind_known: bool,
    decoded: Option<Result<ClusterObject, (String, String)>>,
}

impl KindVisitor for Decoder<'_> {
    fn visit<K: Kind>(&mut self) {
        if self.decoded.is_some() || K::Object::kind(&()) != self.kind {
            return;
        }
        self.kind_known = true;
        if K::Object::api_version(&()) == self.api_version {
            let typed = decode::<K::Object>(self.json).map(ClusterObject::new::<K>);
            self.decoded = Some(typed);
        }
    }
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
        let decoded = |r: Result<Object, (String, String)>| r.map_err(|(p, m)| field(&p, m, &label));
        let object = match (api_version, kind) {
            ("v1", "Pod") => decoded(decode(&json).map(|p| Object::Pod(Box::new(p))))?,
            ("scheduling.k8s.io/v1", "PriorityClass") => {
                decoded(decode(&json).map(|p| Object::PriorityClass(Box::new(p))))?
            }
            ("apps/v1", "Deployment") => decoded(decode(&json).map(|d| Object::Deployment(Box::new(d))))?,
            ("apps/v1", "ReplicaSet") => decoded(decode(&json).map(|r| Object::ReplicaSet(Box::new(r))))?,
            ("apps/v1", "StatefulSet") => decoded(decode(&json).map(|s| Object::StatefulSet(Box::new(s))))?,
            ("batch/v1", "Job") => decoded(decode(&json).map(|j| Object::Job(Box::new(j))))?,
            ("resource.k8s.io/v1", "ResourceClaimTemplate") => {
                decoded(decode(&json).map(|t| Object::ResourceClaimTemplate(Box::new(t))))?
            }
            (
                _,
                "Pod" | "PriorityClass" | "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" | "ResourceClaimTemplate",
            ) => {
                return Err(field(
                    "apiVersion",
                    format!("{api_version:?} is not a supported version of {kind}"),
                    &label,
                ));
            }
            _ => {
                let mut decoder = Decoder { api_version, kind, json: &json, kind_known: false, decoded: None };
                visit_kinds(&mut decoder);
                match decoder.decoded {
                    Some(r) => Object::Cluster(r.map_err(|(p, m)| field(&p, m, &label))?),
                    None if decoder.kind_known => {
                        return Err(field(
                            "apiVersion",
                            format!("{api_version:?} is not a supported version of {kind}"),
                            &label,
                        ));
                    }
                    None => {
                        self.ignored.push((source, label));
                        return Ok(());
                    }
                }
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

    #[test]
    fn every_registered_kind_is_read() {
        struct Docs(Vec<String>);
        impl KindVisitor for Docs {
            fn visit<K: Kind>(&mut self) {
                let (v, k) = (K::Object::api_version(&()), K::Object::kind(&()));
                self.0.push(format!("apiVersion: {v}\nkind: {k}\nmetadata: {{name: x, namespace: ns}}\n"));
            }
        }
        let mut docs = Docs(Vec::new());
        visit_kinds(&mut docs);
        for doc in docs.0 {
            match load(&doc) {
                // Not ignored: decoded (controllers as workloads that make
                // pods), or refused for a missing field of the kind.
                Ok(m) => assert!(m.ignored.is_empty() && m.objects.len() == 1, "{doc}"),
                Err(e) => assert!(!e.to_string().contains("apiVersion"), "{doc}: {e}"),
            }
        }
    }
}
