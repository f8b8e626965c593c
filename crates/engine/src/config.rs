//! The configuration file (every field, with its default, in
//! `examples/config.yaml`): YAML shaped like kube-scheduler's
//! `KubeSchedulerConfiguration`. Loading validates everything and names the
//! offending field by its path (`profiles[1].plugins.score.enabled[0].weight`).
//!
//! Serde with `deny_unknown_fields` and kube-style defaults, plus the checks
//! serde cannot express; errors are [`ConfigError`] `{ path, message }`.
//! It knows nothing about which plugins exist (plugin args are checked when
//! the profiles are built). Device settings: `gpuShapes` (top level) and
//! each profile's `gpuPlacement`. Profiles' `podSelector` and `nodeSelector`
//! are k8s-openapi `LabelSelector`s, one of the few uses of k8s-openapi
//! outside `convert`.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use crate::devices::{GpuPlacement, GpuShapesConfig};
use crate::facts::FactsConfig;

pub const API_VERSION: &str = "gpu-scheduler.io/v1alpha1";
pub const KIND: &str = "GpuSchedulerConfiguration";
pub const DEFAULT_SCHEDULER_NAME: &str = "gpu-scheduler";

pub use gpu_scheduler_model::bounds::{MAX_SECONDS, MAX_WEIGHT, MIN_DURATION, WEIGHT};
pub use gpu_scheduler_model::field::ConfigError;

/// The most a Lease can hold: its `leaseDurationSeconds` is an int32.
pub const MAX_LEASE: Duration = Duration::from_secs(i32::MAX as u64);

/// Client rate limits: `qps` 0 (no limit) or in this range, `burst` up to
/// [`MAX_BURST`], so that the token bucket (whose period is 1/qps, and
/// whose depth is burst periods, in u64 nanoseconds) stays far from
/// overflowing.
pub const QPS: crate::bounds::Interval = crate::bounds::Interval::closed(MIN_QPS, MAX_QPS);
pub const MIN_QPS: f64 = 0.001;
pub const MAX_QPS: f64 = 1_000_000.0;
pub const MAX_BURST: u32 = 1_000_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Configuration {
    pub api_version: String,
    pub kind: String,
    /// 0 (the default) means kube-scheduler's adaptive percentage; 100 scores every node.
    #[serde(default)]
    pub percentage_of_nodes_to_score: u32,
    #[serde(default = "default_initial_backoff")]
    pub pod_initial_backoff_seconds: u64,
    #[serde(default = "default_max_backoff")]
    pub pod_max_backoff_seconds: u64,
    /// How long an assumed pod whose binding succeeded may wait for the
    /// API to show it bound before the cache forgets it (kube-scheduler's
    /// assumed-pod expiry); 0 keeps it until the API shows it.
    #[serde(default = "default_assumed_pod_ttl", rename = "assumedPodTTLSeconds")]
    pub assumed_pod_ttl_seconds: u64,
    #[serde(default)]
    pub client_connection: ClientConnection,
    #[serde(default)]
    pub leader_election: LeaderElection,
    #[serde(default = "default_profiles")]
    pub profiles: Vec<ProfileConfig>,
    /// How node labels and annotations are read as facts.
    #[serde(default)]
    pub node_facts: FactsConfig,
    /// HTTP extenders, in kube-scheduler's shape (`KubeSchedulerConfiguration.extenders`).
    #[serde(default)]
    pub extenders: Vec<ExtenderConfig>,
    /// How the typical GPU pod shapes (for the fragmentation measure) are learned.
    #[serde(default)]
    pub gpu_shapes: GpuShapesConfig,
    /// The spot rebalancer (`run`, leader only; `simulate` shows its plan).
    #[serde(default)]
    pub spot_drain: crate::spot_drain::SpotDrainConfig,
    /// Intent prediction: capacity held ahead of forecast GPU demand.
    #[serde(default)]
    pub forecast: crate::forecast::ForecastConfig,
}

/// One HTTP extender, kube-scheduler's `Extender` fields and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtenderConfig {
    /// Where the extender is, e.g. `http://127.0.0.1:8888/scheduler`.
    pub url_prefix: String,
    /// Path (after urlPrefix) of the filter call; empty: no filter.
    #[serde(default)]
    pub filter_verb: String,
    /// Accepted for kube's shape; preemption is not implemented, so never called.
    #[serde(default)]
    pub preempt_verb: String,
    #[serde(default)]
    pub prioritize_verb: String,
    /// Multiplies the extender's 0-10 priorities (which count ×10, as kube's do).
    #[serde(default)]
    pub weight: i64,
    /// The extender binds the pods it is interested in instead of the Bind plugins.
    #[serde(default)]
    pub bind_verb: String,
    #[serde(default, rename = "enableHTTPS")]
    pub enable_https: bool,
    #[serde(default)]
    pub tls_config: Option<ExtenderTlsConfig>,
    /// Per call; default 5 s, as kube's.
    #[serde(default = "default_extender_timeout", with = "go_duration", rename = "httpTimeout")]
    pub http_timeout: Duration,
    /// Send node names only: the extender keeps its own node cache.
    #[serde(default)]
    pub node_cache_capable: bool,
    /// When set, only pods requesting one of these resources are sent.
    #[serde(default)]
    pub managed_resources: Vec<ExtenderManagedResource>,
    /// An ignorable extender that fails is skipped; otherwise the pod is retried later.
    #[serde(default)]
    pub ignorable: bool,
}

fn default_extender_timeout() -> Duration {
    Duration::from_secs(5)
}

/// kube's `ExtenderTLSConfig`: files or inline PEM data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtenderTlsConfig {
    /// Skip verifying the server's certificate (testing only).
    #[serde(default)]
    pub insecure: bool,
    #[serde(default)]
    pub server_name: String,
    #[serde(default)]
    pub cert_file: String,
    #[serde(default)]
    pub key_file: String,
    #[serde(default, rename = "caFile")]
    pub ca_file: String,
    /// PEM, base64-encoded as in kube's YAML (`[]byte` fields).
    #[serde(default)]
    pub cert_data: String,
    #[serde(default)]
    pub key_data: String,
    #[serde(default, rename = "caData")]
    pub ca_data: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtenderManagedResource {
    pub name: String,
    /// Accepted for kube's shape: NodeResourcesFit's `ignoredResources` is where that is set here.
    #[serde(default)]
    pub ignored_by_scheduler: bool,
}

impl ExtenderConfig {
    fn validate(&self, path: &str) -> Result<(), ConfigError> {
        let url = self.url_prefix.trim();
        if url.is_empty() {
            return Err(ConfigError::new(format!("{path}.urlPrefix"), "must not be empty"));
        }
        let https = url.starts_with("https://");
        if !https && !url.starts_with("http://") {
            return Err(ConfigError::new(format!("{path}.urlPrefix"), "must start with http:// or https://"));
        }
        if https != self.enable_https {
            return Err(ConfigError::new(
                format!("{path}.enableHTTPS"),
                "must be true exactly when urlPrefix starts with https://",
            ));
        }
        if !self.prioritize_verb.is_empty() {
            // Its priorities count ten times their value times the weight: an i64 product.
            ConfigError::check(format!("{path}.weight"), crate::bounds::int(self.weight, 1, MAX_WEIGHT as i64))
                .map_err(|e| {
                    ConfigError::new(e.path, format!("must have a positive weight applied to it: {}", e.message))
                })?;
        }
        if self.filter_verb.is_empty() && self.prioritize_verb.is_empty() && self.bind_verb.is_empty() {
            return Err(ConfigError::new(path, "needs at least one of filterVerb, prioritizeVerb, bindVerb"));
        }
        ConfigError::check(
            format!("{path}.httpTimeout"),
            crate::bounds::duration(self.http_timeout, MIN_DURATION, crate::bounds::MAX_DURATION),
        )?;
        if self.tls_config.is_some() && !self.enable_https {
            return Err(ConfigError::new(format!("{path}.tlsConfig"), "needs enableHTTPS"));
        }
        let mut seen = std::collections::HashSet::new();
        for (j, r) in self.managed_resources.iter().enumerate() {
            let p = format!("{path}.managedResources[{j}].name");
            if !crate::resources::is_extended_resource_name(&r.name) {
                return Err(ConfigError::new(p, format!("{:?} is an invalid extended resource name", r.name)));
            }
            if !seen.insert(r.name.as_str()) {
                return Err(ConfigError::new(p, format!("{:?}: duplicate extender managed resource name", r.name)));
            }
        }
        Ok(())
    }
}

fn default_initial_backoff() -> u64 {
    1
}
fn default_max_backoff() -> u64 {
    10
}
/// kube-scheduler's last non-zero value, 15 min (its first, 30 s, expired
/// pods whose bound view was merely late). Long enough that a watch that
/// fell behind catches up first (`run` replaces a dead watch within a
/// minute), short enough that a lost event does not hold a node's room
/// for good.
fn default_assumed_pod_ttl() -> u64 {
    900
}
fn default_profiles() -> Vec<ProfileConfig> {
    vec![ProfileConfig::default()]
}

impl Default for Configuration {
    fn default() -> Self {
        Configuration {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            percentage_of_nodes_to_score: 0,
            pod_initial_backoff_seconds: default_initial_backoff(),
            pod_max_backoff_seconds: default_max_backoff(),
            assumed_pod_ttl_seconds: default_assumed_pod_ttl(),
            client_connection: ClientConnection::default(),
            leader_election: LeaderElection::default(),
            profiles: default_profiles(),
            node_facts: FactsConfig::default(),
            extenders: Vec::new(),
            gpu_shapes: GpuShapesConfig::default(),
            spot_drain: Default::default(),
            forecast: Default::default(),
        }
    }
}

/// Client-side rate limits towards the API server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClientConnection {
    #[serde(default = "default_qps")]
    pub qps: f32,
    #[serde(default = "default_burst")]
    pub burst: u32,
}

fn default_qps() -> f32 {
    50.0
}
fn default_burst() -> u32 {
    100
}

impl Default for ClientConnection {
    fn default() -> Self {
        ClientConnection { qps: default_qps(), burst: default_burst() }
    }
}

/// kube-scheduler's leader-election fields and defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaderElection {
    #[serde(default = "yes")]
    pub leader_elect: bool,
    #[serde(default = "default_lease", with = "go_duration")]
    pub lease_duration: Duration,
    #[serde(default = "default_renew", with = "go_duration")]
    pub renew_deadline: Duration,
    #[serde(default = "default_retry", with = "go_duration")]
    pub retry_period: Duration,
    #[serde(default = "default_lock")]
    pub resource_lock: String,
    #[serde(default = "default_lease_name")]
    pub resource_name: String,
    #[serde(default = "default_lease_namespace")]
    pub resource_namespace: String,
}

fn yes() -> bool {
    true
}
fn default_lease() -> Duration {
    Duration::from_secs(15)
}
fn default_renew() -> Duration {
    Duration::from_secs(10)
}
fn default_retry() -> Duration {
    Duration::from_secs(2)
}
fn default_lock() -> String {
    "leases".into()
}
fn default_lease_name() -> String {
    DEFAULT_SCHEDULER_NAME.into()
}
fn default_lease_namespace() -> String {
    "kube-system".into()
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            leader_elect: true,
            lease_duration: default_lease(),
            renew_deadline: default_renew(),
            retry_period: default_retry(),
            resource_lock: default_lock(),
            resource_name: default_lease_name(),
            resource_namespace: default_lease_namespace(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProfileConfig {
    #[serde(default = "default_scheduler_name")]
    pub scheduler_name: String,
    #[serde(default)]
    pub plugins: PluginsConfig,
    #[serde(default)]
    pub plugin_config: Vec<PluginConfig>,
    /// Overrides the global percentage for this profile.
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Only pods matching this selector are scheduled by this profile
    /// (canary releases); several profiles may then share a schedulerName.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// Only nodes matching this selector are used (the NodePool filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    /// Holding nodes for GPU pods that have waited too long.
    #[serde(default)]
    pub starvation_guard: crate::starvation::StarvationGuardConfig,
    /// How GPU pods are placed: `fragmentation`, `binpack` or `spread`
    /// (or `fgd`, the FGD paper's policy, a reference).
    #[serde(default)]
    pub gpu_placement: GpuPlacement,
    /// How nodes with the same best score are chosen between.
    #[serde(default)]
    pub tie_break: TieBreak,
    /// Other placements and weights, picked by the cluster's load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_switch: Option<crate::policy_switch::PolicySwitchConfig>,
}

fn default_scheduler_name() -> String {
    DEFAULT_SCHEDULER_NAME.into()
}

impl Default for ProfileConfig {
    fn default() -> Self {
        ProfileConfig {
            scheduler_name: default_scheduler_name(),
            plugins: PluginsConfig::default(),
            plugin_config: Vec::new(),
            percentage_of_nodes_to_score: None,
            pod_selector: None,
            node_selector: None,
            starvation_guard: crate::starvation::StarvationGuardConfig::default(),
            gpu_placement: GpuPlacement::default(),
            tie_break: TieBreak::default(),
            policy_switch: None,
        }
    }
}

/// How the nodes with the best total score are chosen between (a
/// profile's `tieBreak`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TieBreak {
    /// Uniformly at random, per decision (kube-scheduler's selectHost).
    #[default]
    Random,
    /// The node first in an order drawn once from the seed, the same for
    /// every decision: the FGD paper's simulator prefixes each node's name
    /// with its place in a seeded permutation and breaks ties by name.
    NodeOrder,
}

/// Plugins enabled and disabled per extension point; `multiPoint` applies
/// to every point a plugin implements.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginsConfig {
    #[serde(default)]
    pub multi_point: PluginSet,
    #[serde(default)]
    pub pre_enqueue: PluginSet,
    #[serde(default)]
    pub queue_sort: PluginSet,
    #[serde(default)]
    pub pre_filter: PluginSet,
    #[serde(default)]
    pub filter: PluginSet,
    #[serde(default)]
    pub post_filter: PluginSet,
    #[serde(default)]
    pub pre_score: PluginSet,
    #[serde(default)]
    pub score: PluginSet,
    #[serde(default)]
    pub reserve: PluginSet,
    #[serde(default)]
    pub permit: PluginSet,
    #[serde(default)]
    pub pre_bind: PluginSet,
    #[serde(default)]
    pub bind: PluginSet,
    #[serde(default)]
    pub post_bind: PluginSet,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginSet {
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// `name: "*"` disables every default plugin of the point.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginRef {
    pub name: String,
    /// Score weight; positive. Absent means the default (or 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginConfig {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Value,
}

/// Parses a configuration from YAML and checks the parts that need no
/// plugin registry. Profiles are checked against the registry when built
/// (the profile module's `build_profiles`).
pub fn parse(yaml: &str) -> Result<Configuration, ConfigError> {
    let de = serde_yaml_ng::Deserializer::from_str(yaml);
    let cfg: Configuration = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        // An empty key at the top names no field either (found by fuzzing).
        let path = if path == "." || path.is_empty() { "(root)".to_string() } else { path };
        // The YAML error may already start with the path, or its parent's
        // (for a field with its own deserializer); say the full one once.
        let message = e.into_inner().to_string();
        let message = match message.split_once(": ") {
            Some((head, rest)) if !head.is_empty() && path.starts_with(head) => rest.to_string(),
            _ => message,
        };
        ConfigError::new(path, crate::bounds::with_type_range(message))
    })?;
    cfg.validate()?;
    Ok(cfg)
}

impl Configuration {
    /// The settings of `new` that differ from `self` and that a running
    /// scheduler applies only when it restarts (its connections, its
    /// election, and what its cache derived from node objects and pods).
    pub fn restart_needed(&self, new: &Configuration) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.client_connection != new.client_connection {
            fields.push("clientConnection");
        }
        if self.leader_election != new.leader_election {
            fields.push("leaderElection");
        }
        if self.node_facts != new.node_facts {
            fields.push("nodeFacts");
        }
        if self.gpu_shapes != new.gpu_shapes {
            fields.push("gpuShapes");
        }
        // The forecast's history is learned under its window and history.
        if self.forecast != new.forecast {
            fields.push("forecast");
        }
        fields
    }

    /// Field checks that serde's types cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.api_version != API_VERSION {
            return Err(ConfigError::new("apiVersion", format!("must be {API_VERSION:?}, not {:?}", self.api_version)));
        }
        if self.kind != KIND {
            return Err(ConfigError::new("kind", format!("must be {KIND:?}, not {:?}", self.kind)));
        }
        use crate::bounds::int;
        check_percentage("percentageOfNodesToScore", self.percentage_of_nodes_to_score)?;
        let initial = self.pod_initial_backoff_seconds;
        ConfigError::check("podInitialBackoffSeconds", int(initial, 1, MAX_SECONDS))?;
        ConfigError::check("podMaxBackoffSeconds", int(self.pod_max_backoff_seconds, initial, MAX_SECONDS))
            .map_err(|e| ConfigError::new(e.path, format!("{} (at least podInitialBackoffSeconds)", e.message)))?;
        ConfigError::check("assumedPodTTLSeconds", int(self.assumed_pod_ttl_seconds, 0, MAX_SECONDS))?;
        let cc = &self.client_connection;
        // -0 is 0 too.
        if cc.qps != 0.0 && !QPS.contains(f64::from(cc.qps)) {
            return Err(ConfigError::new(
                "clientConnection.qps",
                format!("must be 0 (no limit) or in {QPS}, got {}", crate::bounds::show(f64::from(cc.qps))),
            ));
        }
        ConfigError::check("clientConnection.burst", int(cc.burst, 0, MAX_BURST))?;
        self.leader_election.validate()?;
        for (i, e) in self.extenders.iter().enumerate() {
            e.validate(&format!("extenders[{i}]"))?;
        }
        if self.extenders.iter().filter(|e| !e.bind_verb.is_empty()).count() > 1 {
            return Err(ConfigError::new("extenders", "only one extender can implement bind"));
        }
        if self.profiles.is_empty() {
            return Err(ConfigError::new("profiles", "at least one profile is required"));
        }
        self.node_facts.validate("nodeFacts")?;
        self.gpu_shapes.validate("gpuShapes")?;
        self.spot_drain.validate("spotDrain")?;
        self.forecast.validate("forecast")?;
        // A schedulerName may repeat only after profiles that select pods:
        // a profile without podSelector takes every remaining pod.
        let mut catch_all = HashSet::new();
        for (i, p) in self.profiles.iter().enumerate() {
            let path = format!("profiles[{i}]");
            if p.scheduler_name.is_empty() {
                return Err(ConfigError::new(format!("{path}.schedulerName"), "must not be empty"));
            }
            if catch_all.contains(p.scheduler_name.as_str()) {
                return Err(ConfigError::new(
                    format!("{path}.schedulerName"),
                    format!(
                        "duplicate schedulerName {:?}: an earlier profile without podSelector already takes its pods",
                        p.scheduler_name
                    ),
                ));
            }
            if p.pod_selector.is_none() {
                catch_all.insert(p.scheduler_name.as_str());
            }
            for (field, sel) in [("podSelector", &p.pod_selector), ("nodeSelector", &p.node_selector)] {
                if let Some(sel) = sel {
                    crate::convert::label_selector(sel, "")
                        .map_err(|e| ConfigError::new(format!("{path}.{field}{}", e.path), e.message))?;
                }
            }
            if let Some(pct) = p.percentage_of_nodes_to_score {
                check_percentage(&format!("{path}.percentageOfNodesToScore"), pct)?;
            }
            p.starvation_guard.validate(&format!("{path}.starvationGuard"))?;
            p.plugins.validate_weights(&format!("{path}.plugins"))?;
            if let Some(ps) = &p.policy_switch {
                ps.validate(&format!("{path}.policySwitch"))?;
            }
            let mut seen = HashSet::new();
            for (j, pc) in p.plugin_config.iter().enumerate() {
                if !seen.insert(pc.name.as_str()) {
                    return Err(ConfigError::new(
                        format!("{path}.pluginConfig[{j}].name"),
                        format!("duplicate pluginConfig for plugin {:?}", pc.name),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_percentage(path: &str, v: u32) -> Result<(), ConfigError> {
    if v > 100 {
        return Err(ConfigError::new(path, format!("must be between 0 and 100, got {v}")));
    }
    Ok(())
}

impl LeaderElection {
    fn validate(&self) -> Result<(), ConfigError> {
        let p = "leaderElection";
        for (field, d, max) in [
            ("leaseDuration", self.lease_duration, MAX_LEASE),
            ("renewDeadline", self.renew_deadline, crate::bounds::MAX_DURATION),
            ("retryPeriod", self.retry_period, crate::bounds::MAX_DURATION),
        ] {
            ConfigError::check(format!("{p}.{field}"), crate::bounds::duration(d, MIN_DURATION, max))?;
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::new(
                format!("{p}.leaseDuration"),
                format!("must be greater than renewDeadline ({})", go_duration::format(&self.renew_deadline)),
            ));
        }
        if self.resource_lock != "leases" {
            return Err(ConfigError::new(
                format!("{p}.resourceLock"),
                format!("only \"leases\" is supported, not {:?}", self.resource_lock),
            ));
        }
        if self.resource_name.is_empty() {
            return Err(ConfigError::new(format!("{p}.resourceName"), "must not be empty"));
        }
        if self.resource_namespace.is_empty() {
            return Err(ConfigError::new(format!("{p}.resourceNamespace"), "must not be empty"));
        }
        Ok(())
    }
}

impl PluginsConfig {
    /// Extension points in a fixed order, with their config field names.
    pub fn points(&self) -> [(&'static str, &PluginSet); 13] {
        [
            ("multiPoint", &self.multi_point),
            ("preEnqueue", &self.pre_enqueue),
            ("queueSort", &self.queue_sort),
            ("preFilter", &self.pre_filter),
            ("filter", &self.filter),
            ("postFilter", &self.post_filter),
            ("preScore", &self.pre_score),
            ("score", &self.score),
            ("reserve", &self.reserve),
            ("permit", &self.permit),
            ("preBind", &self.pre_bind),
            ("bind", &self.bind),
            ("postBind", &self.post_bind),
        ]
    }

    fn validate_weights(&self, path: &str) -> Result<(), ConfigError> {
        for (point, set) in self.points() {
            for (k, p) in set.enabled.iter().enumerate() {
                let at = format!("{path}.{point}.enabled[{k}]");
                if p.name.is_empty() {
                    return Err(ConfigError::new(format!("{at}.name"), "must not be empty"));
                }
                if let Some(w) = p.weight {
                    if !WEIGHT.contains(w) {
                        return Err(ConfigError::new(
                            format!("{at}.weight"),
                            format!(
                                "must be in {WEIGHT}, got {} (disable the plugin instead of weighting it 0)",
                                crate::bounds::show(w)
                            ),
                        ));
                    }
                    if point != "score" && point != "multiPoint" {
                        return Err(ConfigError::new(format!("{at}.weight"), "weights apply only to score plugins"));
                    }
                }
            }
            // Ignored on a disabled plugin, but read all the same: checked alike.
            for (k, p) in set.disabled.iter().enumerate() {
                if let Some(w) = p.weight.filter(|w| !WEIGHT.contains(*w)) {
                    return Err(ConfigError::new(
                        format!("{path}.{point}.disabled[{k}].weight"),
                        format!("must be in {WEIGHT}, got {}", crate::bounds::show(w)),
                    ));
                }
            }
        }
        Ok(())
    }
}

pub use gpu_scheduler_model::go_duration;

/// A label map helper for configs written as `key: value` maps.
pub type StringMap = BTreeMap<String, String>;

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\n";

    #[test]
    fn defaults_when_minimal() {
        let cfg = parse(HEAD).unwrap();
        assert_eq!(cfg, Configuration::default());
        assert_eq!(cfg.leader_election.lease_duration, Duration::from_secs(15));
        assert_eq!(cfg.profiles[0].scheduler_name, "gpu-scheduler");
    }

    /// The FGD reference's settings (bench/openb/fgd-config.yaml).
    #[test]
    fn fgd_reference_settings() {
        let yaml =
            format!("{HEAD}gpuShapes:\n  learnFrom: workload\nprofiles:\n- gpuPlacement: fgd\n  tieBreak: nodeOrder\n");
        let cfg = parse(&yaml).unwrap();
        assert_eq!(cfg.gpu_shapes.learn_from, crate::devices::shapes::LearnFrom::Workload);
        assert_eq!(
            (cfg.profiles[0].gpu_placement, cfg.profiles[0].tie_break),
            (GpuPlacement::Fgd, TieBreak::NodeOrder)
        );
        let defaults = Configuration::default();
        assert_eq!(defaults.gpu_shapes.learn_from, crate::devices::shapes::LearnFrom::Arrivals);
        assert_eq!(defaults.profiles[0].tie_break, TieBreak::Random);
    }

    #[test]
    fn errors_name_the_field() {
        let cases: &[(&str, &str, &str)] = &[
            ("unknown top-level field", "bogus: 1\n", "bogus"),
            ("empty top-level key", "\"\": 1\n", "(root)"),
            ("wrong apiVersion", "", "apiVersion"),
            ("percentage over 100", "percentageOfNodesToScore: 101\n", "percentageOfNodesToScore"),
            ("non-numeric percentage", "percentageOfNodesToScore: lots\n", "percentageOfNodesToScore"),
            (
                "non-numeric weight",
                "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: X\n        weight: heavy\n",
                "profiles[0].plugins.score.enabled[0].weight",
            ),
            (
                "negative weight",
                "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: X\n        weight: -1\n",
                "profiles[0].plugins.score.enabled[0].weight",
            ),
            (
                "weight outside score",
                "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: X\n        weight: 2\n",
                "profiles[0].plugins.filter.enabled[0].weight",
            ),
            (
                "duplicate schedulerName",
                "profiles:\n- schedulerName: a\n- schedulerName: a\n",
                "profiles[1].schedulerName",
            ),
            ("unknown profile field", "profiles:\n- schedulerNam: a\n", "profiles[0]"),
            ("unknown tie-break", "profiles:\n- tieBreak: first\n", "profiles[0].tieBreak"),
            ("unknown placement", "profiles:\n- gpuPlacement: fgdx\n", "profiles[0].gpuPlacement"),
            ("unknown shapes source", "gpuShapes:\n  learnFrom: future\n", "gpuShapes.learnFrom"),
            ("bad duration", "leaderElection:\n  leaseDuration: soon\n", "leaderElection.leaseDuration"),
            (
                "renew not below lease",
                "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n",
                "leaderElection.leaseDuration",
            ),
            ("resource lock", "leaderElection:\n  resourceLock: endpoints\n", "leaderElection.resourceLock"),
            (
                "duplicate pluginConfig",
                "profiles:\n- pluginConfig:\n  - name: A\n  - name: A\n",
                "profiles[0].pluginConfig[1].name",
            ),
            ("no profiles", "profiles: []\n", "profiles"),
            (
                "schedulerName after a catch-all profile",
                "profiles:\n- schedulerName: a\n- schedulerName: a\n  podSelector:\n    matchLabels: {x: y}\n",
                "profiles[1].schedulerName",
            ),
            (
                "bad podSelector operator",
                "profiles:\n- podSelector:\n    matchExpressions:\n    - {key: a, operator: Near}\n",
                "profiles[0].podSelector.matchExpressions[0]",
            ),
            (
                "nodeSelector In without values",
                "profiles:\n- nodeSelector:\n    matchExpressions:\n    - {key: a, operator: In}\n",
                "profiles[0].nodeSelector.matchExpressions[0]",
            ),
            ("unknown nodeFacts field", "nodeFacts:\n  gpuModel: []\n", "nodeFacts"),
            (
                "held share over 1",
                "profiles:\n- starvationGuard:\n    maxHeldShare: 1.5\n",
                "profiles[0].starvationGuard.maxHeldShare",
            ),
            (
                "starvation guard after 0",
                "profiles:\n- starvationGuard:\n    after: 0s\n",
                "profiles[0].starvationGuard.after",
            ),
            (
                "GPU alias with a dash",
                "nodeFacts:\n  gpuModels:\n  - {product: A100-SXM4, model: a100}\n",
                "nodeFacts.gpuModels[0].product",
            ),
        ];
        for (name, body, path) in cases {
            let yaml = if *name == "wrong apiVersion" {
                "apiVersion: v1\nkind: GpuSchedulerConfiguration\n".to_string()
            } else {
                format!("{HEAD}{body}")
            };
            let err = parse(&yaml).expect_err(name);
            assert!(err.path.starts_with(path), "{name}: got {err}");
        }
    }

    #[test]
    fn canary_profiles_may_share_a_scheduler_name() {
        let yaml = format!(
            "{HEAD}profiles:\n- schedulerName: a\n  podSelector:\n    matchLabels: {{scheduler-group: experimental}}\n  nodeSelector:\n    matchLabels: {{scheduler-canary: enabled}}\n- schedulerName: a\n"
        );
        let cfg = parse(&yaml).unwrap();
        assert_eq!(cfg.profiles.len(), 2);
        assert!(cfg.profiles[0].pod_selector.is_some() && cfg.profiles[1].pod_selector.is_none());
    }

    #[test]
    fn durations() {
        for (s, ms) in [("15s", 15_000), ("1m30s", 90_000), ("500ms", 500), ("1.5s", 1500), ("2h", 7_200_000), ("0", 0)]
        {
            assert_eq!(go_duration::parse(s).unwrap().as_millis(), ms, "{s}");
        }
        for s in ["", "s", "10", "10x", "-1s"] {
            assert!(go_duration::parse(s).is_err(), "{s}");
        }
    }
}
