//! Expanding workloads into the pods their controllers would create:
//! Deployment → ReplicaSet → pods, ReplicaSet, StatefulSet and Job, with
//! the controllers' names and labels. Names are derived from hashes, not
//! random, so a simulation is reproducible.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

/// A pod a controller would create, with the selector of that controller
/// (used by default topology spreading) and the field path of its template.
#[derive(Debug, Clone)]
pub struct ExpandedPod {
    pub pod: Pod,
    pub owner_selector: Option<LabelSelector>,
    /// Where the template sits in the workload (`spec.template`), for errors.
    pub template_path: &'static str,
}

/// Characters Kubernetes uses for generated name suffixes (no vowels, no
/// look-alikes), as in `rand.SafeEncodeString`.
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a: stable across runs and platforms, like kube's template hash.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn safe_encode(mut h: u64, len: usize) -> String {
    (0..len)
        .map(|_| {
            let c = ALPHANUMS[(h % ALPHANUMS.len() as u64) as usize] as char;
            h /= ALPHANUMS.len() as u64;
            c
        })
        .collect()
}

/// The `pod-template-hash` of a Deployment's template.
fn template_hash(template: &PodTemplateSpec) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    safe_encode(fnv1a(&[&json]), 10)
}

/// `<base>-<5 chars>`, distinct per index.
fn generated_name(base: &str, index: usize) -> String {
    format!("{base}-{}", safe_encode(fnv1a(&[base.as_bytes(), &index.to_le_bytes()]), 5))
}

fn namespace_of(meta: &ObjectMeta) -> String {
    meta.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into())
}

fn owner(kind: &str, api_version: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A pod from a template: the template's labels, annotations and spec, the
/// controller's namespace and owner, and extra labels.
fn pod_from_template(
    template: &PodTemplateSpec,
    namespace: &str,
    name: String,
    owner_ref: OwnerReference,
    extra_labels: &[(&str, String)],
) -> Pod {
    let tmeta = template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = tmeta.labels.unwrap_or_default();
    for (k, v) in extra_labels {
        labels.insert((*k).to_string(), v.clone());
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: tmeta.annotations,
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

fn replicas(r: Option<i32>) -> usize {
    usize::try_from(r.unwrap_or(1)).unwrap_or(0)
}

fn with_label(sel: &LabelSelector, k: &str, v: &str) -> LabelSelector {
    let mut s = sel.clone();
    s.match_labels.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
    s
}

pub fn expand_deployment(d: &Deployment) -> Vec<ExpandedPod> {
    let Some(spec) = &d.spec else { return Vec::new() };
    let name = d.metadata.name.clone().unwrap_or_default();
    let hash = template_hash(&spec.template);
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{hash}")),
            namespace: d.metadata.namespace.clone(),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::apps::v1::ReplicaSetSpec {
            replicas: spec.replicas,
            selector: with_label(&spec.selector, "pod-template-hash", &hash),
            template: Some(spec.template.clone()),
            min_ready_seconds: None,
        }),
        status: None,
    };
    expand_replica_set_with(&rs, &[("pod-template-hash", hash)])
}

pub fn expand_replica_set(rs: &ReplicaSet) -> Vec<ExpandedPod> {
    expand_replica_set_with(rs, &[])
}

fn expand_replica_set_with(rs: &ReplicaSet, extra: &[(&str, String)]) -> Vec<ExpandedPod> {
    let Some(spec) = &rs.spec else { return Vec::new() };
    let Some(template) = &spec.template else { return Vec::new() };
    let name = rs.metadata.name.clone().unwrap_or_default();
    let ns = namespace_of(&rs.metadata);
    let uid = format!("{ns}/{name}");
    (0..replicas(spec.replicas))
        .map(|i| ExpandedPod {
            pod: pod_from_template(
                template,
                &ns,
                generated_name(&name, i),
                owner("ReplicaSet", "apps/v1", &name, &uid),
                extra,
            ),
            owner_selector: Some(spec.selector.clone()),
            template_path: "spec.template",
        })
        .collect()
}

pub fn expand_stateful_set(ss: &StatefulSet) -> Vec<ExpandedPod> {
    let Some(spec) = &ss.spec else { return Vec::new() };
    let name = ss.metadata.name.clone().unwrap_or_default();
    let ns = namespace_of(&ss.metadata);
    let uid = format!("{ns}/{name}");
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0).max(0) as usize;
    (start..start + replicas(spec.replicas))
        .map(|i| {
            let pod_name = format!("{name}-{i}");
            ExpandedPod {
                pod: pod_from_template(
                    &spec.template,
                    &ns,
                    pod_name.clone(),
                    owner("StatefulSet", "apps/v1", &name, &uid),
                    &[
                        ("statefulset.kubernetes.io/pod-name", pod_name),
                        ("apps.kubernetes.io/pod-index", i.to_string()),
                    ],
                ),
                owner_selector: Some(spec.selector.clone()),
                template_path: "spec.template",
            }
        })
        .collect()
}

/// A Job's running pods: min(parallelism, completions), parallelism defaulting to 1.
pub fn expand_job(job: &Job) -> Vec<ExpandedPod> {
    let Some(spec) = &job.spec else { return Vec::new() };
    let name = job.metadata.name.clone().unwrap_or_default();
    let ns = namespace_of(&job.metadata);
    let uid = format!("{ns}/{name}");
    let parallelism = replicas(spec.parallelism);
    let count = match spec.completions {
        Some(c) => parallelism.min(usize::try_from(c).unwrap_or(0)),
        None => parallelism,
    };
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    (0..count)
        .map(|i| {
            let mut extra = vec![
                ("batch.kubernetes.io/controller-uid", uid.replace('/', ".")),
                ("batch.kubernetes.io/job-name", name.clone()),
                ("controller-uid", uid.replace('/', ".")),
                ("job-name", name.clone()),
            ];
            let pod_name = if indexed {
                extra.push(("batch.kubernetes.io/job-completion-index", i.to_string()));
                generated_name(&format!("{name}-{i}"), 0)
            } else {
                generated_name(&name, i)
            };
            ExpandedPod {
                pod: pod_from_template(&spec.template, &ns, pod_name, owner("Job", "batch/v1", &name, &uid), &extra),
                // kube-scheduler's default spreading does not look at Jobs.
                owner_selector: None,
                template_path: "spec.template",
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const TEMPLATE: &str =
        "  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: nginx}]}\n";

    #[test]
    fn deployment_pods_carry_template_hash_and_owner_selector() {
        let d: Deployment = parse(&format!(
            "metadata: {{name: web, namespace: shop}}\nspec:\n  replicas: 3\n  selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}"
        ));
        let pods = expand_deployment(&d);
        assert_eq!(pods.len(), 3);
        let p = &pods[0].pod;
        let labels = p.metadata.labels.as_ref().unwrap();
        let hash = &labels["pod-template-hash"];
        assert_eq!(hash.len(), 10);
        assert_eq!(labels["app"], "web");
        assert!(p.metadata.name.as_ref().unwrap().starts_with(&format!("web-{hash}-")));
        assert_eq!(p.metadata.namespace.as_deref(), Some("shop"));
        let names: std::collections::HashSet<_> = pods.iter().map(|p| p.pod.metadata.name.clone()).collect();
        assert_eq!(names.len(), 3, "names are distinct");
        let sel = pods[0].owner_selector.as_ref().unwrap().match_labels.as_ref().unwrap();
        assert_eq!(sel.get("pod-template-hash"), Some(hash));
        // Reproducible.
        assert_eq!(expand_deployment(&d)[0].pod.metadata.name, p.metadata.name);
    }

    #[test]
    fn replica_counts() {
        let cases: &[(&str, usize)] = &[
            (
                "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 2\n  serviceName: db\n  selector: {matchLabels: {app: web}}\n",
                2,
            ),
            ("metadata: {name: j}\nspec:\n  parallelism: 4\n  completions: 2\n", 2),
            ("metadata: {name: j}\nspec:\n  parallelism: 3\n", 3),
            ("metadata: {name: j}\nspec:\n  backoffLimit: 1\n", 1),
        ];
        for (i, (yaml, want)) in cases.iter().enumerate() {
            let text = format!("{yaml}{TEMPLATE}");
            let got = if i == 0 {
                let ss: StatefulSet = parse(&text);
                let pods = expand_stateful_set(&ss);
                assert_eq!(pods[1].pod.metadata.name.as_deref(), Some("db-1"));
                pods.len()
            } else {
                let job: Job = parse(&text);
                let pods = expand_job(&job);
                assert_eq!(pods[0].pod.metadata.labels.as_ref().unwrap()["job-name"], "j");
                pods.len()
            };
            assert_eq!(got, *want, "case {i}");
        }
    }
}
