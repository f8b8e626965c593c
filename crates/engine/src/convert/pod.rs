//! Pods.

use k8s_openapi::api::core::v1 as corev1;

use super::resources::{is_sidecar, pod_resources};
use super::scheduling::{spread_constraint, toleration};
use super::selectors::{node_affinity, pod_affinity_terms};
use super::{ConvertError, DEFAULT_NAMESPACE, DEFAULT_SCHEDULER_NAME, invalid, non_empty, required, unsupported};
use super::{
    SYSTEM_CLUSTER_CRITICAL, SYSTEM_CLUSTER_CRITICAL_PRIORITY, SYSTEM_NODE_CRITICAL, SYSTEM_NODE_CRITICAL_PRIORITY,
};
use crate::devices::{ANNOTATION_GPU_INDEX, DeviceSet, GpuRequest};
use crate::gang::LABEL_POD_GROUP;
use crate::model::{self, HostPort, PreemptionPolicy};

fn host_ports(spec: &corev1::PodSpec) -> Vec<HostPort> {
    let host_network = spec.host_network.unwrap_or(false);
    let sidecars = spec.init_containers.iter().flatten().filter(|c| is_sidecar(c));
    let mut out = Vec::new();
    for c in spec.containers.iter().chain(sidecars) {
        for p in c.ports.iter().flatten() {
            let mut port = p.host_port.unwrap_or(0);
            if host_network && port == 0 {
                port = p.container_port;
            }
            if port <= 0 {
                continue;
            }
            let protocol = p.protocol.as_deref().filter(|s| !s.is_empty()).unwrap_or("TCP");
            out.push(HostPort { protocol: protocol.to_string(), host_ip: p.host_ip.clone().unwrap_or_default(), port });
        }
    }
    out
}

/// Converts a Pod (see the module docs for the defaults applied).
pub fn pod_from_k8s(p: &corev1::Pod) -> Result<model::Pod, ConvertError> {
    let meta = &p.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let namespace = non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let labels = meta.labels.clone().unwrap_or_default();
    let uid = non_empty(meta.uid.as_ref()).unwrap_or_else(|| format!("{namespace}/{name}"));

    let empty_spec = corev1::PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&empty_spec);

    let priority = spec.priority.unwrap_or(match spec.priority_class_name.as_deref() {
        Some(SYSTEM_NODE_CRITICAL) => SYSTEM_NODE_CRITICAL_PRIORITY,
        Some(SYSTEM_CLUSTER_CRITICAL) => SYSTEM_CLUSTER_CRITICAL_PRIORITY,
        _ => 0,
    });
    let (mut requests, non_zero_milli_cpu, non_zero_memory) = pod_resources(spec)?;
    let annotations = meta.annotations.clone().unwrap_or_default();
    let gpu = GpuRequest::from_pod(&mut requests, &annotations)?;
    let gpu_devices = match annotations.get(ANNOTATION_GPU_INDEX) {
        Some(v) => Some(DeviceSet::parse(v).map_err(|e| {
            invalid(format!("metadata.annotations[{ANNOTATION_GPU_INDEX}]"), format_args!("{v:?}"), &e)
        })?),
        None => None,
    };

    let affinity = spec.affinity.as_ref();
    let (required_node_affinity, preferred_node_affinity) = match affinity.and_then(|a| a.node_affinity.as_ref()) {
        Some(na) => node_affinity(na)?,
        None => (None, Vec::new()),
    };
    let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
    let pod_affinity = pod_affinity_terms(
        pa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
        pa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        &namespace,
        &labels,
        "spec.affinity.podAffinity",
    )?;
    let paa = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let pod_anti_affinity = pod_affinity_terms(
        paa.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
        paa.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        &namespace,
        &labels,
        "spec.affinity.podAntiAffinity",
    )?;

    let tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(t, &format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;
    let topology_spread_constraints = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| spread_constraint(c, &labels, &format!("spec.topologySpreadConstraints[{i}]")))
        .collect::<Result<_, _>>()?;

    let preemption_policy = match spec.preemption_policy.as_deref() {
        None | Some("") | Some("PreemptLowerPriority") => PreemptionPolicy::PreemptLowerPriority,
        Some("Never") => PreemptionPolicy::Never,
        Some(other) => return Err(unsupported("spec.preemptionPolicy", other, &["Never", "PreemptLowerPriority"])),
    };
    let pod_group = match labels.get(LABEL_POD_GROUP) {
        None => None,
        Some(g) if g.is_empty() => {
            return Err(invalid(format!("metadata.labels[{LABEL_POD_GROUP}]"), "\"\"", "must name a PodGroup"));
        }
        Some(g) => Some(g.clone()),
    };
    let status = p.status.as_ref();

    Ok(model::Pod {
        uid,
        pod_group,
        preemption_policy,
        start_time: status.and_then(|s| s.start_time.as_ref()).and_then(|t| u64::try_from(t.0.as_millisecond()).ok()),
        running: status.and_then(|s| s.phase.as_deref()) == Some("Running"),
        volumes: super::volumes::pod_volumes(&name, spec),
        resource_claims: super::dra::pod_claims(spec)?,
        claim_statuses: super::dra::claim_statuses(p.status.as_ref()),
        scheduler_name: non_empty(spec.scheduler_name.as_ref()).unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string()),
        priority,
        node_name: non_empty(spec.node_name.as_ref()),
        nominated_node_name: non_empty(p.status.as_ref().and_then(|s| s.nominated_node_name.as_ref())),
        requests,
        non_zero_milli_cpu,
        non_zero_memory,
        host_ports: host_ports(spec),
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        required_node_affinity,
        preferred_node_affinity,
        tolerations,
        pod_affinity,
        pod_anti_affinity,
        topology_spread_constraints,
        owner_selector: None,
        owner: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| (o.kind.clone(), o.name.clone())),
        terminating: meta.deletion_timestamp.is_some(),
        scheduling_gates: spec.scheduling_gates.iter().flatten().map(|g| g.name.clone()).collect(),
        gpu,
        gpu_devices,
        annotations,
        labels,
        namespace,
        name,
        source: None,
    })
}

/// Converts a Node: allocatable from `status.allocatable`, or from
#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn metadata_defaults_and_priority() {
        let p = convert("metadata: {name: web}\nspec: {containers: []}\n");
        assert_eq!(p.namespace, "default");
        assert_eq!(p.uid, "default/web");
        assert_eq!(p.scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert_eq!((p.node_name.clone(), p.nominated_node_name.clone()), (None, None));
        assert!(!p.terminating);
        assert_eq!(p.priority, 0);

        let p = convert(
            r#"
metadata:
  name: web
  namespace: prod
  uid: abc-123
  labels: {app: web}
  annotations: {a: b}
  deletionTimestamp: "2024-01-01T00:00:00Z"
spec:
  schedulerName: gpu-scheduler
  nodeName: n1
  priorityClassName: system-node-critical
  schedulingGates: [{name: g1}, {name: g2}]
  nodeSelector: {disk: ssd}
  containers: []
status:
  nominatedNodeName: n2
"#,
        );
        assert_eq!((p.namespace.as_str(), p.uid.as_str(), p.name.as_str()), ("prod", "abc-123", "web"));
        assert_eq!(p.scheduler_name, "gpu-scheduler");
        assert_eq!(p.node_name.as_deref(), Some("n1"));
        assert_eq!(p.nominated_node_name.as_deref(), Some("n2"));
        assert!(p.terminating);
        assert_eq!(p.priority, SYSTEM_NODE_CRITICAL_PRIORITY);
        assert_eq!(p.scheduling_gates, vec!["g1", "g2"]);
        assert_eq!(p.node_selector.get("disk").map(String::as_str), Some("ssd"));
        assert_eq!(p.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(p.annotations.get("a").map(String::as_str), Some("b"));

        for (class, prio, want) in [
            ("system-cluster-critical", None, SYSTEM_CLUSTER_CRITICAL_PRIORITY),
            ("system-node-critical", Some(7), 7),
            ("custom", None, 0),
        ] {
            let prio = prio.map_or(String::new(), |p: i32| format!(", priority: {p}"));
            let p = convert(&format!(
                "metadata: {{name: p}}\nspec: {{containers: [], priorityClassName: {class}{prio}}}\n"
            ));
            assert_eq!(p.priority, want, "{class}");
        }
    }

    #[test]
    fn host_ports_from_containers_and_sidecars() {
        let p = convert(
            r#"
metadata: {name: p}
spec:
  initContainers:
  - name: sidecar
    restartPolicy: Always
    ports: [{containerPort: 9090, hostPort: 9090, protocol: UDP}]
  - name: init
    ports: [{containerPort: 7070, hostPort: 7070}]
  containers:
  - name: a
    ports:
    - {containerPort: 80, hostPort: 8080, hostIP: 10.0.0.1}
    - {containerPort: 81}
"#,
        );
        let want = vec![
            HostPort { protocol: "TCP".into(), host_ip: "10.0.0.1".into(), port: 8080 },
            HostPort { protocol: "UDP".into(), host_ip: String::new(), port: 9090 },
        ];
        assert_eq!(p.host_ports, want);

        let p = convert(
            "metadata: {name: p}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: a, ports: [{containerPort: 53, protocol: UDP}]}\n",
        );
        assert_eq!(p.host_ports, vec![HostPort { protocol: "UDP".into(), host_ip: String::new(), port: 53 }]);
    }

    #[test]
    fn errors_name_the_field() {
        const NA: &str =
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
        let node_affinity = |expr: &str| {
            format!(
                "spec:\n  containers: []\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - {expr}\n"
            )
        };
        let cases: Vec<(&str, String, String, &str)> = vec![
            (
                "bad cpu quantity",
                "spec:\n  containers:\n  - {name: a}\n  - {name: b, resources: {requests: {cpu: abc}}}\n".into(),
                "spec.containers[1].resources.requests.cpu".into(),
                "Invalid value: \"abc\": unable to parse numeric part of quantity",
            ),
            (
                "bad init limit",
                "spec:\n  initContainers: [{name: i, resources: {limits: {memory: 1Qi}}}]\n  containers: []\n".into(),
                "spec.initContainers[0].resources.limits.memory".into(),
                "Invalid value: \"1Qi\": unable to parse quantity's suffix",
            ),
            (
                "bad overhead",
                "spec:\n  overhead: {cpu: \"\"}\n  containers: []\n".into(),
                "spec.overhead.cpu".into(),
                "Invalid value: \"\": empty string",
            ),
            (
                "bad pod-level request",
                "spec:\n  resources: {requests: {memory: Mi}}\n  containers: []\n".into(),
                "spec.resources.requests.memory".into(),
                "Invalid value: \"Mi\": unable to parse numeric part of quantity",
            ),
            (
                "bad node affinity operator",
                node_affinity("matchExpressions: [{key: k, operator: Foo, values: [a]}]"),
                format!("{NA}.matchExpressions[0].operator"),
                "Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\", \"Gt\", \"Lt\"",
            ),
            (
                "Gt with a non-integer",
                node_affinity("matchExpressions: [{key: k, operator: Gt, values: [abc]}]"),
                format!("{NA}.matchExpressions[0].values[0]"),
                "Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "Lt with two values",
                node_affinity("matchExpressions: [{key: k, operator: Lt, values: [\"1\", \"2\"]}]"),
                format!("{NA}.matchExpressions[0].values"),
                "Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required",
            ),
            (
                "matchFields on an unsupported field",
                node_affinity("matchFields: [{key: metadata.uid, operator: In, values: [a]}]"),
                format!("{NA}.matchFields[0].key"),
                "Unsupported value: \"metadata.uid\": supported values: \"metadata.name\"",
            ),
            (
                "matchFields with two values",
                node_affinity("matchFields: [{key: metadata.name, operator: In, values: [a, b]}]"),
                format!("{NA}.matchFields[0].values"),
                "Invalid value: [\"a\",\"b\"]: must have one element",
            ),
            (
                "no node selector terms",
                "spec:\n  containers: []\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}\n".into(),
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms".into(),
                "Required value: must have at least one node selector term",
            ),
            (
                "preferred weight out of range",
                "spec:\n  containers: []\n  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 0, preference: {}}]}}\n".into(),
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight".into(),
                "Invalid value: 0: must be in the range 1-100",
            ),
            (
                "pod affinity In without values",
                "spec:\n  containers: []\n  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: z, labelSelector: {matchExpressions: [{key: a, operator: In}]}}]}}\n".into(),
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values".into(),
                "Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "anti-affinity without topology key",
                "spec:\n  containers: []\n  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: \"\"}}]}}\n".into(),
                "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey".into(),
                "Required value: can not be empty",
            ),
            (
                "bad toleration effect",
                "spec:\n  containers: []\n  tolerations: [{key: k, effect: NoRun}]\n".into(),
                "spec.tolerations[0].effect".into(),
                "Unsupported value: \"NoRun\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
            ),
            (
                "bad toleration operator",
                "spec:\n  containers: []\n  tolerations: [{key: k, operator: Lt, value: \"1\"}]\n".into(),
                "spec.tolerations[0].operator".into(),
                "Unsupported value: \"Lt\": supported values: \"Equal\", \"Exists\"",
            ),
            (
                "empty toleration key needs Exists",
                "spec:\n  containers: []\n  tolerations: [{value: v}]\n".into(),
                "spec.tolerations[0].operator".into(),
                "Invalid value: \"\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ),
            (
                "tolerationSeconds needs NoExecute",
                "spec:\n  containers: []\n  tolerations: [{key: k, effect: NoSchedule, tolerationSeconds: 5}]\n".into(),
                "spec.tolerations[0].effect".into(),
                "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
            ),
            (
                "zero maxSkew",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]\n".into(),
                "spec.topologySpreadConstraints[0].maxSkew".into(),
                "Invalid value: 0: must be greater than zero",
            ),
            (
                "minDomains with ScheduleAnyway",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, minDomains: 2, topologyKey: z, whenUnsatisfiable: ScheduleAnyway}]\n".into(),
                "spec.topologySpreadConstraints[0].minDomains".into(),
                "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
            ),
            (
                "zero minDomains",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, minDomains: 0, topologyKey: z, whenUnsatisfiable: DoNotSchedule}]\n".into(),
                "spec.topologySpreadConstraints[0].minDomains".into(),
                "Invalid value: 0: must be greater than zero",
            ),
            (
                "bad whenUnsatisfiable",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: Never}]\n".into(),
                "spec.topologySpreadConstraints[0].whenUnsatisfiable".into(),
                "Unsupported value: \"Never\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
            ),
            (
                "bad nodeTaintsPolicy",
                "spec:\n  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: z, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Maybe}]\n".into(),
                "spec.topologySpreadConstraints[0].nodeTaintsPolicy".into(),
                "Unsupported value: \"Maybe\": supported values: \"Honor\", \"Ignore\"",
            ),
        ];
        for (name, spec, path, message) in cases {
            let y = format!("metadata: {{name: p}}\n{spec}");
            let err = pod_from_k8s(&pod(&y)).expect_err(name);
            assert_eq!((err.path.as_str(), err.message.as_str()), (path.as_str(), message), "{name}");
            assert_eq!(err.to_string(), format!("{path}: {message}"));
        }
        let err = pod_from_k8s(&pod("spec: {containers: []}")).unwrap_err();
        assert_eq!(err.to_string(), "metadata.name: Required value");
    }

    #[test]
    fn gpu_requests_and_devices_are_read_once() {
        use crate::devices::{DeviceSet, GpuRequest};
        let with = |annotations: &str, gpus: &str| {
            format!(
                "metadata:\n  name: p\n  annotations: {{{annotations}}}\nspec:\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: \"1\"{gpus}}}}}\n"
            )
        };
        // (case, annotations, nvidia.com/gpu, request, devices, nvidia.com/gpu kept)
        type Case<'a> = (&'a str, &'a str, &'a str, GpuRequest, Option<&'a str>, i64);
        let cases: Vec<Case> = vec![
            ("whole GPUs", "", ", nvidia.com/gpu: \"2\"", GpuRequest::whole(2), None, 2),
            (
                "a share, HAMi's form",
                "gpu-scheduler.io/gpu-milli: \"300\"",
                ", nvidia.com/gpu: \"1\"",
                GpuRequest::share(300, 0),
                None,
                0,
            ),
            (
                "bound with its devices",
                "gpu-scheduler.io/gpu-index: \"2-3\"",
                ", nvidia.com/gpu: \"2\"",
                GpuRequest::whole(2),
                Some("2-3"),
                2,
            ),
            (
                "openb's form",
                "alibabacloud.com/gpu-milli: \"460\", alibabacloud.com/gpu-count: \"1\", alibabacloud.com/gpu-card-model: T4",
                "",
                GpuRequest::share(460, 0).with_models(&["t4"]),
                None,
                0,
            ),
        ];
        for (name, annotations, gpus, want, devices, kept) in cases {
            let p = convert(&with(annotations, gpus));
            assert_eq!(p.gpu, want, "{name}");
            assert_eq!(p.gpu_devices, devices.map(|d| DeviceSet::parse(d).unwrap()), "{name}");
            assert_eq!(p.requests.scalar("nvidia.com/gpu"), kept, "{name}");
        }
        for (annotations, want) in [
            (
                "gpu-scheduler.io/gpu-index: \"1-x\"",
                "metadata.annotations[gpu-scheduler.io/gpu-index]: Invalid value: \"1-x\": must list GPU indices",
            ),
            (
                "gpu-scheduler.io/gpu-milli: \"lots\"",
                "metadata.annotations[gpu-scheduler.io/gpu-milli]: Invalid value: \"lots\"",
            ),
        ] {
            let err = pod_from_k8s(&pod(&with(annotations, ""))).unwrap_err().to_string();
            assert!(err.starts_with(want), "{err}");
        }
    }
}
