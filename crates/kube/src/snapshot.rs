//! `gpu-scheduler snapshot`: the cluster's Nodes, Namespaces,
//! PriorityClasses, PodDisruptionBudgets, PodGroups (when the CRD is
//! served), the DRA objects (when `resource.k8s.io/v1` is) and unfinished
//! Pods as multi-document YAML that `simulate` reads, for what-if runs on
//! a real cluster's state.

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::Serialize;

use crate::KubeError;
use engine::convert::{PodGroupObject, QueueObject};

/// What a snapshot holds, counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SnapshotCounts {
    pub nodes: usize,
    pub pods: usize,
    pub pending: usize,
}

/// Writes the snapshot to `out`. Fields the simulation does not read and
/// that only make the file large (managedFields, node images) are left
/// out.
pub async fn write(client: &Client, out: &mut impl std::io::Write) -> Result<SnapshotCounts, KubeError> {
    let mut counts = SnapshotCounts::default();
    writeln!(out, "# gpu-scheduler snapshot: simulate with `gpu-scheduler simulate FILE`").map_err(io)?;
    for mut pc in list::<PriorityClass>(client, None).await? {
        strip(&mut pc);
        doc(out, &pc)?;
    }
    for mut ns in list::<Namespace>(client, None).await? {
        strip(&mut ns);
        doc(out, &ns)?;
    }
    for mut node in list::<Node>(client, None).await? {
        strip(&mut node);
        if let Some(status) = &mut node.status {
            status.images = None;
        }
        doc(out, &node)?;
        counts.nodes += 1;
    }
    for mut pdb in list::<PodDisruptionBudget>(client, None).await? {
        strip(&mut pdb);
        doc(out, &pdb)?;
    }
    if crate::podgroup::served(client).await {
        for mut group in list::<PodGroupObject>(client, None).await? {
            strip(&mut group);
            group.status = None; // the scheduler's to write, not an input
            doc(out, &group)?;
        }
    }
    if crate::queue::served(client).await {
        for mut q in list::<QueueObject>(client, None).await? {
            strip(&mut q);
            q.status = None; // the scheduler's to write, not an input
            doc(out, &q)?;
        }
    }
    if crate::watch::dra_served(client).await {
        for mut o in list::<ResourceSlice>(client, None).await? {
            strip(&mut o);
            doc(out, &o)?;
        }
        for mut o in list::<DeviceClass>(client, None).await? {
            strip(&mut o);
            doc(out, &o)?;
        }
        for mut o in list::<ResourceClaimTemplate>(client, None).await? {
            strip(&mut o);
            doc(out, &o)?;
        }
        for mut o in list::<ResourceClaim>(client, None).await? {
            strip(&mut o);
            doc(out, &o)?;
        }
    }
    let unfinished = "status.phase!=Succeeded,status.phase!=Failed";
    for mut pod in list::<Pod>(client, Some(unfinished)).await? {
        strip(&mut pod);
        if pod.spec.as_ref().is_none_or(|s| s.node_name.is_none()) {
            counts.pending += 1;
        }
        doc(out, &pod)?;
        counts.pods += 1;
    }
    Ok(counts)
}

async fn list<K>(client: &Client, fields: Option<&str>) -> Result<Vec<K>, KubeError>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    let mut params = ListParams::default().limit(500);
    if let Some(f) = fields {
        params = params.fields(f);
    }
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|e| KubeError::Api(format!("listing {}: {e}", K::plural(&()))))?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(&c),
            None => break,
        }
    }
    Ok(items)
}

fn strip<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

fn doc(out: &mut impl std::io::Write, obj: &impl Serialize) -> Result<(), KubeError> {
    let yaml = serde_yaml_ng::to_string(obj).map_err(|e| KubeError::Api(format!("writing YAML: {e}")))?;
    write!(out, "---\n{yaml}").map_err(io)
}

fn io(e: std::io::Error) -> KubeError {
    KubeError::Io(e.to_string())
}
