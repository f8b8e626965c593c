//! Effective requests: containers, init containers, sidecars, pod-level
//! resources and overhead, as kube's `PodRequests`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::{ConvertError, invalid};
use crate::quantity::Quantity;
use crate::resources::{
    self, CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, EPHEMERAL_STORAGE, MEMORY, PODS, Resources,
};

// ----------------------------------------------------------- resource lists

/// Resource name to amount. Presence matters as in Go's `ResourceList`: a
/// request set to 0 is not "missing" for the non-zero defaults.
type ResourceList = BTreeMap<String, Quantity>;

pub(super) fn parse_resource_list(
    list: Option<&BTreeMap<String, K8sQuantity>>,
    path: &str,
) -> Result<ResourceList, ConvertError> {
    let mut out = ResourceList::new();
    for (name, q) in list.into_iter().flatten() {
        let parsed = Quantity::parse(&q.0)
            .map_err(|e| invalid(format!("{path}.{name}"), format_args!("{:?}", q.0), e.reason))?;
        // The API server's own rule for requests, limits and node resources.
        if parsed.signum() < 0 {
            return Err(invalid(
                format!("{path}.{name}"),
                format_args!("{:?}", q.0),
                "must be greater than or equal to 0",
            ));
        }
        out.insert(name.clone(), parsed);
    }
    Ok(out)
}

fn add_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        let sum = into.get(name).copied().unwrap_or_default().saturating_add(*q);
        into.insert(name.clone(), sum);
    }
}

fn max_list(into: &mut ResourceList, other: &ResourceList) {
    for (name, q) in other {
        if into.get(name).is_none_or(|cur| q > cur) {
            into.insert(name.clone(), *q);
        }
    }
}

/// Go's `applyNonMissing`: a copy of `list` where each resource of
/// `non_missing` that `list` lacks takes the default.
fn with_non_missing(list: &ResourceList, non_missing: &ResourceList) -> ResourceList {
    let mut out = list.clone();
    for (name, q) in non_missing {
        out.entry(name.clone()).or_insert(*q);
    }
    out
}

/// Converts to the engine's integer units: cpu in milli, memory and
/// ephemeral storage in bytes, extended/hugepages resources as counts.
/// `pods` only when `with_pods` (node allocatable); other names are ignored.
/// Amounts past [`resources::MAX_AMOUNT`] are held as it.
pub(super) fn to_resources(list: &ResourceList, with_pods: bool) -> Resources {
    let mut r = Resources::default();
    let cap = |v: i64| v.min(resources::MAX_AMOUNT);
    for (name, q) in list {
        match name.as_str() {
            CPU => r.milli_cpu = cap(q.milli_value()),
            MEMORY => r.memory = cap(q.value()),
            EPHEMERAL_STORAGE => r.ephemeral_storage = cap(q.value()),
            PODS if with_pods => r.allowed_pod_number = cap(q.value()),
            n if resources::is_scalar_resource_name(n) => r.set(n, cap(q.value())),
            _ => {}
        }
    }
    r
}

/// Pod-level resources (`spec.resources`) may set cpu, memory and hugepages.
fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || resources::is_hugepages(name)
}

// -------------------------------------------------------- request math

struct InitContainer {
    requests: ResourceList,
    /// `restartPolicy: Always`: a sidecar that keeps running beside the app.
    sidecar: bool,
}

/// The requests of every container, parsed once.
struct ContainerRequests {
    app: Vec<ResourceList>,
    init: Vec<InitContainer>,
}

/// A container's requests with the API's defaulting: a resource with a
/// limit but no request requests its limit.
fn container_requests(c: &corev1::Container, path: &str) -> Result<ResourceList, ConvertError> {
    let res = c.resources.as_ref();
    let mut requests =
        parse_resource_list(res.and_then(|r| r.requests.as_ref()), &format!("{path}.resources.requests"))?;
    let limits = parse_resource_list(res.and_then(|r| r.limits.as_ref()), &format!("{path}.resources.limits"))?;
    for (name, q) in limits {
        requests.entry(name).or_insert(q);
    }
    Ok(requests)
}

pub(super) fn is_sidecar(c: &corev1::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

impl ContainerRequests {
    fn parse(spec: &corev1::PodSpec) -> Result<Self, ConvertError> {
        let app = spec
            .containers
            .iter()
            .enumerate()
            .map(|(i, c)| container_requests(c, &format!("spec.containers[{i}]")))
            .collect::<Result<_, _>>()?;
        let init = spec
            .init_containers
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                Ok(InitContainer {
                    requests: container_requests(c, &format!("spec.initContainers[{i}]"))?,
                    sidecar: is_sidecar(c),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(ContainerRequests { app, init })
    }

    /// The sidecar-aware aggregate (KEP-753), per resource: the larger of
    /// the app containers plus all sidecars, and the peak over init
    /// containers of each one's request plus the sidecars started before it.
    fn aggregate(&self, non_missing: &ResourceList) -> ResourceList {
        let mut total = ResourceList::new();
        for c in &self.app {
            add_list(&mut total, &with_non_missing(c, non_missing));
        }
        let mut sidecars = ResourceList::new();
        let mut init_peak = ResourceList::new();
        for ic in &self.init {
            let req = with_non_missing(&ic.requests, non_missing);
            if ic.sidecar {
                add_list(&mut total, &req);
                add_list(&mut sidecars, &req);
                max_list(&mut init_peak, &sidecars);
            } else {
                let mut running = req;
                add_list(&mut running, &sidecars);
                max_list(&mut init_peak, &running);
            }
        }
        max_list(&mut total, &init_peak);
        total
    }

    /// Go's `PodRequests`: the aggregate, with pod-level requests replacing
    /// the resources they set, plus overhead.
    fn pod_requests(
        &self,
        pod_level: Option<&ResourceList>,
        overhead: &ResourceList,
        non_missing: &ResourceList,
    ) -> ResourceList {
        let mut reqs = self.aggregate(non_missing);
        for (name, q) in pod_level.into_iter().flatten() {
            reqs.insert(name.clone(), *q);
        }
        add_list(&mut reqs, overhead);
        reqs
    }
}

/// Effective pod-level requests with the API's defaulting (KEP-2837): when
/// pod-level limits are set, a missing pod-level cpu/memory request takes
/// the containers' aggregate, else the pod-level limit. None when no
/// supported resource is requested at pod level.
fn pod_level_requests(
    spec: &corev1::PodSpec,
    containers: &ContainerRequests,
) -> Result<Option<ResourceList>, ConvertError> {
    let Some(res) = spec.resources.as_ref() else {
        return Ok(None);
    };
    let mut reqs = parse_resource_list(res.requests.as_ref(), "spec.resources.requests")?;
    let limits = parse_resource_list(res.limits.as_ref(), "spec.resources.limits")?;
    if !limits.is_empty() {
        // Only overcommittable resources (cpu, memory) default from containers.
        for (name, q) in containers.aggregate(&ResourceList::new()) {
            if (name == CPU || name == MEMORY) && !reqs.contains_key(&name) {
                reqs.insert(name, q);
            }
        }
        for (name, q) in limits {
            if is_supported_pod_level_resource(&name) {
                reqs.entry(name).or_insert(q);
            }
        }
    }
    reqs.retain(|name, _| is_supported_pod_level_resource(name));
    Ok((!reqs.is_empty()).then_some(reqs))
}

/// Requests and the non-zero cpu/memory used for scoring, as
/// `PodInfo.CalculateResource`.
pub(super) fn pod_resources(spec: &corev1::PodSpec) -> Result<(Resources, i64, i64), ConvertError> {
    let containers = ContainerRequests::parse(spec)?;
    let pod_level = pod_level_requests(spec, &containers)?;
    let overhead = parse_resource_list(spec.overhead.as_ref(), "spec.overhead")?;
    let requests = containers.pod_requests(pod_level.as_ref(), &overhead, &ResourceList::new());

    // Containers without a cpu (memory) request count as 100m (200Mi); with
    // pod-level requests set, only for a resource requested nowhere.
    let mut non_missing = ResourceList::new();
    if pod_level.is_none() || !requests.contains_key(CPU) {
        non_missing.insert(CPU.to_string(), Quantity::from_milli(DEFAULT_MILLI_CPU_REQUEST));
    }
    if pod_level.is_none() || !requests.contains_key(MEMORY) {
        non_missing.insert(MEMORY.to_string(), Quantity::from_value(DEFAULT_MEMORY_REQUEST));
    }
    let non_zero = if non_missing.is_empty() {
        requests.clone()
    } else {
        containers.pod_requests(pod_level.as_ref(), &overhead, &non_missing)
    };
    let non_zero_cpu = non_zero.get(CPU).map_or(0, Quantity::milli_value).min(resources::MAX_AMOUNT);
    let non_zero_mem = non_zero.get(MEMORY).map_or(0, Quantity::value).min(resources::MAX_AMOUNT);
    Ok((to_resources(&requests, false), non_zero_cpu, non_zero_mem))
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn effective_requests_with_init_and_sidecar_containers() {
        // (name, containers, want milli-cpu, want memory)
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a str)>, i64, i64);
        let cases: Vec<Case> = vec![
            ("app containers sum", vec![("app", "100m", "100Mi"), ("app", "200m", "50Mi")], 300, 150 * MI),
            (
                "init larger than app wins per resource",
                vec![("init", "1", "10Mi"), ("app", "500m", "500Mi")],
                1000,
                500 * MI,
            ),
            (
                "docs: highest init request is the effective init request",
                vec![("init", "2", ""), ("init", "1", ""), ("app", "1", ""), ("app", "500m", "")],
                2000,
                0,
            ),
            (
                "sidecar before a bigger init container adds to it",
                vec![("sidecar", "100m", "64Mi"), ("init", "500m", "256Mi"), ("app", "200m", "128Mi")],
                600,
                320 * MI,
            ),
            (
                "sidecar after an init container does not add to it",
                vec![("init", "500m", "256Mi"), ("sidecar", "100m", "64Mi"), ("app", "200m", "128Mi")],
                500,
                256 * MI,
            ),
            (
                "app plus all sidecars beats the init peak",
                vec![("sidecar", "300m", ""), ("init", "100m", ""), ("sidecar", "300m", ""), ("app", "500m", "")],
                1100,
                0,
            ),
            (
                "sidecars accumulate for later init containers",
                vec![
                    ("sidecar", "100m", ""),
                    ("init", "500m", ""),
                    ("sidecar", "200m", ""),
                    ("init", "100m", ""),
                    ("app", "100m", ""),
                ],
                600,
                0,
            ),
            ("sidecar only pod", vec![("sidecar", "250m", "1Gi")], 250, GI),
            ("no requests", vec![("app", "", ""), ("init", "", "")], 0, 0),
            ("exact sum of fractions", vec![("app", "0.5m", "0.5"), ("app", "0.5m", "0.5")], 1, 1),
        ];
        for (name, containers, cpu, mem) in cases {
            let p = convert(&containers_yaml(&containers));
            assert_eq!((p.requests.milli_cpu, p.requests.memory), (cpu, mem), "{name}");
        }
    }

    #[test]
    fn overhead_limits_defaulting_and_resource_names() {
        let cases: &[(&str, &str, Resources)] = &[
            (
                "overhead is added",
                r#"
spec:
  overhead: {cpu: 250m, memory: 120Mi}
  containers:
  - name: a
    resources: {requests: {cpu: 100m, memory: 100Mi}}
"#,
                Resources::new(350, 220 * MI),
            ),
            (
                "limits stand in for missing requests",
                r#"
spec:
  containers:
  - name: a
    resources: {limits: {cpu: "1", memory: 1Gi}}
  - name: b
    resources: {requests: {cpu: 250m}, limits: {cpu: "2", memory: 512Mi}}
"#,
                Resources::new(1250, GI + 512 * MI),
            ),
            (
                "init container limits defaulted too",
                r#"
spec:
  initContainers:
  - name: i
    resources: {limits: {cpu: "3"}}
  containers:
  - name: a
    resources: {requests: {cpu: "1"}}
"#,
                Resources::new(3000, 0),
            ),
            (
                "extended, hugepages and ephemeral storage; unknown names ignored",
                r#"
spec:
  initContainers:
  - name: i
    resources: {limits: {nvidia.com/gpu: "2"}}
  containers:
  - name: a
    resources:
      limits: {nvidia.com/gpu: "1", hugepages-2Mi: 4Mi}
      requests: {ephemeral-storage: 1Gi, foo: "3", pods: "1"}
"#,
                {
                    let mut r = Resources::default();
                    r.ephemeral_storage = GI;
                    r.set("nvidia.com/gpu", 2);
                    r.set("hugepages-2Mi", 4 * MI);
                    r
                },
            ),
        ];
        for (name, yaml, want) in cases {
            let y = format!("metadata: {{name: p}}\n{yaml}");
            assert_eq!(&convert(&y).requests, want, "{name}");
        }
    }

    #[test]
    fn pod_level_resources() {
        // (name, yaml, want cpu, want memory, want non-zero cpu, non-zero memory)
        let cases: &[(&str, &str, i64, i64, i64, i64)] = &[
            (
                "pod-level requests replace container sums",
                r#"
spec:
  resources: {requests: {cpu: "1", memory: 1Gi}}
  containers:
  - {name: a, resources: {requests: {cpu: 100m, memory: 100Mi}}}
  - {name: b}
"#,
                1000,
                GI,
                1000,
                GI,
            ),
            (
                "pod-level cpu only: memory from containers, defaulted where requested nowhere",
                r#"
spec:
  resources: {requests: {cpu: 500m}}
  containers:
  - {name: a}
  - {name: b}
"#,
                500,
                0,
                500,
                400 * MI,
            ),
            (
                "pod-level limits default pod-level requests",
                r#"
spec:
  resources: {limits: {cpu: "2", memory: 1Gi}}
  containers:
  - {name: a, resources: {requests: {memory: 100Mi}}}
"#,
                2000,
                100 * MI,
                2000,
                100 * MI,
            ),
            (
                "overhead still added",
                r#"
spec:
  overhead: {cpu: 100m}
  resources: {requests: {cpu: "1", memory: 1Gi}}
  containers:
  - {name: a}
"#,
                1100,
                GI,
                1100,
                GI,
            ),
        ];
        for (name, yaml, cpu, mem, nz_cpu, nz_mem) in cases {
            let p = convert(&format!("metadata: {{name: p}}\n{yaml}"));
            assert_eq!(
                (p.requests.milli_cpu, p.requests.memory, p.non_zero_milli_cpu, p.non_zero_memory),
                (*cpu, *mem, *nz_cpu, *nz_mem),
                "{name}"
            );
        }
    }

    #[test]
    fn non_zero_requests() {
        const DEF_MEM: i64 = DEFAULT_MEMORY_REQUEST;
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str, &'a str)>, i64, i64);
        let cases: Vec<Case> = vec![
            ("no requests: defaults", vec![("app", "", "")], 100, DEF_MEM),
            ("defaults per container", vec![("app", "", ""), ("app", "", "")], 200, 2 * DEF_MEM),
            ("set requests kept", vec![("app", "250m", "1Gi")], 250, GI),
            ("explicit zero is not missing", vec![("app", "0", "")], 0, DEF_MEM),
            ("mixed", vec![("app", "50m", ""), ("app", "", "1Gi")], 150, DEF_MEM + GI),
            (
                "init container without requests counts the default",
                vec![("init", "", ""), ("app", "50m", "10Mi")],
                100,
                DEF_MEM,
            ),
            ("sidecars get defaults and add", vec![("sidecar", "", ""), ("app", "", "")], 200, 2 * DEF_MEM),
        ];
        for (name, containers, cpu, mem) in cases {
            let p = convert(&containers_yaml(&containers));
            assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (cpu, mem), "{name}");
        }
        // Overhead adds to the non-zero amounts too.
        let p = convert("metadata: {name: p}\nspec:\n  overhead: {cpu: 10m, memory: 1Mi}\n  containers: [{name: a}]\n");
        assert_eq!((p.non_zero_milli_cpu, p.non_zero_memory), (110, DEF_MEM + MI));
    }
}
