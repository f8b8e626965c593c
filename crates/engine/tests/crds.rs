//! The CRDs in deploy/crds/ and the chart's crds/ are generated from the
//! types in crates/engine/src/convert (kube-derive's `crd()`), with a fixed
//! comment block per kind: this test fails when a file is not what the
//! types make, and `UPDATE_CRDS=1` rewrites both copies.

use std::path::{Path, PathBuf};

use gpu_scheduler_engine::convert::{PodGroupObject, QueueObject};
use kube_core::crd::v1::CustomResourceExt;

const QUEUE_HEADER: &str = "\
# Queue (gpu-scheduler.io/v1alpha1): quotas for teams sharing GPUs, the
# first level of gpu-scheduler's two-level scheduling (docs/POLICIES.md,
# \"Queues\"; Kueue's ClusterQueue and cohort are the model). Pods join a
# queue by the label gpu-scheduler.io/queue, on the pod or on its
# namespace. Cluster-scoped: a queue is a share of the cluster, not of a
# namespace. Install it before deploy/ (docs/OPERATIONS.md); the Helm chart
# carries an identical copy in its crds/ directory.
#
# No app.kubernetes.io labels: deleting the CRD deletes every Queue, so a
# `kubectl delete -l` meant for gpu-scheduler's own objects must not
# select it.
#
# Generated from crates/engine/src/convert/queue.rs; do not edit. After a
# change there: UPDATE_CRDS=1 cargo test -p gpu-scheduler-engine --test crds
";

const POD_GROUP_HEADER: &str = "\
# PodGroup, scheduler-plugins' coscheduling API (scheduling.x-k8s.io/v1alpha1):
# the gangs gpu-scheduler places all or nothing (DESIGN.md §7). Compatible
# with scheduler-plugins' own CRD: the same names, fields and types, and a
# minMember of at least 1, so a PodGroup written for one is valid in the
# other. gpu-scheduler adds status.scheduled and the phase Scheduled (their
# CRD prunes the one and accepts the other) and limits status.phase to
# seven values, coscheduling's six among them. Install it before deploy/
# (docs/OPERATIONS.md); the Helm chart carries an identical copy in its
# crds/ directory (a test checks that they are the same file).
#
# No app.kubernetes.io labels: the CRD is shared with anything else that
# speaks this API (training operators, scheduler-plugins), and deleting it
# deletes every PodGroup in the cluster, so a `kubectl delete -l` meant for
# gpu-scheduler's own objects must not select it.
#
# The annotation api-approved.kubernetes.io points to the API review of this
# group in kubernetes-sigs/scheduler-plugins. The API server demands it only
# for groups ending in .k8s.io or .kubernetes.io (x-k8s.io is not one); it
# is kept so that this CRD and scheduler-plugins' agree on the whole
# metadata they set. The scheduler writes status through its own endpoint
# (RBAC grants it podgroups/status only); users and operators own the spec.
# minResources' values are Kubernetes quantities, as in a pod's resources:
# 8, \"8\", 500m, 512Gi, 1e3.
#
# Generated from crates/engine/src/convert/pod_group.rs; do not edit. After a
# change there: UPDATE_CRDS=1 cargo test -p gpu-scheduler-engine --test crds
";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The file's text: the header, then the CRD as YAML. `listKind` is set as
/// the API server would default it (kube-derive leaves it out).
fn render<K: CustomResourceExt>(header: &str) -> String {
    let mut crd = K::crd();
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    let yaml = serde_yaml_ng::to_string(&crd).unwrap_or_else(|e| panic!("{}: {e}", K::crd_name()));
    format!("{header}{yaml}")
}

fn check(file: &str, want: &str) {
    let update = std::env::var_os("UPDATE_CRDS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for dir in ["deploy/crds", "deploy/helm/gpu-scheduler/crds"] {
        let path = repo().join(dir).join(file);
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            continue;
        }
        if update {
            std::fs::write(&path, want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        } else {
            stale.push(format!("{dir}/{file}"));
        }
    }
    assert!(
        stale.is_empty(),
        "{} not what the types in crates/engine/src/convert generate; rewrite with \
         `UPDATE_CRDS=1 cargo test -p gpu-scheduler-engine --test crds` and review the diff",
        stale.join(" and ")
    );
}

#[test]
fn the_queue_crd_is_generated_from_its_type() {
    check("gpu-scheduler.io_queues.yaml", &render::<QueueObject>(QUEUE_HEADER));
}

#[test]
fn the_podgroup_crd_is_generated_from_its_type() {
    check("scheduling.x-k8s.io_podgroups.yaml", &render::<PodGroupObject>(POD_GROUP_HEADER));
}
