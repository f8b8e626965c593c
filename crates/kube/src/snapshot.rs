//! `gpu-scheduler snapshot`: the cluster as multi-document YAML that
//! `simulate` reads, for what-if runs on a real cluster's state: the
//! PriorityClasses, every kind the engine registers
//! (`engine::scheduler::visit_kinds`) that the cluster serves and a
//! snapshot holds (controllers are left out: their pods are written, and
//! `simulate` would create them again), the ResourceClaimTemplates, and
//! the unfinished Pods.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::Serialize;

use crate::KubeError;
use engine::scheduler::{Kind, KindVisitor, visit_kinds};

/// What a snapshot holds, counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SnapshotCounts {
    pub nodes: usize,
    pub pods: usize,
    pub pending: usize,
}

/// One kind's objects as YAML documents, ready for the snapshot.
type Lister = for<'c> fn(&'c Client) -> BoxFuture<'c, Result<Vec<String>, KubeError>>;

fn lister<K: Kind>(client: &Client) -> BoxFuture<'_, Result<Vec<String>, KubeError>> {
    Box::pin(async move {
        let mut docs = Vec::new();
        for mut obj in list::<K::Object>(client, None).await? {
            strip(&mut obj);
            K::for_snapshot(&mut obj);
            docs.push(yaml(&obj)?);
        }
        Ok(docs)
    })
}

/// Writes the snapshot to `out`. Fields the simulation does not read and
/// that only make the file large (managedFields, node images) are left
/// out.
pub async fn write(client: &Client, out: &mut impl std::io::Write) -> Result<SnapshotCounts, KubeError> {
    struct Listers(Vec<(String, Lister)>);
    impl KindVisitor for Listers {
        fn visit<K: Kind>(&mut self) {
            if K::IN_SNAPSHOT {
                self.0.push((K::Object::kind(&()).into_owned(), lister::<K>));
            }
        }
    }
    let mut listers = Listers(Vec::new());
    visit_kinds(&mut listers);
    let unserved = crate::watch::unserved(client, false).await;

    let mut counts = SnapshotCounts::default();
    writeln!(out, "# gpu-scheduler snapshot: simulate with `gpu-scheduler simulate FILE`").map_err(io)?;
    for mut pc in list::<PriorityClass>(client, None).await? {
        strip(&mut pc);
        doc(out, &pc)?;
    }
    for (kind, lister) in listers.0 {
        if unserved.contains(&kind) {
            continue;
        }
        let docs = lister(client).await?;
        if kind == <k8s_openapi::api::core::v1::Node as Resource>::kind(&()) {
            counts.nodes += docs.len();
        }
        for d in docs {
            write!(out, "{d}").map_err(io)?;
        }
    }
    // Pods' claims come from their templates: simulate makes them.
    if crate::watch::served::<ResourceClaimTemplate>(client).await {
        for mut o in list::<ResourceClaimTemplate>(client, None).await? {
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

fn yaml(obj: &impl Serialize) -> Result<String, KubeError> {
    let yaml = serde_yaml_ng::to_string(obj).map_err(|e| KubeError::Api(format!("writing YAML: {e}")))?;
    Ok(format!("---\n{yaml}"))
}

fn doc(out: &mut impl std::io::Write, obj: &impl Serialize) -> Result<(), KubeError> {
    write!(out, "{}", yaml(obj)?).map_err(io)
}

fn io(e: std::io::Error) -> KubeError {
    KubeError::Io(e.to_string())
}
