//! Profiles: the plugins of one `schedulerName`, per extension point, built
//! from the defaults, the profile's `plugins` and `pluginConfig`, and the
//! registry. Merging follows kube-scheduler: `multiPoint` first, then each
//! point's own `disabled` (`*` = all) and `enabled` (weight overrides in
//! place, new plugins appended).
//!
//! A default plugin may bring args of its own (`DefaultPlugin::with_args`),
//! laid under the profile's `pluginConfig` field by field and dropped when
//! `multiPoint` disables the plugin. All profiles must share one QueueSort
//! plugin, since one queue serves them. A profile with `policySwitch` rules
//! carries one variant `Profile` per rule, built the same way with the
//! rule's `gpuPlacement` and weights laid over the profile's configuration.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{ConfigError, Configuration, PluginSet, ProfileConfig};
use crate::convert::label_selector;
use crate::devices::GpuPlacement;
use crate::framework::Plugin;
use crate::model::LabelSelector;
use crate::policy_switch::PolicySwitchConfig;
pub use crate::registry::DefaultPlugin;
use crate::registry::Registry;
use crate::starvation::StarvationGuardConfig;

pub type PluginRef = Arc<dyn Plugin>;

/// The plugins of one profile, in call order at each extension point.
#[derive(Clone)]
pub struct Profile {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Pods this profile takes (among those naming its schedulerName).
    pub pod_selector: Option<LabelSelector>,
    /// Nodes this profile may use; filter plugins read it from the
    /// cycle state (`CycleState::node_selector`).
    pub node_selector: Option<Arc<LabelSelector>>,
    /// The starvation guard's settings; None when it is off.
    pub starvation: Option<StarvationGuardConfig>,
    pub pre_enqueue: Vec<PluginRef>,
    pub queue_sort: PluginRef,
    pub pre_filter: Vec<PluginRef>,
    pub filter: Vec<PluginRef>,
    pub post_filter: Vec<PluginRef>,
    pub pre_score: Vec<PluginRef>,
    /// Score plugins with their weights.
    pub score: Vec<(PluginRef, f64)>,
    pub reserve: Vec<PluginRef>,
    pub permit: Vec<PluginRef>,
    pub pre_bind: Vec<PluginRef>,
    pub bind: Vec<PluginRef>,
    pub post_bind: Vec<PluginRef>,
    /// How GPU pods are placed (`gpuPlacement`): read by the GPU score
    /// plugins from the cycle state, and used to pick devices at assume.
    pub gpu_placement: GpuPlacement,
    /// How nodes with the same best score are chosen between (`tieBreak`).
    pub tie_break: crate::config::TieBreak,
    /// The profile as each `policySwitch` rule changes it; None without rules.
    pub policy_switch: Option<Arc<PolicySwitch>>,
    /// In such a variant, the rule it is built for.
    pub policy_rule: Option<String>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &[PluginRef]| v.iter().map(|p| p.name()).collect::<Vec<_>>();
        f.debug_struct("Profile")
            .field("scheduler_name", &self.scheduler_name)
            .field("filter", &names(&self.filter))
            .field("score", &self.score.iter().map(|(p, w)| (p.name(), *w)).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Profile {
    /// Every distinct plugin of the profile.
    pub fn plugins(&self) -> Vec<PluginRef> {
        let mut all: Vec<PluginRef> = Vec::new();
        let lists = [
            &self.pre_enqueue,
            &self.pre_filter,
            &self.filter,
            &self.post_filter,
            &self.pre_score,
            &self.reserve,
            &self.permit,
            &self.pre_bind,
            &self.bind,
            &self.post_bind,
        ];
        let mut push = |p: &PluginRef| {
            if !all.iter().any(|q| q.name() == p.name()) {
                all.push(p.clone());
            }
        };
        push(&self.queue_sort);
        for list in lists {
            list.iter().for_each(&mut push);
        }
        self.score.iter().for_each(|(p, _)| push(p));
        all
    }
}

/// Extension points, with the check that a plugin implements each.
type Implements = fn(&dyn Plugin) -> bool;
const POINTS: [(&str, Implements); 12] = [
    ("preEnqueue", |p| p.as_pre_enqueue().is_some()),
    ("queueSort", |p| p.as_queue_sort().is_some()),
    ("preFilter", |p| p.as_pre_filter().is_some()),
    ("filter", |p| p.as_filter().is_some()),
    ("postFilter", |p| p.as_post_filter().is_some()),
    ("preScore", |p| p.as_pre_score().is_some()),
    ("score", |p| p.as_score().is_some()),
    ("reserve", |p| p.as_reserve().is_some()),
    ("permit", |p| p.as_permit().is_some()),
    ("preBind", |p| p.as_pre_bind().is_some()),
    ("bind", |p| p.as_bind().is_some()),
    ("postBind", |p| p.as_post_bind().is_some()),
];

/// Builds every profile of `cfg`; all must agree on the queue sort plugin,
/// since one queue serves them all.
pub fn build_profiles(
    cfg: &Configuration,
    registry: &Registry,
    defaults: &[DefaultPlugin],
) -> Result<Vec<Profile>, ConfigError> {
    let profiles: Vec<Profile> = cfg
        .profiles
        .iter()
        .enumerate()
        .map(|(i, p)| build_profile(p, &format!("profiles[{i}]"), registry, defaults))
        .collect::<Result<_, _>>()?;
    if let Some(first) = profiles.first() {
        for (i, p) in profiles.iter().enumerate().skip(1) {
            if p.queue_sort.name() != first.queue_sort.name() {
                return Err(ConfigError::new(
                    format!("profiles[{i}].plugins.queueSort"),
                    "all profiles must use the same queue sort plugin",
                ));
            }
        }
    }
    Ok(profiles)
}

fn build_profile(
    cfg: &ProfileConfig,
    path: &str,
    registry: &Registry,
    defaults: &[DefaultPlugin],
) -> Result<Profile, ConfigError> {
    // Args by plugin name, checked against the registry.
    let mut args: BTreeMap<&str, (usize, serde_json::Value)> = BTreeMap::new();
    for (j, pc) in cfg.plugin_config.iter().enumerate() {
        if registry.get(&pc.name).is_none() {
            return Err(ConfigError::new(
                format!("{path}.pluginConfig[{j}].name"),
                format!("unknown plugin {:?}", pc.name),
            ));
        }
        args.insert(pc.name.as_str(), (j, strip_type_meta(&pc.args)));
    }
    let mut default_args: BTreeMap<&str, serde_json::Value> = BTreeMap::new();
    let dropped = |name: &str| cfg.plugins.multi_point.disabled.iter().any(|d| d.name == "*" || d.name == name);
    for d in defaults {
        let Some(text) = d.args.filter(|_| !dropped(d.name)) else { continue };
        let base: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            ConfigError::new(format!("{path}.pluginConfig"), format!("default args of {}: {e}", d.name))
        })?;
        default_args.insert(d.name, base);
    }
    let mut instances: BTreeMap<String, PluginRef> = BTreeMap::new();
    let mut instance = |name: &str, at: &str| -> Result<PluginRef, ConfigError> {
        if let Some(p) = instances.get(name) {
            return Ok(p.clone());
        }
        let factory = registry.get(name).ok_or_else(|| ConfigError::new(at, format!("unknown plugin {name:?}")))?;
        let (arg_path, value) = match (args.get(name), default_args.get(name)) {
            (Some((j, v)), base) => (format!("{path}.pluginConfig[{j}].args"), Some(under(base, v))),
            (None, Some(base)) => (format!("{path}.pluginConfig"), Some(base.clone())),
            (None, None) => (format!("{path}.pluginConfig"), None),
        };
        let plugin = factory(value.as_ref()).map_err(|e| {
            let p = if e.path.is_empty() { arg_path.clone() } else { format!("{arg_path}.{}", e.path) };
            ConfigError::new(p, e.message)
        })?;
        instances.insert(name.to_string(), plugin.clone());
        Ok(plugin)
    };
    // Build every plugin that has args, so bad args are reported even if the plugin is disabled.
    for name in args.keys() {
        instance(name, &format!("{path}.pluginConfig"))?;
    }

    let plugins_path = format!("{path}.plugins");
    let mut multi: Vec<(String, f64)> = defaults.iter().map(|d| (d.name.to_string(), d.weight)).collect();
    merge(&mut multi, &cfg.plugins.multi_point, &format!("{plugins_path}.multiPoint"), &mut |name, at| {
        instance(name, at).map(|_| ())
    })?;

    let mut lists: BTreeMap<&str, Vec<(PluginRef, f64)>> = BTreeMap::new();
    for ((point, implements), (cfg_point, set)) in POINTS.iter().zip(cfg.plugins.points().into_iter().skip(1)) {
        debug_assert_eq!(point, &cfg_point);
        let mut names: Vec<(String, f64)> = Vec::new();
        for (name, w) in &multi {
            let p = instance(name, &format!("{plugins_path}.multiPoint"))?;
            if implements(p.as_ref()) {
                names.push((name.clone(), *w));
            }
        }
        let at = format!("{plugins_path}.{point}");
        merge(&mut names, set, &at, &mut |name, at| {
            let p = instance(name, at)?;
            if implements(p.as_ref()) {
                Ok(())
            } else {
                Err(ConfigError::new(at, format!("plugin {name:?} does not implement the {point} extension point")))
            }
        })?;
        let resolved =
            names.into_iter().map(|(n, w)| instance(&n, &at).map(|p| (p, w))).collect::<Result<Vec<_>, _>>()?;
        lists.insert(point, resolved);
    }
    let mut score = lists.remove("score").unwrap_or_default();
    score.retain(|(_, w)| *w > 0.0);
    let mut take = |point: &str| -> Vec<PluginRef> {
        lists.remove(point).unwrap_or_default().into_iter().map(|(p, _)| p).collect()
    };
    let mut queue_sort = take("queueSort");
    if queue_sort.len() != 1 {
        return Err(ConfigError::new(
            format!("{plugins_path}.queueSort"),
            format!("exactly one queue sort plugin must be enabled, found {}", queue_sort.len()),
        ));
    }
    let bind = take("bind");
    if bind.is_empty() {
        return Err(ConfigError::new(format!("{plugins_path}.bind"), "at least one bind plugin must be enabled"));
    }
    let selector = |sel: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>, field: &str| {
        sel.as_ref()
            .map(|s| {
                label_selector(s, "").map_err(|e| ConfigError::new(format!("{path}.{field}{}", e.path), e.message))
            })
            .transpose()
    };
    let policy_switch = match &cfg.policy_switch {
        Some(ps) => Some(Arc::new(PolicySwitch {
            config: ps.clone(),
            variants: ps
                .rules
                .iter()
                .enumerate()
                .map(|(k, rule)| {
                    // The rule's weights go where the user would write them:
                    // after the profile's own score settings.
                    let mut variant = cfg.clone();
                    variant.policy_switch = None;
                    if let Some(p) = rule.gpu_placement {
                        variant.gpu_placement = p;
                    }
                    for (name, w) in &rule.weights {
                        variant
                            .plugins
                            .score
                            .enabled
                            .push(crate::config::PluginRef { name: name.clone(), weight: Some(*w) });
                    }
                    let mut built =
                        build_profile(&variant, &format!("{path}.policySwitch.rules[{k}]"), registry, defaults)?;
                    built.policy_rule = Some(rule.name.clone());
                    Ok(Arc::new(built))
                })
                .collect::<Result<_, _>>()?,
        })),
        None => None,
    };
    Ok(Profile {
        policy_switch,
        policy_rule: None,
        scheduler_name: cfg.scheduler_name.clone(),
        percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score,
        pod_selector: selector(&cfg.pod_selector, "podSelector")?,
        node_selector: selector(&cfg.node_selector, "nodeSelector")?.map(Arc::new),
        starvation: cfg.starvation_guard.enabled.then(|| cfg.starvation_guard.clone()),
        pre_enqueue: take("preEnqueue"),
        queue_sort: queue_sort.remove(0),
        pre_filter: take("preFilter"),
        filter: take("filter"),
        post_filter: take("postFilter"),
        pre_score: take("preScore"),
        score,
        reserve: take("reserve"),
        permit: take("permit"),
        pre_bind: take("preBind"),
        bind,
        post_bind: take("postBind"),
        gpu_placement: cfg.gpu_placement,
        tie_break: cfg.tie_break,
    })
}

/// Args copied from a kube-scheduler configuration may carry their own
/// `apiVersion` and `kind` (`NodeResourcesFitArgs`); they say nothing the
/// plugin name does not, so they are accepted and dropped.
fn strip_type_meta(args: &serde_json::Value) -> serde_json::Value {
    let mut args = args.clone();
    if let Some(obj) = args.as_object_mut() {
        obj.remove("apiVersion");
        obj.remove("kind");
    }
    args
}

/// `args` laid over the default profile's `base` args field by field;
/// args that are not an object replace the base whole (the plugin then
/// says what is wrong with them).
fn under(base: Option<&serde_json::Value>, args: &serde_json::Value) -> serde_json::Value {
    match (base, args) {
        (Some(serde_json::Value::Object(base)), serde_json::Value::Object(own)) => {
            let mut merged = base.clone();
            merged.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
            serde_json::Value::Object(merged)
        }
        _ => args.clone(),
    }
}

/// Applies one point's `disabled` then `enabled` to `list`.
fn merge(
    list: &mut Vec<(String, f64)>,
    set: &PluginSet,
    at: &str,
    check: &mut dyn FnMut(&str, &str) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    for (k, d) in set.disabled.iter().enumerate() {
        if d.name == "*" {
            list.clear();
        } else if list.iter().any(|(n, _)| *n == d.name) {
            list.retain(|(n, _)| *n != d.name);
        } else {
            check(&d.name, &format!("{at}.disabled[{k}].name"))?;
        }
    }
    for (k, e) in set.enabled.iter().enumerate() {
        check(&e.name, &format!("{at}.enabled[{k}].name"))?;
        match list.iter_mut().find(|(n, _)| *n == e.name) {
            Some(entry) => {
                entry.1 = e.weight.unwrap_or(if entry.1 == 0.0 { 1.0 } else { entry.1 });
            }
            None => list.push((e.name.clone(), e.weight.unwrap_or(1.0))),
        }
    }
    Ok(())
}

/// A profile's rules with the profile each one runs (built like the
/// profile, with the rule's placement and weights laid over it).
#[derive(Debug)]
pub struct PolicySwitch {
    pub config: PolicySwitchConfig,
    /// `variants[k]` is the profile while `config.rules[k]` is active.
    pub variants: Vec<Arc<Profile>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;
    use crate::registry::ArgsError;

    /// A plugin that refuses every args, naming them: the error shows
    /// what the profile gave it.
    fn probe(args: Option<&serde_json::Value>) -> Result<PluginRef, ArgsError> {
        Err(ArgsError::new("", args.map_or("none".to_string(), |a| a.to_string())))
    }

    const DEFAULTS: &[DefaultPlugin] = &[DefaultPlugin::new("Probe", 1.0).with_args(r#"{"a": 1, "b": 1}"#)];

    /// (case, profile YAML after `schedulerName`, what Probe receives, or
    /// None when it is not built at all)
    #[test]
    fn default_args_lie_under_the_profiles_own() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("defaults alone", "", Some(r#"{"a":1,"b":1}"#)),
            (
                "own args field by field over them",
                "\n  pluginConfig:\n  - name: Probe\n    args: {b: 2, c: 3}",
                Some(r#"{"a":1,"b":2,"c":3}"#),
            ),
            (
                "disabled at multiPoint and enabled again: no defaults",
                "\n  plugins:\n    multiPoint:\n      disabled: [{name: Probe}]\n      enabled: [{name: Probe}]",
                Some("none"),
            ),
            (
                "'*' drops the default list's args too",
                "\n  plugins:\n    multiPoint:\n      disabled: [{name: '*'}]\n      enabled: [{name: Probe}]\n  pluginConfig:\n  - name: Probe\n    args: {c: 3}",
                Some(r#"{"c":3}"#),
            ),
            ("disabled: not built", "\n  plugins:\n    multiPoint:\n      disabled: [{name: Probe}]", None),
        ];
        let mut registry = Registry::new();
        registry.register("Probe", probe);
        for (name, profile, want) in cases {
            let yaml = format!(
                "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- schedulerName: s{profile}\n"
            );
            let cfg = config::parse(&yaml).unwrap_or_else(|e| panic!("{name}: {e}"));
            let err = build_profiles(&cfg, &registry, DEFAULTS).err().unwrap_or_else(|| panic!("{name}: built"));
            match want {
                Some(args) => {
                    assert!(err.path.starts_with("profiles[0].pluginConfig"), "{name}: {err}");
                    assert_eq!(err.message, *args, "{name}");
                }
                None => assert!(err.message.contains("queue sort"), "{name}: {err}"),
            }
        }
    }
}
