//! CloudBoundary: the article's hybrid-cloud rules (DESIGN.md §4). Nodes say
//! where they are with the label `gpu-scheduler.io/cloud` (`private` or
//! `public`).
//!
//! - A pod labelled `gpu-scheduler.io/data-class=sensitive` runs on private
//!   nodes only (a node without the label is not known to be private).
//! - A service (namespace + `app` label, else `app.kubernetes.io/name`)
//!   whose pods already run in one cloud stays there: its other pods are
//!   not spread over the link between clouds.
//! - Any other pod prefers private nodes: public ones are a fallback, used
//!   only when no private (or unlabelled) node passes every filter.
//!
//! The service's cloud comes from the counts the cache keeps as pods come
//! and go, so the rule costs one lookup per pod, not a scan of its pods.

use std::borrow::Cow;
use std::sync::Arc;

use framework::cache::{NodeView, Snapshot};
use framework::facts::{Cloud, LABEL_DATA_CLASS, service_identity};
use framework::framework::{
    ClusterEvent, CycleState, EventAction, EventResource, FilterPlugin, Plugin, PreFilterPlugin, PreFilterResult,
    Status,
};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = "CloudBoundary";

pub const ERR_REASON_SENSITIVE: &str = "node(s) not in the private cloud (sensitive data)";
pub const REASON_PUBLIC_FALLBACK: &str = "public node(s) held back while private nodes fit";
/// The value of [`LABEL_DATA_CLASS`] that keeps a pod private.
pub const DATA_CLASS_SENSITIVE: &str = "sensitive";

#[derive(Debug, Default, Clone, Copy)]
pub struct CloudBoundary;

/// What PreFilter decided for the pod.
enum Rule {
    /// Private nodes only.
    Sensitive,
    /// The service's cloud only; the message names the service.
    Service { cloud: Cloud, reason: String },
    /// Private first, public as a fallback.
    PreferPrivate,
}

impl Plugin for CloudBoundary {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A node added or relabelled into the right cloud, or the service's
    /// pods leaving (which frees it from its cloud).
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(EventResource::Node, EventAction::Add),
            ClusterEvent::new(EventResource::Node, EventAction::UpdateLabel),
            ClusterEvent::new(EventResource::Node, EventAction::Update),
            ClusterEvent::new(EventResource::AssignedPod, EventAction::Delete),
            ClusterEvent::new(EventResource::UnscheduledPod, EventAction::Update),
        ]
    }

    fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
        Some(self)
    }

    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
}

impl PreFilterPlugin for CloudBoundary {
    fn pre_filter(&self, state: &mut CycleState, pod: &Pod, snapshot: &Snapshot) -> (PreFilterResult, Status) {
        let rule = if pod.labels.get(LABEL_DATA_CLASS).is_some_and(|c| c == DATA_CLASS_SENSITIVE) {
            Rule::Sensitive
        } else if snapshot.fact_counts().cloud == 0 {
            // No node says which cloud it is in: only sensitive pods care.
            return (PreFilterResult::default(), Status::skip());
        } else {
            let service = service_identity(pod);
            match service.as_deref().and_then(|id| snapshot.service(id)).and_then(|s| s.cloud()) {
                Some(cloud) => Rule::Service {
                    cloud,
                    reason: format!(
                        "node(s) outside the {} cloud of service {}",
                        cloud.as_str(),
                        service.as_deref().unwrap_or_default()
                    ),
                },
                None => Rule::PreferPrivate,
            }
        };
        state.write(rule);
        (PreFilterResult::default(), Status::success())
    }
}

impl FilterPlugin for CloudBoundary {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Status {
        let cloud = node.summary().cloud;
        match state.read::<Rule>() {
            Some(Rule::Sensitive) if cloud != Some(Cloud::Private) => Status::unresolvable(ERR_REASON_SENSITIVE),
            Some(Rule::Service { cloud: want, reason }) if cloud.is_some_and(|c| c != *want) => {
                Status::unresolvable(Cow::Owned(reason.clone()))
            }
            Some(Rule::PreferPrivate) if cloud == Some(Cloud::Public) => Status::fallback(REASON_PUBLIC_FALLBACK),
            Some(_) => Status::success(),
            None => Status::error("CloudBoundary: PreFilter did not run"),
        }
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(CloudBoundary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::facts::LABEL_CLOUD;
    use framework::framework::Code;
    use framework::testing::{node, pod};

    /// (name, pod, pods running, verdicts on priv / pub / none)
    type Case = (&'static str, Pod, Vec<Arc<Pod>>, [(Code, String); 3]);

    /// Verdicts on a private, a public and an unlabelled node, for a pod
    /// given the pods already running.
    fn verdicts(p: &Pod, running: Vec<Arc<Pod>>) -> Vec<(Code, String)> {
        let nodes = vec![
            node("priv").label(LABEL_CLOUD, "private").build(),
            node("pub").label(LABEL_CLOUD, "public").build(),
            node("none").build(),
        ];
        let snap = Snapshot::from_parts(nodes, running);
        let mut state = CycleState::new();
        let (_, s) = CloudBoundary.pre_filter(&mut state, p, &snap);
        assert!(s.is_success());
        ["priv", "pub", "none"]
            .map(|n| {
                let i = snap.position(n).unwrap();
                let s = CloudBoundary.filter(&state, p, &snap.view(i));
                (s.code, s.message())
            })
            .to_vec()
    }

    #[test]
    fn filter_table() {
        use Code::*;
        let ok = || (Success, String::new());
        let web = |n: &str, i: u32| pod(&format!("w-{n}-{i}")).label("app", "web").node(n).arc();
        let sensitive = pod("p").label("app", "web").label(LABEL_DATA_CLASS, "sensitive").build();
        let cases: Vec<Case> = vec![
            (
                "plain pod: private first, public as fallback",
                pod("p").build(),
                vec![],
                [ok(), (Fallback, REASON_PUBLIC_FALLBACK.into()), ok()],
            ),
            (
                "sensitive: labelled private nodes only",
                sensitive.clone(),
                vec![],
                [
                    ok(),
                    (UnschedulableAndUnresolvable, ERR_REASON_SENSITIVE.into()),
                    (UnschedulableAndUnresolvable, ERR_REASON_SENSITIVE.into()),
                ],
            ),
            (
                "sensitive even when its service runs in public",
                sensitive,
                vec![web("pub", 0)],
                [
                    ok(),
                    (UnschedulableAndUnresolvable, ERR_REASON_SENSITIVE.into()),
                    (UnschedulableAndUnresolvable, ERR_REASON_SENSITIVE.into()),
                ],
            ),
            (
                "service in public stays public",
                pod("p").label("app", "web").build(),
                vec![web("pub", 0)],
                [
                    (UnschedulableAndUnresolvable, "node(s) outside the public cloud of service default/web".into()),
                    ok(),
                    ok(),
                ],
            ),
            (
                "service in private stays private",
                pod("p").label("app", "web").build(),
                vec![web("priv", 0), web("priv", 1), web("pub", 0)],
                [
                    ok(),
                    (UnschedulableAndUnresolvable, "node(s) outside the private cloud of service default/web".into()),
                    ok(),
                ],
            ),
            (
                "service on unlabelled nodes only: no cloud yet",
                pod("p").label("app", "web").build(),
                vec![web("none", 0)],
                [ok(), (Fallback, REASON_PUBLIC_FALLBACK.into()), ok()],
            ),
            (
                "same app label in another namespace is another service",
                pod("p").namespace("shop").label("app", "web").build(),
                vec![web("pub", 0)],
                [ok(), (Fallback, REASON_PUBLIC_FALLBACK.into()), ok()],
            ),
        ];
        for (name, p, running, want) in cases {
            assert_eq!(verdicts(&p, running), want, "{name}");
        }
    }

    #[test]
    fn without_cloud_labels_only_sensitive_pods_are_checked() {
        let snap = Snapshot::from_parts(vec![node("a").build()], vec![]);
        let plain = pod("p").label("app", "web").build();
        assert!(CloudBoundary.pre_filter(&mut CycleState::new(), &plain, &snap).1.is_skip());
        let sensitive = pod("p").label(LABEL_DATA_CLASS, "sensitive").build();
        let mut state = CycleState::new();
        assert!(CloudBoundary.pre_filter(&mut state, &sensitive, &snap).1.is_success());
        let s = CloudBoundary.filter(&state, &sensitive, &snap.view(0));
        assert_eq!(s.message(), ERR_REASON_SENSITIVE, "no node is known to be private");
    }

    #[test]
    fn factory() {
        assert_eq!(new(None).unwrap().name(), NAME);
        assert!(new(Some(&serde_json::json!({"private": "x"}))).is_err());
    }
}
