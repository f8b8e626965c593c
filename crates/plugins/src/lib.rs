//! gpu-scheduler's plugins, one module per decision. Each module exports
//! `NAME` and a `new` factory; [`registry`] registers them all.
//! [`default_plugins`] is the default profile (the seed's policy,
//! DESIGN.md §4); [`standard_plugins`] is kube-scheduler's own default set,
//! for users who want its behaviour and for tests of its semantics.

use framework::registry::DefaultPlugin;
use framework::registry::Registry;

pub mod balanced_allocation;
pub mod cel_rules;
pub mod cloud_boundary;
pub mod default_binder;
pub mod default_preemption;
pub mod disk_type;
pub mod dynamic_resources;
pub mod fgd_score;
pub mod gpu_binpack;
pub mod gpu_device_fit;
pub mod gpu_fragmentation;
pub mod gpu_model;
pub mod gpu_node_avoidance;
pub mod gpu_slice_packing;
pub mod helper;
pub mod inter_pod_affinity;
pub mod maintenance;
pub mod node_affinity;
pub mod node_health;
pub mod node_name;
pub mod node_pool;
pub mod node_ports;
pub mod node_resources_fit;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod pod_topology_spread;
pub mod priority_sort;
pub mod queue_quota;
pub mod reservation_buffer;
pub mod resource_allocation;
pub mod resource_headroom;
pub mod scheduling_gates;
pub mod spot_expiry;
pub mod taint_toleration;
pub mod temperature;
pub mod volume_binding;
pub mod volume_restrictions;
pub mod volume_zone;
pub mod volumes;
pub mod zone_spread;

/// Every built-in plugin by name.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register(scheduling_gates::NAME, scheduling_gates::new);
    r.register(priority_sort::NAME, priority_sort::new);
    r.register(node_unschedulable::NAME, node_unschedulable::new);
    r.register(node_name::NAME, node_name::new);
    r.register(taint_toleration::NAME, taint_toleration::new);
    r.register(node_affinity::NAME, node_affinity::new);
    r.register(node_ports::NAME, node_ports::new);
    r.register(node_resources_fit::NAME, node_resources_fit::new);
    r.register(volume_restrictions::NAME, volume_restrictions::new);
    r.register(node_volume_limits::NAME, node_volume_limits::new);
    r.register(volume_binding::NAME, volume_binding::new);
    r.register(volume_zone::NAME, volume_zone::new);
    r.register(dynamic_resources::NAME, dynamic_resources::new);
    r.register(pod_topology_spread::NAME, pod_topology_spread::new);
    r.register(inter_pod_affinity::NAME, inter_pod_affinity::new);
    r.register(balanced_allocation::NAME, balanced_allocation::new);
    r.register(default_preemption::NAME, default_preemption::new);
    r.register(default_binder::NAME, default_binder::new);
    r.register(maintenance::NAME, maintenance::new);
    r.register(queue_quota::NAME, queue_quota::new);
    r.register(node_pool::NAME, node_pool::new);
    r.register(spot_expiry::NAME, spot_expiry::new);
    r.register(temperature::NAME, temperature::new);
    r.register(node_health::NAME, node_health::new);
    r.register(reservation_buffer::NAME, reservation_buffer::new);
    r.register(cloud_boundary::NAME, cloud_boundary::new);
    r.register(zone_spread::NAME, zone_spread::new);
    r.register(gpu_model::NAME, gpu_model::new);
    r.register(gpu_node_avoidance::NAME, gpu_node_avoidance::new);
    r.register(resource_headroom::NAME, resource_headroom::new);
    r.register(disk_type::NAME, disk_type::new);
    r.register(cel_rules::NAME, cel_rules::new);
    r.register(gpu_device_fit::NAME, gpu_device_fit::new);
    r.register(gpu_fragmentation::NAME, gpu_fragmentation::new);
    r.register(gpu_binpack::NAME, gpu_binpack::new);
    r.register(gpu_slice_packing::NAME, gpu_slice_packing::new);
    r.register(fgd_score::NAME, fgd_score::new);
    r
}

/// The default profile: the seed's policy (DESIGN.md §4). Cheap filters
/// that reject whole classes of nodes run first; kube-scheduler's scores
/// keep their ratios, scaled by 1/10 to sit beside the policy weights.
/// NodeResourcesFit filters but does not score (weight 0): ResourceHeadroom
/// is the article's version of its LeastAllocated score. The GPU placement
/// scores (one of them acts per pod, by the profile's `gpuPlacement` and
/// the request) weigh more than headroom and less than the GPU model.
pub fn default_plugins() -> Vec<DefaultPlugin> {
    let p = DefaultPlugin::new;
    vec![
        p(scheduling_gates::NAME, 1.0),
        p(priority_sort::NAME, 1.0),
        p(node_unschedulable::NAME, 1.0),
        p(node_name::NAME, 1.0),
        p(maintenance::NAME, 1.0),
        p(node_pool::NAME, 1.0),
        p(spot_expiry::NAME, 1.0),
        p(temperature::NAME, 0.2),
        p(node_health::NAME, 1.0),
        p(taint_toleration::NAME, 0.3),
        p(node_affinity::NAME, 0.2),
        p(node_ports::NAME, 1.0),
        p(node_resources_fit::NAME, 0.0),
        p(gpu_device_fit::NAME, 1.0),
        p(volume_restrictions::NAME, 1.0),
        p(node_volume_limits::NAME, 1.0),
        p(volume_binding::NAME, 1.0),
        p(volume_zone::NAME, 1.0),
        p(dynamic_resources::NAME, 0.2),
        p(reservation_buffer::NAME, 1.0),
        p(cloud_boundary::NAME, 1.0),
        p(pod_topology_spread::NAME, 0.2),
        p(inter_pod_affinity::NAME, 0.2),
        // Last of the filters: when it refuses, the others' PreFilter
        // state is there for its reclaim to try nodes with.
        p(queue_quota::NAME, 1.0),
        // Spreads cpu only where no GPUs are at stake (ResourceHeadroom does
        // so by default; kube's profile keeps the plain score).
        p(balanced_allocation::NAME, 0.1).with_args(r#"{"gpuAware": true}"#),
        p(zone_spread::NAME, 0.3),
        p(gpu_model::NAME, 0.4),
        p(gpu_fragmentation::NAME, GPU_PLACEMENT_WEIGHT),
        p(gpu_binpack::NAME, GPU_PLACEMENT_WEIGHT),
        p(gpu_slice_packing::NAME, GPU_PLACEMENT_WEIGHT),
        p(gpu_node_avoidance::NAME, 0.4),
        p(resource_headroom::NAME, 0.3),
        p(disk_type::NAME, 0.1),
        p(default_preemption::NAME, 1.0),
        p(default_binder::NAME, 1.0),
    ]
}

/// Weight of the GPU placement scores: above ResourceHeadroom (0.3),
/// below GpuModel (0.4).
pub const GPU_PLACEMENT_WEIGHT: f64 = 0.35;

/// kube-scheduler's default plugins (all but ImageLocality), in its
/// order, with its score weights.
pub fn standard_plugins() -> Vec<DefaultPlugin> {
    let p = DefaultPlugin::new;
    vec![
        p(scheduling_gates::NAME, 1.0),
        p(priority_sort::NAME, 1.0),
        p(node_unschedulable::NAME, 1.0),
        p(node_name::NAME, 1.0),
        p(taint_toleration::NAME, 3.0),
        p(node_affinity::NAME, 2.0),
        p(node_ports::NAME, 1.0),
        p(node_resources_fit::NAME, 1.0),
        p(volume_restrictions::NAME, 1.0),
        p(node_volume_limits::NAME, 1.0),
        p(volume_binding::NAME, 1.0),
        p(volume_zone::NAME, 1.0),
        p(pod_topology_spread::NAME, 2.0),
        p(inter_pod_affinity::NAME, 2.0),
        p(dynamic_resources::NAME, 2.0),
        p(balanced_allocation::NAME, 1.0),
        p(default_preemption::NAME, 1.0),
        p(default_binder::NAME, 1.0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::config::{self, Configuration};
    use engine::profile::build_profiles;

    #[test]
    fn default_profile_is_the_seeds_policy() {
        let profiles = build_profiles(&Configuration::default(), &registry(), &default_plugins()).unwrap();
        let p = &profiles[0];
        assert_eq!(p.queue_sort.name(), "PrioritySort");
        let scores: Vec<(&str, f64)> = p.score.iter().map(|(p, w)| (p.name(), *w)).collect();
        assert_eq!(
            scores,
            [
                ("Temperature", 0.2),
                ("NodeHealth", 1.0),
                ("TaintToleration", 0.3),
                ("NodeAffinity", 0.2),
                ("DynamicResources", 0.2),
                ("PodTopologySpread", 0.2),
                ("InterPodAffinity", 0.2),
                ("NodeResourcesBalancedAllocation", 0.1),
                ("ZoneSpread", 0.3),
                ("GpuModel", 0.4),
                ("GpuFragmentation", 0.35),
                ("GpuBinpack", 0.35),
                ("GpuSlicePacking", 0.35),
                ("GpuNodeAvoidance", 0.4),
                ("ResourceHeadroom", 0.3),
                ("DiskType", 0.1),
            ]
        );
        let filters: Vec<&str> = p.filter.iter().map(|p| p.name()).collect();
        assert_eq!(
            filters,
            [
                "NodeUnschedulable",
                "NodeName",
                "Maintenance",
                "NodePool",
                "SpotExpiry",
                "Temperature",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "GpuDeviceFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "DynamicResources",
                "ReservationBuffer",
                "CloudBoundary",
                "PodTopologySpread",
                "InterPodAffinity",
                "QueueQuota"
            ]
        );
        assert_eq!(p.bind.len(), 1);
    }

    /// Every registered plugin is in the default profile, so none is dead
    /// code, but CelRules: without rules of the user's it has nothing to
    /// do; and FgdScore, a reference enabled by its own configuration
    /// (bench/openb/fgd-config.yaml), not a policy.
    #[test]
    fn every_registered_plugin_is_in_the_default_profile() {
        let defaults: Vec<&str> = default_plugins().iter().map(|d| d.name).collect();
        let extra = [cel_rules::NAME, fgd_score::NAME];
        let mut names: Vec<&str> = registry().names().filter(|n| !extra.contains(n)).collect();
        names.sort();
        let mut want = defaults.clone();
        want.sort();
        assert_eq!(names, want);
    }

    /// Re-enabling NodeResourcesFit's score without a weight gives it 1.
    #[test]
    fn a_filter_only_default_can_be_given_its_score() {
        let yaml = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodeResourcesFit\n";
        let cfg = config::parse(yaml).unwrap();
        let p = &build_profiles(&cfg, &registry(), &default_plugins()).unwrap()[0];
        assert_eq!(p.score.iter().find(|(p, _)| p.name() == "NodeResourcesFit").map(|(_, w)| *w), Some(1.0));
    }

    #[test]
    fn standard_profile_has_kube_weights() {
        let profiles = build_profiles(&Configuration::default(), &registry(), &standard_plugins()).unwrap();
        let p = &profiles[0];
        assert_eq!(p.queue_sort.name(), "PrioritySort");
        let scores: Vec<(&str, f64)> = p.score.iter().map(|(p, w)| (p.name(), *w)).collect();
        assert_eq!(
            scores,
            [
                ("TaintToleration", 3.0),
                ("NodeAffinity", 2.0),
                ("NodeResourcesFit", 1.0),
                ("PodTopologySpread", 2.0),
                ("InterPodAffinity", 2.0),
                ("DynamicResources", 2.0),
                ("NodeResourcesBalancedAllocation", 1.0),
            ]
        );
        let filters: Vec<&str> = p.filter.iter().map(|p| p.name()).collect();
        assert_eq!(
            filters,
            [
                "NodeUnschedulable",
                "NodeName",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources"
            ]
        );
        assert_eq!(p.bind.len(), 1);
    }

    /// Each kind of profile error names its field.
    #[test]
    fn profile_errors_name_the_field() {
        let head =
            "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- schedulerName: a\n";
        let cases: &[(&str, &str, &str)] = &[
            (
                "unknown plugin",
                "  plugins:\n    score:\n      enabled:\n      - name: Bogus\n",
                "profiles[0].plugins.score.enabled[0].name: unknown plugin \"Bogus\"",
            ),
            (
                "plugin lacks the point",
                "  plugins:\n    score:\n      enabled:\n      - name: NodePorts\n",
                "profiles[0].plugins.score.enabled[0].name: plugin \"NodePorts\" does not implement the score extension point",
            ),
            (
                "unknown plugin in pluginConfig",
                "  pluginConfig:\n  - name: Nope\n    args: {}\n",
                "profiles[0].pluginConfig[0].name: unknown plugin \"Nope\"",
            ),
            (
                "bad args",
                "  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: Sideways\n",
                "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            ),
            (
                "no queue sort",
                "  plugins:\n    queueSort:\n      disabled:\n      - name: '*'\n",
                "profiles[0].plugins.queueSort: exactly one queue sort plugin",
            ),
            (
                "no binder",
                "  plugins:\n    multiPoint:\n      disabled:\n      - name: DefaultBinder\n",
                "profiles[0].plugins.bind: at least one bind plugin",
            ),
        ];
        for (name, body, want) in cases {
            let cfg = config::parse(&format!("{head}{body}")).expect(name);
            let err = build_profiles(&cfg, &registry(), &default_plugins()).expect_err(name).to_string();
            assert!(err.starts_with(want), "{name}: {err}");
        }
    }

    #[test]
    fn disabling_and_reweighting() {
        let yaml = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- plugins:\n    score:\n      disabled:\n      - name: NodeResourcesBalancedAllocation\n      enabled:\n      - name: TaintToleration\n        weight: 0.5\n    filter:\n      disabled:\n      - name: '*'\n";
        let cfg = config::parse(yaml).unwrap();
        let p = &build_profiles(&cfg, &registry(), &default_plugins()).unwrap()[0];
        assert!(p.filter.is_empty());
        assert!(p.score.iter().all(|(p, _)| p.name() != "NodeResourcesBalancedAllocation"));
        assert_eq!(p.score.iter().find(|(p, _)| p.name() == "TaintToleration").map(|(_, w)| *w), Some(0.5));
    }

    #[test]
    fn kube_style_args_with_type_meta_are_accepted() {
        let yaml = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: GpuSchedulerConfiguration\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      apiVersion: kubescheduler.config.k8s.io/v1\n      kind: NodeResourcesFitArgs\n      scoringStrategy:\n        type: MostAllocated\n";
        let cfg = config::parse(yaml).unwrap();
        build_profiles(&cfg, &registry(), &default_plugins()).unwrap();
    }
}
