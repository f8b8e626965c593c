//! GpuModel: the article's "A100 for training, T4 for inference"
//! (DESIGN.md §4). For a pod that requests `nvidia.com/gpu`: 100 on a node
//! whose GPU model the pod's workload class prefers, 50 on another GPU
//! model (or one we cannot name), 0 on a node without GPUs. Any GPU
//! request counts: whole GPUs, a share, MIG instances or time slices. The class is
//! the pod label `gpu-scheduler.io/workload`; the node's model is a fact
//! read from `gpu-model` or, normalised, `nvidia.com/gpu.product`. Pods
//! without GPUs are GpuNodeAvoidance's business.

use std::collections::BTreeMap;
use std::sync::Arc;

use framework::cache::{NodeList, NodeView};
use framework::facts::LABEL_WORKLOAD;
use framework::framework::{ClusterEvent, CycleState, MAX_NODE_SCORE, Plugin, PreScorePlugin, ScorePlugin, Status};
use framework::model::Pod;
use framework::registry::{ArgsError, decode_args};
use serde::Deserialize;

pub const NAME: &str = "GpuModel";

/// Score on a GPU node of a model the pod does not prefer.
const OTHER_MODEL_SCORE: i64 = MAX_NODE_SCORE / 2;

/// `GpuModelArgs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuModelArgs {
    /// Workload class → preferred models (any case).
    #[serde(default = "default_preferences")]
    pub preferences: BTreeMap<String, Vec<String>>,
    /// Preferred models of GPU pods without a class, or of a class not
    /// listed in `preferences`.
    #[serde(default = "default_models")]
    pub default_models: Vec<String>,
}

fn default_preferences() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([
        ("training".to_string(), vec!["a100".to_string(), "h100".to_string()]),
        ("inference".to_string(), vec!["t4".to_string(), "l4".to_string()]),
    ])
}

fn default_models() -> Vec<String> {
    vec!["a100".to_string()]
}

impl Default for GpuModelArgs {
    fn default() -> Self {
        GpuModelArgs { preferences: default_preferences(), default_models: default_models() }
    }
}

/// Lower-cases the models of one list; an empty name is an error at `path`.
fn normalise(models: &[String], path: &str) -> Result<Arc<[Arc<str>]>, ArgsError> {
    models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let m = m.trim();
            if m.is_empty() {
                Err(ArgsError::new(format!("{path}[{i}]"), "must not be empty"))
            } else {
                Ok(Arc::from(m.to_ascii_lowercase()))
            }
        })
        .collect()
}

#[derive(Debug, Clone)]
pub struct GpuModel {
    preferences: Vec<(String, Arc<[Arc<str>]>)>,
    default_models: Arc<[Arc<str>]>,
}

/// The preferred models of the pod being scheduled, shared from the args.
struct Preferred(Arc<[Arc<str>]>);

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    Ok(Arc::new(GpuModel::from_args(args)?))
}

impl GpuModel {
    /// The plugin for these args (also for tools that report placement
    /// quality, as `simulate --compare` does).
    pub fn from_args(args: Option<&serde_json::Value>) -> Result<GpuModel, ArgsError> {
        let args: GpuModelArgs = decode_args(args)?;
        let preferences = args
            .preferences
            .iter()
            .map(|(class, models)| Ok((class.clone(), normalise(models, &format!("preferences.{class}"))?)))
            .collect::<Result<_, ArgsError>>()?;
        Ok(GpuModel { preferences, default_models: normalise(&args.default_models, "defaultModels")? })
    }

    /// The models `pod` prefers: its workload class's, or the defaults.
    pub fn preferred(&self, pod: &Pod) -> &Arc<[Arc<str>]> {
        let class = pod.labels.get(LABEL_WORKLOAD);
        class.and_then(|c| self.preferences.iter().find(|(k, _)| k == c)).map_or(&self.default_models, |(_, m)| m)
    }
}

impl Plugin for GpuModel {
    fn name(&self) -> &'static str {
        NAME
    }

    /// A score rejects nothing: no event needs to requeue pods for it.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }

    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for GpuModel {
    /// Skips pods without GPUs, and clusters without GPU nodes (every node
    /// would score 0; the pod cannot fit anyway).
    fn pre_score(&self, state: &mut CycleState, pod: &Pod, nodes: NodeList<'_>) -> Status {
        if !state.pod_gpu(pod).wants_gpu() || nodes.snapshot().fact_counts().gpus == 0 {
            return Status::skip();
        }
        state.write(Preferred(self.preferred(pod).clone()));
        Status::success()
    }
}

impl ScorePlugin for GpuModel {
    fn score(&self, state: &CycleState, _pod: &Pod, node: &NodeView<'_>) -> Result<i64, Status> {
        if !node.summary().has_gpus {
            return Ok(0);
        }
        let Some(Preferred(models)) = state.read::<Preferred>() else {
            return Err(Status::error("GpuModel: PreScore did not run"));
        };
        let preferred = node.facts.gpu_model.as_ref().is_some_and(|m| models.contains(m));
        Ok(if preferred { MAX_NODE_SCORE } else { OTHER_MODEL_SCORE })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::cache::Snapshot;
    use framework::facts::{GPU_RESOURCE, LABEL_GPU_MODEL, LABEL_GPU_PRODUCT};
    use framework::testing::{node, pod};

    /// A GPU node named by `label` = `value`, or a CPU node when `label` is "".
    fn gpu_node(label: &str, value: &str) -> framework::model::Node {
        let n = node("n");
        match label {
            "" => n.build(),
            "none" => n.resource(GPU_RESOURCE, 8).build(),
            _ => n.resource(GPU_RESOURCE, 8).label(label, value).build(),
        }
    }

    /// The score of a pod with `workload` (and `gpus`) on the node, or
    /// None when PreScore skips the pod.
    fn score(plugin: &Arc<dyn Plugin>, workload: Option<&str>, gpus: i64, n: framework::model::Node) -> Option<i64> {
        let mut p = pod("p").req(1000, 0);
        if gpus > 0 {
            p = p.resource(GPU_RESOURCE, gpus);
        }
        if let Some(w) = workload {
            p = p.label(LABEL_WORKLOAD, w);
        }
        let p = p.build();
        // Another GPU node, so that the cluster has GPUs whatever `n` is.
        let other = node("other").resource(GPU_RESOURCE, 1).build();
        let snap = Snapshot::from_parts(vec![n, other], vec![]);
        let mut state = CycleState::new();
        if plugin.as_pre_score().unwrap().pre_score(&mut state, &p, snap.node_list()).is_skip() {
            return None;
        }
        let at = snap.position("n").unwrap();
        Some(plugin.as_score().unwrap().score(&state, &p, &snap.view(at)).unwrap())
    }

    #[test]
    fn score_table() {
        let plugin = new(None).unwrap();
        let cases = [
            ("training on a100", Some("training"), (LABEL_GPU_MODEL, "a100"), Some(100)),
            ("training on h100 (product)", Some("training"), (LABEL_GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3"), Some(100)),
            ("training on t4", Some("training"), (LABEL_GPU_MODEL, "t4"), Some(50)),
            ("training on a node without GPUs", Some("training"), ("", ""), Some(0)),
            ("inference on t4 (product)", Some("inference"), (LABEL_GPU_PRODUCT, "Tesla-T4"), Some(100)),
            ("inference on l4", Some("inference"), (LABEL_GPU_MODEL, "L4"), Some(100)),
            ("inference on a100", Some("inference"), (LABEL_GPU_MODEL, "a100"), Some(50)),
            ("unlabelled pod prefers a100", None, (LABEL_GPU_MODEL, "a100"), Some(100)),
            ("unlabelled pod on t4", None, (LABEL_GPU_MODEL, "t4"), Some(50)),
            ("unknown class takes the defaults", Some("rendering"), (LABEL_GPU_MODEL, "a100"), Some(100)),
            ("GPU node of unknown model", Some("training"), ("none", ""), Some(50)),
            ("unknown product", Some("training"), (LABEL_GPU_PRODUCT, "Quadro-RTX-8000"), Some(50)),
        ];
        for (name, workload, (label, value), want) in cases {
            assert_eq!(score(&plugin, workload, 1, gpu_node(label, value)), want, "{name}");
        }
        assert_eq!(score(&plugin, Some("training"), 0, gpu_node(LABEL_GPU_MODEL, "a100")), None, "CPU pods skip");
        let cpu_only = Snapshot::from_parts(vec![node("n").build()], vec![]);
        let gpu_pod = pod("p").resource(GPU_RESOURCE, 1).build();
        let s = plugin.as_pre_score().unwrap().pre_score(&mut CycleState::new(), &gpu_pod, cpu_only.node_list());
        assert!(s.is_skip(), "a cluster without GPU nodes skips");
    }

    #[test]
    fn args() {
        let plugin = new(Some(&serde_json::json!({
            "preferences": {"rendering": ["A40", "l40s"]},
            "defaultModels": ["t4"]
        })))
        .unwrap();
        assert_eq!(score(&plugin, Some("rendering"), 1, gpu_node(LABEL_GPU_MODEL, "a40")), Some(100));
        assert_eq!(
            score(&plugin, Some("training"), 1, gpu_node(LABEL_GPU_MODEL, "a100")),
            Some(50),
            "not listed: defaults"
        );
        assert_eq!(score(&plugin, None, 1, gpu_node(LABEL_GPU_MODEL, "t4")), Some(100));
        for (args, field) in [
            (serde_json::json!({"preferences": {"training": ["a100", ""]}}), "preferences.training[1]"),
            (serde_json::json!({"defaultModels": [""]}), "defaultModels[0]"),
            (serde_json::json!({"defaultModels": "a100"}), "defaultModels"),
            (serde_json::json!({"models": []}), "models"),
        ] {
            let Err(e) = new(Some(&args)) else { panic!("{args} accepted") };
            assert!(e.to_string().contains(field), "{args}: {e}");
        }
    }
}
