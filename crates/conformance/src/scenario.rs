//! A scenario: the cluster objects of one comparison and the one pending
//! pod, as Kubernetes API objects. It reads and writes as multi-document
//! YAML that `gpu-scheduler simulate --config
//! examples/kube-default-config.yaml` also reads, so a divergence can be
//! replayed offline as it is printed.

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Resource;
use serde::Deserialize;
use serde_json::Value;

use crate::Error;

/// The schedulerName of the pending pod in a scenario's YAML: the one of
/// `examples/kube-default-config.yaml`.
pub const OUR_SCHEDULER: &str = "gpu-scheduler";
/// kube-scheduler's default profile.
pub const KUBE_SCHEDULER: &str = "default-scheduler";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    /// `seed-N` for a generated scenario, the case's name for a named one.
    pub name: String,
    pub namespaces: Vec<Namespace>,
    pub storage_classes: Vec<StorageClass>,
    pub volumes: Vec<PersistentVolume>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub nodes: Vec<Node>,
    pub services: Vec<Service>,
    /// Pods with `spec.nodeName` set: the existing load.
    pub bound_pods: Vec<Pod>,
    /// The pod both schedulers place, without `spec.nodeName`.
    pub pending: Pod,
}

/// Which scheduler a run of the pending pod is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    Ours,
    Kube,
}

impl Run {
    pub fn scheduler_name(self) -> &'static str {
        match self {
            Run::Ours => OUR_SCHEDULER,
            Run::Kube => KUBE_SCHEDULER,
        }
    }

    /// Appended to the names of the objects made for one run.
    pub fn suffix(self) -> &'static str {
        match self {
            Run::Ours => "gs",
            Run::Kube => "kube",
        }
    }
}

/// The objects of one run of the pending pod: the pod, and the claims and
/// volumes a scheduler's PreBind may write to (the pending pod's unbound
/// claims, the volumes bound to no claim), fresh for each run so that the
/// second scheduler never sees what the first one wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RunObjects {
    pub pod: Pod,
    pub volumes: Vec<PersistentVolume>,
    pub claims: Vec<PersistentVolumeClaim>,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

impl Scenario {
    pub fn namespace(&self) -> &str {
        self.pending.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// Claims bound in the scenario as written (to a volume named in
    /// `spec.volumeName`): shared by both runs.
    pub fn shared_claims(&self) -> impl Iterator<Item = &PersistentVolumeClaim> {
        self.claims.iter().filter(|c| !is_run_claim(c))
    }

    /// Volumes bound to a claim in the scenario as written: shared by both runs.
    pub fn shared_volumes(&self) -> impl Iterator<Item = &PersistentVolume> {
        self.volumes.iter().filter(|v| !is_run_volume(v))
    }

    /// The pending pod, its unbound claims and the free volumes, renamed
    /// for `run` (`NAME-SUFFIX`) and the pod given the run's scheduler.
    pub fn run_objects(&self, run: Run) -> RunObjects {
        let rename = |name: &str| format!("{name}-{}", run.suffix());
        let run_claims: Vec<String> =
            self.claims.iter().filter(|c| is_run_claim(c)).map(|c| name_of(&c.metadata).to_string()).collect();
        let mut pod = self.pending.clone();
        pod.metadata.name = Some(rename(name_of(&self.pending.metadata)));
        if let Some(spec) = pod.spec.as_mut() {
            spec.scheduler_name = Some(run.scheduler_name().to_string());
            for v in spec.volumes.iter_mut().flatten() {
                if let Some(c) = v.persistent_volume_claim.as_mut()
                    && run_claims.contains(&c.claim_name)
                {
                    c.claim_name = rename(&c.claim_name);
                }
            }
        }
        let claims = renamed(&self.claims, is_run_claim, rename);
        let volumes = renamed(&self.volumes, is_run_volume, rename);
        RunObjects { pod, volumes, claims }
    }

    /// Multi-document YAML, objects in the order they are created, the
    /// pending pod last.
    pub fn to_yaml(&self) -> Result<String, Error> {
        let mut out = format!(
            "# conformance scenario {}: gpu-scheduler simulate --config examples/kube-default-config.yaml FILE\n",
            self.name
        );
        let docs: Vec<Value> = self
            .namespaces
            .iter()
            .map(serde_json::to_value)
            .chain(self.storage_classes.iter().map(serde_json::to_value))
            .chain(self.volumes.iter().map(serde_json::to_value))
            .chain(self.claims.iter().map(serde_json::to_value))
            .chain(self.nodes.iter().map(serde_json::to_value))
            .chain(self.services.iter().map(serde_json::to_value))
            .chain(self.bound_pods.iter().map(serde_json::to_value))
            .chain([serde_json::to_value(&self.pending)])
            .collect::<Result<_, _>>()?;
        for d in docs {
            out.push_str("---\n");
            out.push_str(&serde_yaml_ng::to_string(&d)?);
        }
        Ok(out)
    }

    /// Reads what [`Scenario::to_yaml`] wrote (or a hand-written file of
    /// the same kinds): exactly one pod without `spec.nodeName`.
    pub fn from_yaml(name: &str, text: &str) -> Result<Scenario, Error> {
        let mut s = Scenario { name: name.to_string(), ..Default::default() };
        let mut pending = Vec::new();
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let v = Value::deserialize(doc)?;
            if v.is_null() {
                continue;
            }
            let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
            let bad = |e: serde_json::Error| Error::Scenario(format!("{name}: document {i} ({kind}): {e}"));
            match kind.as_str() {
                "Namespace" => s.namespaces.push(serde_json::from_value(v).map_err(bad)?),
                "StorageClass" => s.storage_classes.push(serde_json::from_value(v).map_err(bad)?),
                "PersistentVolume" => s.volumes.push(serde_json::from_value(v).map_err(bad)?),
                "PersistentVolumeClaim" => s.claims.push(serde_json::from_value(v).map_err(bad)?),
                "Node" => s.nodes.push(serde_json::from_value(v).map_err(bad)?),
                "Service" => s.services.push(serde_json::from_value(v).map_err(bad)?),
                "Pod" => {
                    let p: Pod = serde_json::from_value(v).map_err(bad)?;
                    if p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) {
                        s.bound_pods.push(p);
                    } else {
                        pending.push(p);
                    }
                }
                other => return Err(Error::Scenario(format!("{name}: document {i}: unexpected kind {other:?}"))),
            }
        }
        match <[Pod; 1]>::try_from(pending) {
            Ok([p]) => s.pending = p,
            Err(v) => return Err(Error::Scenario(format!("{name}: {} pending pods, expected exactly one", v.len()))),
        }
        Ok(s)
    }
}

/// Copies of the objects `keep` selects, renamed by `rename`.
fn renamed<K: Resource + Clone>(objects: &[K], keep: fn(&K) -> bool, rename: impl Fn(&str) -> String) -> Vec<K> {
    objects
        .iter()
        .filter(|o| keep(o))
        .map(|o| {
            let mut o = o.clone();
            o.meta_mut().name = Some(rename(name_of(o.meta())));
            o
        })
        .collect()
}

/// A claim the pending pod's scheduler may write to: not bound to a volume yet.
fn is_run_claim(c: &PersistentVolumeClaim) -> bool {
    c.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty)
}

/// A volume the pending pod's scheduler may bind: bound to no claim yet.
fn is_run_volume(v: &PersistentVolume) -> bool {
    v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::generate;

    #[test]
    fn yaml_round_trips_for_many_seeds() {
        for seed in 0..200 {
            let s = generate(seed);
            let yaml = s.to_yaml().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let back = Scenario::from_yaml(&s.name, &yaml).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{yaml}"));
            assert_eq!(back, s, "seed {seed}:\n{yaml}");
        }
    }

    #[test]
    fn a_run_renames_only_what_a_scheduler_may_write() {
        let yaml = "\
apiVersion: v1
kind: PersistentVolume
metadata: {name: free}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /a}, storageClassName: wait}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: taken}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /b}, claimRef: {namespace: ns, name: old}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: old, namespace: ns}
spec: {volumeName: taken, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: new, namespace: ns}
spec: {storageClassName: wait, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: incoming, namespace: ns}
spec:
  schedulerName: gpu-scheduler
  containers: [{name: c, image: i}]
  volumes:
  - {name: a, persistentVolumeClaim: {claimName: old}}
  - {name: b, persistentVolumeClaim: {claimName: new}}
";
        let s = Scenario::from_yaml("t", yaml).unwrap_or_else(|e| panic!("{e}"));
        let r = s.run_objects(Run::Kube);
        let names = |m: Vec<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>| {
            m.into_iter().map(|m| name_of(m).to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(r.volumes.iter().map(|v| &v.metadata).collect()), ["free-kube"]);
        assert_eq!(names(r.claims.iter().map(|c| &c.metadata).collect()), ["new-kube"]);
        assert_eq!(name_of(&r.pod.metadata), "incoming-kube");
        let spec = r.pod.spec.unwrap_or_default();
        assert_eq!(spec.scheduler_name.as_deref(), Some(KUBE_SCHEDULER));
        let claims: Vec<String> = spec
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| v.persistent_volume_claim.map(|c| c.claim_name))
            .collect();
        assert_eq!(claims, ["old", "new-kube"]);
        assert_eq!(names(s.shared_claims().map(|c| &c.metadata).collect()), ["old"]);
        assert_eq!(names(s.shared_volumes().map(|v| &v.metadata).collect()), ["taken"]);
    }

    #[test]
    fn more_or_fewer_than_one_pending_pod_is_an_error() {
        let pod = |n: &str| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {n}}}\nspec: {{containers: []}}\n");
        for (yaml, want) in [
            (String::new(), "0 pending pods"),
            (format!("{}---\n{}", pod("a"), pod("b")), "2 pending pods"),
            ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n".to_string(), "unexpected kind \"Secret\""),
        ] {
            let err = Scenario::from_yaml("t", &yaml).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(want), "{err:?} should say {want:?}");
        }
    }
}
