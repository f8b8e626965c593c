//! Node facts: the labels and annotations the policy plugins decide on,
//! parsed once per node update into typed values (docs/POLICIES.md). A
//! malformed value leaves the fact absent and yields one [`FactWarning`];
//! it never fails the node.
//!
//! [`NodeFacts::of`] reads the GPU model (the `gpu-model` label, or
//! `nvidia.com/gpu.product` through the `nodeFacts.gpuModels` table), cloud,
//! zone, disk type, maintenance flag, spot expiry, last hardware alert
//! (annotation, or the configured True conditions) and temperature. The
//! label and annotation names of the policy are the constants here, and
//! [`service_identity`] is a pod's service (namespace + `app`, else
//! `app.kubernetes.io/name`). Facts that do not live on the Node object are
//! laid over these by the cache ([`provided`]).

pub mod provided;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{LABEL_ZONE, Node, Pod};
use crate::time::Millis;
use gpu_scheduler_model::field::ConfigError;
use provided::PrometheusFact;

pub const LABEL_GPU_MODEL: &str = "gpu-model";
pub const LABEL_GPU_PRODUCT: &str = "nvidia.com/gpu.product";
pub const LABEL_CLOUD: &str = "gpu-scheduler.io/cloud";
pub const LABEL_DISK_TYPE: &str = "disk-type";
pub const LABEL_MAINTENANCE: &str = "maintenance-mode";
pub const ANNOTATION_SPOT_EXPIRY: &str = "gpu-scheduler.io/spot-expiry";
pub const ANNOTATION_LAST_ALERT: &str = "gpu-scheduler.io/last-hardware-alert";
pub const ANNOTATION_TEMPERATURE: &str = "gpu-scheduler.io/temperature-celsius";
/// The pod label naming a pod's data class; `sensitive` keeps it private.
pub const LABEL_DATA_CLASS: &str = "gpu-scheduler.io/data-class";
/// The pod label naming its workload class (`training`, `inference`).
pub const LABEL_WORKLOAD: &str = "gpu-scheduler.io/workload";
pub const LABEL_APP: &str = "app";
pub const LABEL_APP_NAME: &str = "app.kubernetes.io/name";
pub use gpu_scheduler_model::gpu::GPU_RESOURCE;

/// The temperatures a node may report, in °C: outside, a reading is a
/// broken sensor, not a fact.
pub const CELSIUS: crate::bounds::Interval = crate::bounds::Interval::closed(-100.0, 300.0);

/// Which cloud a node is in (label `gpu-scheduler.io/cloud`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cloud {
    Private,
    Public,
}

impl Cloud {
    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Private => "private",
            Cloud::Public => "public",
        }
    }
}

/// How facts are read from nodes: the `nodeFacts` section of the
/// configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FactsConfig {
    /// Maps a word of `nvidia.com/gpu.product` (split at `-`, `_` and
    /// spaces, compared without case) to a model name. The first word of
    /// the product found in the table decides.
    #[serde(default = "default_gpu_models")]
    pub gpu_models: Vec<GpuModelAlias>,
    /// Node conditions that signal a hardware alert when True; the alert
    /// time is the condition's lastTransitionTime.
    #[serde(default)]
    pub hardware_alert_conditions: Vec<String>,
    /// Reasons of Warning Events on a Node that signal a hardware alert
    /// (`run` watches them; defaults: node-problem-detector's and
    /// NVIDIA XID-style reasons).
    #[serde(default = "default_alert_event_reasons")]
    pub hardware_alert_event_reasons: Vec<String>,
    /// Numeric node facts polled from Prometheus by `run`.
    #[serde(default)]
    pub prometheus: Vec<PrometheusFact>,
    /// DRA drivers whose devices are GPUs: a node's ResourceSlices of these
    /// drivers lay out its GPU devices (docs/POLICIES.md, "Dynamic Resource
    /// Allocation").
    #[serde(default = "default_dra_gpu_drivers")]
    pub dra_gpu_drivers: Vec<String>,
}

/// node-problem-detector's kernel monitor reasons that mean failing
/// hardware, and the reasons GPU health checkers give XID errors, ECC
/// errors and a GPU lost from the bus.
pub const DEFAULT_ALERT_EVENT_REASONS: &[&str] = &[
    "KernelOops",
    "MemoryReadError",
    "IOError",
    "Ext4Error",
    "FilesystemIsReadOnly",
    "TaskHung",
    "XidError",
    "GpuXidError",
    "NVIDIAXidError",
    "GpuEccError",
    "GpuFellOffBus",
    "GpuUnhealthy",
];

fn default_alert_event_reasons() -> Vec<String> {
    DEFAULT_ALERT_EVENT_REASONS.iter().map(|r| r.to_string()).collect()
}

fn default_dra_gpu_drivers() -> Vec<String> {
    vec!["gpu.nvidia.com".into()]
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuModelAlias {
    /// A word of the product name, e.g. `A100` or `Tesla`.
    pub product: String,
    /// The model it means, e.g. `a100`.
    pub model: String,
}

fn default_gpu_models() -> Vec<GpuModelAlias> {
    [
        ("A100", "a100"),
        ("H100", "h100"),
        ("H200", "h200"),
        ("B200", "b200"),
        ("GH200", "gh200"),
        ("A10", "a10"),
        ("A10G", "a10g"),
        ("A30", "a30"),
        ("A40", "a40"),
        ("L4", "l4"),
        ("L40", "l40"),
        ("L40S", "l40s"),
        ("T4", "t4"),
        ("V100", "v100"),
        ("P100", "p100"),
    ]
    .into_iter()
    .map(|(product, model)| GpuModelAlias { product: product.into(), model: model.into() })
    .collect()
}

impl Default for FactsConfig {
    fn default() -> Self {
        FactsConfig {
            gpu_models: default_gpu_models(),
            hardware_alert_conditions: Vec::new(),
            hardware_alert_event_reasons: default_alert_event_reasons(),
            prometheus: Vec::new(),
            dra_gpu_drivers: default_dra_gpu_drivers(),
        }
    }
}

impl FactsConfig {
    pub fn validate(&self, path: &str) -> Result<(), ConfigError> {
        for (i, a) in self.gpu_models.iter().enumerate() {
            if a.product.is_empty() || a.product.contains(['-', '_', ' ']) {
                return Err(ConfigError::new(
                    format!("{path}.gpuModels[{i}].product"),
                    "must be one word of the product name (no '-', '_' or spaces)",
                ));
            }
            if a.model.is_empty() {
                return Err(ConfigError::new(format!("{path}.gpuModels[{i}].model"), "must not be empty"));
            }
        }
        for (i, r) in self.hardware_alert_event_reasons.iter().enumerate() {
            if r.trim().is_empty() {
                return Err(ConfigError::new(format!("{path}.hardwareAlertEventReasons[{i}]"), "must not be empty"));
            }
        }
        let mut names = std::collections::HashSet::new();
        for (i, p) in self.prometheus.iter().enumerate() {
            let at = format!("{path}.prometheus[{i}]");
            p.validate(&at)?;
            if !names.insert(p.name.as_str()) {
                return Err(ConfigError::new(format!("{at}.name"), format!("{:?} is named twice", p.name)));
            }
        }
        Ok(())
    }

    /// The model a `nvidia.com/gpu.product` value names, if the table knows it.
    pub fn normalise_product(&self, product: &str) -> Option<&str> {
        product.split(['-', '_', ' ']).find_map(|word| {
            self.gpu_models.iter().find(|a| a.product.eq_ignore_ascii_case(word)).map(|a| a.model.as_str())
        })
    }
}

/// The typed facts of one node. Times are milliseconds since the Unix
/// epoch, the engine's clock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    /// Normalised, lower case (`a100`, `t4`).
    pub gpu_model: Option<Arc<str>>,
    pub cloud: Option<Cloud>,
    pub zone: Option<Arc<str>>,
    pub disk_type: Option<Arc<str>>,
    pub maintenance: bool,
    pub spot_expiry: Option<Millis>,
    pub last_hardware_alert: Option<Millis>,
    pub temperature_celsius: Option<f64>,
    /// Numeric facts provided from outside (`nodeFacts.prometheus`), by name.
    pub numbers: std::collections::BTreeMap<String, f64>,
}

/// A node value that could not be read; the fact is treated as absent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FactWarning {
    pub node: String,
    /// The label, annotation or condition read.
    pub key: String,
    pub value: String,
    pub message: String,
}

impl std::fmt::Display for FactWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "node {}: {} {:?}: {}; ignored", self.node, self.key, self.value, self.message)
    }
}

impl NodeFacts {
    /// Reads the facts of `node`; problems come back as warnings.
    pub fn of(node: &Node, cfg: &FactsConfig) -> (NodeFacts, Vec<FactWarning>) {
        let mut warnings = Vec::new();
        let mut warn = |key: &str, value: &str, message: String| {
            warnings.push(FactWarning { node: node.name.clone(), key: key.into(), value: value.into(), message });
        };
        let labels = &node.labels;
        let annotations = &node.annotations;

        let gpu_model = match (labels.get(LABEL_GPU_MODEL), labels.get(LABEL_GPU_PRODUCT)) {
            (Some(m), _) if !m.trim().is_empty() => Some(Arc::from(m.trim().to_ascii_lowercase())),
            (_, Some(product)) => {
                let model = cfg.normalise_product(product).map(Arc::from);
                if model.is_none() {
                    warn(LABEL_GPU_PRODUCT, product, "no word of it is in nodeFacts.gpuModels".into());
                }
                model
            }
            _ => None,
        };
        let cloud = labels.get(LABEL_CLOUD).and_then(|v| match v.as_str() {
            "private" => Some(Cloud::Private),
            "public" => Some(Cloud::Public),
            other => {
                warn(LABEL_CLOUD, other, "must be \"private\" or \"public\"".into());
                None
            }
        });
        let maintenance = match labels.get(LABEL_MAINTENANCE).map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                // Fail safe: an unreadable maintenance flag is not "in service".
                warn(LABEL_MAINTENANCE, other, "must be \"true\" or \"false\"; treated as true".into());
                true
            }
        };
        let mut time = |key: &str| -> Option<Millis> {
            let raw = annotations.get(key)?;
            match parse_time(raw) {
                Ok(t) => Some(t),
                Err(e) => {
                    warn(key, raw, e);
                    None
                }
            }
        };
        let spot_expiry = time(ANNOTATION_SPOT_EXPIRY);
        let annotated_alert = time(ANNOTATION_LAST_ALERT);
        let temperature_celsius =
            annotations.get(ANNOTATION_TEMPERATURE).and_then(|raw| match raw.trim().parse::<f64>() {
                Ok(t) if CELSIUS.contains(t) => Some(t),
                Ok(_) => {
                    warn(ANNOTATION_TEMPERATURE, raw, format!("not a plausible temperature: must be in {CELSIUS} °C"));
                    None
                }
                Err(_) => {
                    warn(ANNOTATION_TEMPERATURE, raw, "not a number".into());
                    None
                }
            });
        // Read with the devices (`NodeGpus`); only the warning is made here.
        if let (Err(e), Some(raw)) =
            (gpu_scheduler_model::gpu::gpu_memory_label(labels), labels.get(gpu_scheduler_model::gpu::LABEL_GPU_MEMORY))
        {
            warn(gpu_scheduler_model::gpu::LABEL_GPU_MEMORY, raw, e);
        }
        let condition_alert = node
            .conditions
            .iter()
            .filter(|c| c.status && cfg.hardware_alert_conditions.contains(&c.type_))
            .filter_map(|c| c.last_transition)
            .max();
        let facts = NodeFacts {
            gpu_model,
            cloud,
            zone: labels.get(LABEL_ZONE).map(|z| Arc::from(z.as_str())),
            disk_type: labels.get(LABEL_DISK_TYPE).map(|d| Arc::from(d.to_ascii_lowercase())),
            maintenance,
            spot_expiry,
            last_hardware_alert: annotated_alert.max(condition_alert),
            temperature_celsius,
            numbers: Default::default(),
        };
        (facts, warnings)
    }
}

/// What [`parse_time`] reads, for messages.
pub const TIME_RANGE: &str = "an RFC 3339 time from 1970 to 9999 (e.g. 2026-01-31T12:00:00Z)";

/// RFC 3339 → milliseconds since the epoch (the engine's clock starts in
/// 1970; RFC 3339 ends in 9999).
pub fn parse_time(raw: &str) -> Result<Millis, String> {
    let ts: jiff::Timestamp = raw.trim().parse().map_err(|_| format!("not {TIME_RANGE}"))?;
    Millis::try_from(ts.as_millisecond()).map_err(|_| format!("before 1970: must be {TIME_RANGE}"))
}

/// A pod's service: its namespace and `app` label, else
/// `app.kubernetes.io/name`. Pods without either belong to no service.
pub fn service_identity(pod: &Pod) -> Option<String> {
    let app = pod.labels.get(LABEL_APP).or_else(|| pod.labels.get(LABEL_APP_NAME))?;
    Some(format!("{}/{}", pod.namespace, app))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeCondition;
    use crate::testing::{node, pod};

    #[test]
    fn gpu_products_normalise_through_the_table() {
        let cfg = FactsConfig::default();
        let cases = [
            ("NVIDIA-A100-SXM4-80GB", Some("a100")),
            ("NVIDIA-H100-80GB-HBM3", Some("h100")),
            ("Tesla-T4", Some("t4")),
            ("NVIDIA-L4", Some("l4")),
            ("NVIDIA-L40S", Some("l40s")),
            ("NVIDIA-A10G", Some("a10g")),
            ("nvidia-a100-pcie-40gb", Some("a100")),
            ("Quadro-RTX-8000", None),
        ];
        for (product, want) in cases {
            assert_eq!(cfg.normalise_product(product), want, "{product}");
        }
    }

    #[test]
    fn facts_from_labels_and_annotations() {
        let n = node("n")
            .label(LABEL_GPU_PRODUCT, "NVIDIA-A100-SXM4-80GB")
            .label(LABEL_CLOUD, "private")
            .label(LABEL_ZONE, "zone-a")
            .label(LABEL_DISK_TYPE, "SSD")
            .annotation(ANNOTATION_SPOT_EXPIRY, "2026-01-01T10:00:00Z")
            .annotation(ANNOTATION_LAST_ALERT, "2026-01-01T09:00:00+01:00")
            .annotation(ANNOTATION_TEMPERATURE, "71.5")
            .build();
        let (f, warnings) = NodeFacts::of(&n, &FactsConfig::default());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(f.gpu_model.as_deref(), Some("a100"));
        assert_eq!(f.cloud, Some(Cloud::Private));
        assert_eq!(f.zone.as_deref(), Some("zone-a"));
        assert_eq!(f.disk_type.as_deref(), Some("ssd"));
        assert!(!f.maintenance);
        assert_eq!(f.spot_expiry, Some(1_767_261_600_000));
        assert_eq!(f.last_hardware_alert, Some(1_767_254_400_000), "offsets are honoured");
        assert_eq!(f.temperature_celsius, Some(71.5));

        // The gpu-model label wins over the product.
        let n = node("n").label(LABEL_GPU_MODEL, "T4").label(LABEL_GPU_PRODUCT, "NVIDIA-A100").build();
        assert_eq!(NodeFacts::of(&n, &FactsConfig::default()).0.gpu_model.as_deref(), Some("t4"));
    }

    #[test]
    fn malformed_values_are_absent_with_one_warning_each() {
        let n = node("n")
            .label(LABEL_CLOUD, "moon")
            .label(LABEL_GPU_PRODUCT, "Quadro-RTX-8000")
            .label(LABEL_MAINTENANCE, "yes")
            .annotation(ANNOTATION_SPOT_EXPIRY, "tomorrow")
            .annotation(ANNOTATION_LAST_ALERT, "")
            .annotation(ANNOTATION_TEMPERATURE, "hot")
            .label(gpu_scheduler_model::gpu::LABEL_GPU_MEMORY, "80GB")
            .build();
        let (f, warnings) = NodeFacts::of(&n, &FactsConfig::default());
        assert_eq!(
            (f.cloud, f.gpu_model, f.spot_expiry, f.last_hardware_alert, f.temperature_celsius),
            (None, None, None, None, None)
        );
        assert!(f.maintenance, "an unreadable maintenance flag keeps the node out");
        let mut keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                LABEL_CLOUD,
                ANNOTATION_LAST_ALERT,
                ANNOTATION_SPOT_EXPIRY,
                ANNOTATION_TEMPERATURE,
                LABEL_MAINTENANCE,
                gpu_scheduler_model::gpu::LABEL_GPU_MEMORY,
                LABEL_GPU_PRODUCT
            ]
        );
        assert_eq!(
            warnings.iter().find(|w| w.key == ANNOTATION_TEMPERATURE).unwrap().to_string(),
            "node n: gpu-scheduler.io/temperature-celsius \"hot\": not a number; ignored"
        );
    }

    #[test]
    fn alert_conditions_count_when_configured_and_true() {
        let cond = |type_: &str, status, at| NodeCondition { type_: type_.into(), status, last_transition: Some(at) };
        let mut n = node("n").build();
        n.conditions = vec![cond("GpuXidError", true, 5_000), cond("Ready", true, 9_000), cond("GpuEcc", false, 7_000)];
        let none = FactsConfig::default();
        assert_eq!(NodeFacts::of(&n, &none).0.last_hardware_alert, None);
        let cfg = FactsConfig {
            hardware_alert_conditions: vec!["GpuXidError".into(), "GpuEcc".into()],
            ..FactsConfig::default()
        };
        assert_eq!(NodeFacts::of(&n, &cfg).0.last_hardware_alert, Some(5_000));
    }

    #[test]
    fn service_identity_prefers_app() {
        let cases = [
            (pod("p").label("app", "web").label(LABEL_APP_NAME, "x").build(), Some("default/web")),
            (pod("p").label(LABEL_APP_NAME, "api").build(), Some("default/api")),
            (pod("p").build(), None),
        ];
        for (p, want) in cases {
            assert_eq!(service_identity(&p).as_deref(), want);
        }
    }
}
