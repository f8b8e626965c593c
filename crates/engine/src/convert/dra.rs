//! ResourceSlices, DeviceClasses, ResourceClaims, ResourceClaimTemplates
//! (`resource.k8s.io/v1`) and a pod's claims, as DynamicResources reads them.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::resource::v1 as resourcev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::scheduling::taint_effect;
use super::selectors::node_selector;
use super::{ConvertError, DEFAULT_NAMESPACE, invalid, non_empty, required, unsupported};
use crate::dra::{
    AllocatedDevice, Allocation, AllocationConfig, AllocationMode, Attribute, CLAIM_FINALIZER, ClaimSource,
    ClaimTemplate, ConfigSource, Constraint, Consumer, Device, DeviceClass, DeviceConfig, DeviceId, DeviceRequest,
    DeviceTaint, DeviceToleration, ExactRequest, NodeScope, PodClaim, ResourceClaim, Slice,
};
use crate::quantity::Quantity;

fn name_of(meta: &ObjectMeta) -> Result<String, ConvertError> {
    non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))
}

fn namespace_of(meta: &ObjectMeta) -> String {
    non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
}

/// A semantic version as DRA attributes take them (`1.2.3`, with an
/// optional pre-release and build).
fn is_semver(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && (p.len() == 1 || !p.starts_with('0')))
}

fn attribute(a: &resourcev1::DeviceAttribute, path: &str) -> Result<Option<Attribute>, ConvertError> {
    Ok(match (a.int, a.bool, &a.string, &a.version) {
        (Some(i), None, None, None) => Some(Attribute::Int(i)),
        (None, Some(b), None, None) => Some(Attribute::Bool(b)),
        (None, None, Some(s), None) => Some(Attribute::String(s.clone())),
        (None, None, None, Some(v)) if is_semver(v) => Some(Attribute::Version(v.clone())),
        (None, None, None, Some(v)) => {
            return Err(invalid(format!("{path}.version"), format_args!("{v:?}"), "must be a semantic version"));
        }
        // List values belong to a feature not enabled here: left out.
        (None, None, None, None) => None,
        _ => return Err(invalid(path, "", "exactly one value must be specified")),
    })
}

fn scope(
    node_name: Option<&String>,
    selector: Option<&corev1::NodeSelector>,
    all_nodes: Option<bool>,
    path: &str,
) -> Result<Option<NodeScope>, ConvertError> {
    Ok(match (non_empty(node_name), selector, all_nodes.unwrap_or(false)) {
        (Some(n), None, false) => Some(NodeScope::Node(n)),
        (None, Some(s), false) => Some(NodeScope::Selector(node_selector(s, &format!("{path}.nodeSelector"))?)),
        (None, None, true) => Some(NodeScope::All),
        (None, None, false) => None,
        _ => return Err(invalid(path, "", "exactly one of nodeName, nodeSelector and allNodes may be set")),
    })
}

fn device(d: &resourcev1::Device, path: &str, per_device: bool) -> Result<Device, ConvertError> {
    let mut attributes = std::collections::BTreeMap::new();
    for (k, v) in d.attributes.iter().flatten() {
        if let Some(a) = attribute(v, &format!("{path}.attributes[{k}]"))? {
            attributes.insert(k.clone(), a);
        }
    }
    let mut capacity = std::collections::BTreeMap::new();
    for (k, v) in d.capacity.iter().flatten() {
        let q = Quantity::parse(&v.value.0)
            .map_err(|e| invalid(format!("{path}.capacity[{k}].value"), format_args!("{:?}", v.value.0), e.reason))?;
        capacity.insert(k.clone(), q);
    }
    let mut taints = Vec::new();
    for (i, t) in d.taints.iter().flatten().enumerate() {
        match taint_effect(&t.effect) {
            Some(effect) => {
                taints.push(DeviceTaint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect })
            }
            // "None" only informs; it keeps nothing off the device.
            None if t.effect == "None" => {}
            None => {
                return Err(unsupported(
                    format!("{path}.taints[{i}].effect"),
                    &t.effect,
                    &["NoSchedule", "NoExecute", "None"],
                ));
            }
        }
    }
    let device_scope =
        if per_device { scope(d.node_name.as_ref(), d.node_selector.as_ref(), d.all_nodes, path)? } else { None };
    Ok(Device {
        name: d.name.clone(),
        attributes,
        capacity,
        taints,
        scope: device_scope,
        has_binding_conditions: d.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()),
        consumes_counters: d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty()),
    })
}

/// Converts a ResourceSlice.
pub fn slice_from_k8s(s: &resourcev1::ResourceSlice) -> Result<Slice, ConvertError> {
    let name = name_of(&s.metadata)?;
    let spec = &s.spec;
    if spec.driver.is_empty() {
        return Err(required("spec.driver", ""));
    }
    let per_device = spec.per_device_node_selection.unwrap_or(false);
    let slice_scope = scope(spec.node_name.as_ref(), spec.node_selector.as_ref(), spec.all_nodes, "spec")?;
    let devices = spec
        .devices
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, d)| device(d, &format!("spec.devices[{i}]"), per_device))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Slice {
        name,
        driver: spec.driver.as_str().into(),
        pool: spec.pool.name.as_str().into(),
        generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count.max(1),
        unsupported: per_device || spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty()),
        scope: slice_scope,
        devices,
    })
}

fn opaque(o: Option<&resourcev1::OpaqueDeviceConfiguration>) -> Option<DeviceConfig> {
    o.and_then(|o| serde_json::to_value(o).ok()).map(std::sync::Arc::new)
}

/// Converts a DeviceClass.
pub fn device_class_from_k8s(c: &resourcev1::DeviceClass) -> Result<DeviceClass, ConvertError> {
    let name = name_of(&c.metadata)?;
    let selectors = selectors(c.spec.selectors.as_ref(), "spec.selectors")?;
    let config = c.spec.config.iter().flatten().filter_map(|c| opaque(c.opaque.as_ref())).collect();
    Ok(DeviceClass { name, selectors, config })
}

fn selectors(s: Option<&Vec<resourcev1::DeviceSelector>>, path: &str) -> Result<Vec<String>, ConvertError> {
    s.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| match &s.cel {
            Some(c) if !c.expression.trim().is_empty() => Ok(c.expression.clone()),
            _ => Err(required(format!("{path}[{i}].cel.expression"), "")),
        })
        .collect()
}

fn tolerations(
    t: Option<&Vec<resourcev1::DeviceToleration>>,
    path: &str,
) -> Result<Vec<DeviceToleration>, ConvertError> {
    t.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let effect = match t.effect.as_deref() {
                None | Some("") => None,
                Some(e) => Some(
                    taint_effect(e)
                        .ok_or_else(|| unsupported(format!("{path}[{i}].effect"), e, &["NoSchedule", "NoExecute"]))?,
                ),
            };
            let exists = match t.operator.as_deref() {
                None | Some("") | Some("Equal") => false,
                Some("Exists") => true,
                Some(o) => return Err(unsupported(format!("{path}[{i}].operator"), o, &["Equal", "Exists"])),
            };
            Ok(DeviceToleration {
                key: t.key.clone().unwrap_or_default(),
                exists,
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn exact(
    class: &str,
    sel: Option<&Vec<resourcev1::DeviceSelector>>,
    mode: Option<&String>,
    count: Option<i64>,
    admin: Option<bool>,
    tol: Option<&Vec<resourcev1::DeviceToleration>>,
    path: &str,
) -> Result<ExactRequest, ConvertError> {
    if class.is_empty() {
        return Err(required(format!("{path}.deviceClassName"), ""));
    }
    let mode = match mode.map(String::as_str) {
        None | Some("") | Some("ExactCount") => {
            let n = count.unwrap_or(1);
            if !(1..=i64::from(u32::MAX)).contains(&n) {
                return Err(invalid(format!("{path}.count"), n, "must be greater than zero"));
            }
            AllocationMode::ExactCount(n as u32)
        }
        Some("All") => AllocationMode::All,
        Some(m) => return Err(unsupported(format!("{path}.allocationMode"), m, &["All", "ExactCount"])),
    };
    Ok(ExactRequest {
        class: class.to_string(),
        selectors: selectors(sel, &format!("{path}.selectors"))?,
        mode,
        admin_access: admin.unwrap_or(false),
        tolerations: tolerations(tol, &format!("{path}.tolerations"))?,
    })
}

type ClaimSpecParts = (Vec<DeviceRequest>, Vec<Constraint>, Vec<(Vec<String>, DeviceConfig)>);

fn claim_spec(spec: &resourcev1::ResourceClaimSpec, path: &str) -> Result<ClaimSpecParts, ConvertError> {
    let Some(d) = spec.devices.as_ref() else { return Ok(Default::default()) };
    let mut requests = Vec::new();
    for (i, r) in d.requests.iter().flatten().enumerate() {
        let p = format!("{path}.devices.requests[{i}]");
        let exactly = match &r.exactly {
            Some(e) => Some(exact(
                &e.device_class_name,
                e.selectors.as_ref(),
                e.allocation_mode.as_ref(),
                e.count,
                e.admin_access,
                e.tolerations.as_ref(),
                &format!("{p}.exactly"),
            )?),
            None => None,
        };
        let mut first_available = Vec::new();
        for (j, s) in r.first_available.iter().flatten().enumerate() {
            let sp = format!("{p}.firstAvailable[{j}]");
            let e = exact(
                &s.device_class_name,
                s.selectors.as_ref(),
                s.allocation_mode.as_ref(),
                s.count,
                None,
                s.tolerations.as_ref(),
                &sp,
            )?;
            first_available.push((s.name.clone(), e));
        }
        if exactly.is_some() != first_available.is_empty() {
            return Err(invalid(&p, "", "exactly one of exactly and firstAvailable must be set"));
        }
        requests.push(DeviceRequest { name: r.name.clone(), exactly, first_available });
    }
    let mut constraints = Vec::new();
    for (i, c) in d.constraints.iter().flatten().enumerate() {
        let Some(m) = &c.match_attribute else {
            return Err(required(
                format!("{path}.devices.constraints[{i}].matchAttribute"),
                "the only constraint supported",
            ));
        };
        constraints.push(Constraint { requests: c.requests.clone().unwrap_or_default(), match_attribute: m.clone() });
    }
    let config = d
        .config
        .iter()
        .flatten()
        .filter_map(|c| opaque(c.opaque.as_ref()).map(|o| (c.requests.clone().unwrap_or_default(), o)))
        .collect();
    Ok((requests, constraints, config))
}

fn allocation(a: &resourcev1::AllocationResult) -> Result<Allocation, ConvertError> {
    let devices = a.devices.as_ref();
    let results = devices
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            Ok(AllocatedDevice {
                request: r.request.clone(),
                id: DeviceId {
                    driver: r.driver.as_str().into(),
                    pool: r.pool.as_str().into(),
                    device: r.device.as_str().into(),
                },
                admin_access: r.admin_access.unwrap_or(false),
                tolerations: tolerations(
                    r.tolerations.as_ref(),
                    &format!("status.allocation.devices.results[{i}].tolerations"),
                )?,
            })
        })
        .collect::<Result<Vec<_>, ConvertError>>()?;
    let config = devices
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let source = if c.source == "FromClass" { ConfigSource::Class } else { ConfigSource::Claim };
            opaque(c.opaque.as_ref()).map(|o| AllocationConfig {
                source,
                requests: c.requests.clone().unwrap_or_default(),
                config: o,
            })
        })
        .collect();
    let node_selector = match &a.node_selector {
        Some(s) => Some(node_selector(s, "status.allocation.nodeSelector")?),
        None => None,
    };
    Ok(Allocation { devices: results, config, node_selector })
}

/// An allocation as the API writes it in a claim's `status.allocation`
/// (the inverse of the conversion on arrival).
pub fn allocation_to_k8s(a: &Allocation) -> resourcev1::AllocationResult {
    let results = a
        .devices
        .iter()
        .map(|d| resourcev1::DeviceRequestAllocationResult {
            request: d.request.clone(),
            driver: d.id.driver.to_string(),
            pool: d.id.pool.to_string(),
            device: d.id.device.to_string(),
            admin_access: d.admin_access.then_some(true),
            tolerations: (!d.tolerations.is_empty()).then(|| {
                d.tolerations
                    .iter()
                    .map(|t| resourcev1::DeviceToleration {
                        key: (!t.key.is_empty()).then(|| t.key.clone()),
                        operator: Some(if t.exists { "Exists" } else { "Equal" }.to_string()),
                        value: (!t.exists).then(|| t.value.clone()),
                        effect: t.effect.map(|e| e.as_str().to_string()),
                        toleration_seconds: None,
                    })
                    .collect()
            }),
            ..Default::default()
        })
        .collect();
    let config: Vec<resourcev1::DeviceAllocationConfiguration> = a
        .config
        .iter()
        .map(|c| resourcev1::DeviceAllocationConfiguration {
            source: match c.source {
                ConfigSource::Class => "FromClass",
                ConfigSource::Claim => "FromClaim",
            }
            .to_string(),
            requests: (!c.requests.is_empty()).then(|| c.requests.clone()),
            opaque: serde_json::from_value((*c.config).clone()).ok(),
        })
        .collect();
    resourcev1::AllocationResult {
        devices: Some(resourcev1::DeviceAllocationResult {
            results: Some(results),
            config: (!config.is_empty()).then_some(config),
        }),
        node_selector: a.node_selector.as_ref().map(super::selectors::node_selector_to_k8s),
        ..Default::default()
    }
}

/// Converts a ResourceClaim.
pub fn resource_claim_from_k8s(c: &resourcev1::ResourceClaim) -> Result<ResourceClaim, ConvertError> {
    let meta = &c.metadata;
    let name = name_of(meta)?;
    let namespace = namespace_of(meta);
    let (requests, constraints, config) = claim_spec(&c.spec, "spec")?;
    let status = c.status.as_ref();
    let allocation = match status.and_then(|s| s.allocation.as_ref()) {
        Some(a) => Some(allocation(a)?),
        None => None,
    };
    let reserved_for = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| Consumer {
            api_group: r.api_group.clone().unwrap_or_default(),
            resource: r.resource.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        })
        .collect();
    Ok(ResourceClaim {
        uid: non_empty(meta.uid.as_ref()).unwrap_or_else(|| format!("{namespace}/{name}")),
        requests,
        constraints,
        config,
        allocation,
        reserved_for,
        terminating: meta.deletion_timestamp.is_some(),
        controller_uid: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone()),
        has_finalizer: meta.finalizers.iter().flatten().any(|f| f == CLAIM_FINALIZER),
        namespace,
        name,
    })
}

/// Converts a ResourceClaimTemplate.
pub fn claim_template_from_k8s(t: &resourcev1::ResourceClaimTemplate) -> Result<ClaimTemplate, ConvertError> {
    let name = name_of(&t.metadata)?;
    let (requests, constraints, config) = claim_spec(&t.spec.spec, "spec.spec")?;
    Ok(ClaimTemplate { namespace: namespace_of(&t.metadata), name, requests, constraints, config })
}

/// A pod's `spec.resourceClaims`.
pub(super) fn pod_claims(spec: &corev1::PodSpec) -> Result<Vec<PodClaim>, ConvertError> {
    spec.resource_claims
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let source =
                match (non_empty(c.resource_claim_name.as_ref()), non_empty(c.resource_claim_template_name.as_ref())) {
                    (Some(n), None) => ClaimSource::Claim(n),
                    (None, Some(t)) => ClaimSource::Template(t),
                    _ => {
                        return Err(invalid(
                            format!("spec.resourceClaims[{i}]"),
                            format_args!("{:?}", c.name),
                            "exactly one of resourceClaimName and resourceClaimTemplateName must be set",
                        ));
                    }
                };
            Ok(PodClaim { name: c.name.clone(), source })
        })
        .collect()
}

/// A pod's `status.resourceClaimStatuses`.
pub(super) fn claim_statuses(status: Option<&corev1::PodStatus>) -> Vec<(String, Option<String>)> {
    status
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (s.name.clone(), non_empty(s.resource_claim_name.as_ref())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml<T: serde::de::DeserializeOwned>(y: &str) -> T {
        serde_yaml_ng::from_str(y).unwrap_or_else(|e| panic!("bad test yaml: {e}\n{y}"))
    }

    #[test]
    fn slices_classes_and_claims_convert() {
        let s = slice_from_k8s(&yaml(
            r#"
metadata: {name: n1-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: n1
  pool: {name: n1, generation: 3, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      model: {string: a100}
      index: {int: 0}
      driverVersion: {version: "550.54.15"}
    capacity:
      memory: {value: 40Gi}
    taints: [{key: unhealthy, effect: NoSchedule}]
"#,
        ))
        .unwrap();
        assert_eq!((s.generation, s.scope.clone(), s.devices.len()), (3, Some(NodeScope::Node("n1".into())), 1));
        let d = &s.devices[0];
        assert_eq!(d.attribute("gpu.nvidia.com", "gpu.nvidia.com/model"), Some(&Attribute::String("a100".into())));
        assert_eq!(d.attribute("gpu.nvidia.com", "index"), Some(&Attribute::Int(0)));
        assert_eq!(d.capacity["memory"].value(), 40 << 30);
        assert_eq!(d.taints.len(), 1);

        let c = device_class_from_k8s(&yaml(
            r#"
metadata: {name: a100}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
"#,
        ))
        .unwrap();
        assert_eq!(c.selectors, vec![r#"device.driver == "gpu.nvidia.com""#.to_string()]);

        let claim = resource_claim_from_k8s(&yaml(
            r#"
metadata:
  name: pod-gpu-x1
  namespace: ml
  uid: u1
  ownerReferences: [{apiVersion: v1, kind: Pod, name: pod, uid: pod-uid, controller: true}]
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: a100, count: 2}
    - name: nic
      firstAvailable:
      - {name: fast, deviceClassName: nic-100g}
      - {name: slow, deviceClassName: nic-25g, allocationMode: All}
    constraints:
    - {requests: [gpu], matchAttribute: gpu.nvidia.com/numa}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.nvidia.com, pool: n1, device: gpu-0}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [n1]}]
  reservedFor: [{resource: pods, name: pod, uid: pod-uid}]
"#,
        ))
        .unwrap();
        assert_eq!(claim.controller_uid.as_deref(), Some("pod-uid"));
        assert_eq!(claim.requests[0].exactly.as_ref().map(|e| e.mode), Some(AllocationMode::ExactCount(2)));
        assert_eq!(claim.requests[1].first_available[1].1.mode, AllocationMode::All);
        assert_eq!(claim.allocation.as_ref().and_then(|a| a.node_name()), Some("n1"));
        assert!(claim.is_reserved_for("pod-uid"));
    }

    #[test]
    fn bad_objects_name_the_field() {
        // (what, error)
        let cases: Vec<(Result<(), ConvertError>, &str)> = vec![
            (
                slice_from_k8s(&yaml(
                    "metadata: {name: s}\nspec: {driver: d, nodeName: n, allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1}}",
                ))
                .map(|_| ()),
                "spec: Invalid value: : exactly one of nodeName, nodeSelector and allNodes may be set",
            ),
            (
                slice_from_k8s(&yaml(
                    "metadata: {name: s}\nspec: {driver: d, allNodes: true, pool: {name: p, generation: 1, resourceSliceCount: 1}, devices: [{name: x, attributes: {v: {version: one}}}]}",
                ))
                .map(|_| ()),
                "spec.devices[0].attributes[v].version: Invalid value: \"one\": must be a semantic version",
            ),
            (
                resource_claim_from_k8s(&yaml(
                    "metadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, allocationMode: Some}}]}}",
                ))
                .map(|_| ()),
                "spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": supported values: \"All\", \"ExactCount\"",
            ),
            (
                resource_claim_from_k8s(&yaml(
                    "metadata: {name: c}\nspec: {devices: {requests: [{name: r, exactly: {deviceClassName: g, count: 0}}]}}",
                ))
                .map(|_| ()),
                "spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero",
            ),
            (
                device_class_from_k8s(&yaml("metadata: {name: c}\nspec: {selectors: [{}]}")).map(|_| ()),
                "spec.selectors[0].cel.expression: Required value",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got.map_err(|e| e.to_string()), Err(want.to_string()));
        }
    }

    #[test]
    fn pods_name_their_claims() {
        let p = super::super::pod_from_k8s(&yaml(
            r#"
metadata: {name: p, namespace: ml}
spec:
  containers: [{name: c, resources: {claims: [{name: gpu}]}}]
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-a100}
  - {name: shared, resourceClaimName: team-gpus}
status:
  resourceClaimStatuses: [{name: gpu, resourceClaimName: p-gpu-7xk2p}]
"#,
        ))
        .unwrap();
        assert_eq!(p.resource_claims[0].source, ClaimSource::Template("one-a100".into()));
        assert_eq!(p.claim_name(&p.resource_claims[0]), Ok(Some(("p-gpu-7xk2p", true))));
        assert_eq!(p.claim_name(&p.resource_claims[1]), Ok(Some(("team-gpus", false))));
        let mut waiting = p.clone();
        waiting.claim_statuses.clear();
        assert_eq!(
            waiting.claim_name(&waiting.resource_claims[0]),
            Err("pod \"ml/p\": ResourceClaim not created yet".to_string())
        );
    }

    /// What the scheduler writes reads back as what it decided.
    #[test]
    fn allocations_round_trip_through_the_api_types() {
        let a: resourcev1::AllocationResult = yaml(
            r#"
devices:
  results:
  - {request: gpu, driver: gpu.nvidia.com, pool: n1, device: gpu-0}
  - {request: r/any, driver: gpu.nvidia.com, pool: n1, device: gpu-1, adminAccess: true,
     tolerations: [{key: broken, operator: Exists, effect: NoSchedule}, {operator: Equal, key: k, value: v}]}
  config:
  - {source: FromClass, requests: [gpu], opaque: {driver: gpu.nvidia.com, parameters: {sharing: {strategy: TimeSlicing}}}}
  - {source: FromClaim, opaque: {driver: gpu.nvidia.com, parameters: {x: 1}}}
nodeSelector:
  nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]
"#,
        );
        let ours = allocation(&a).unwrap();
        let back = allocation_to_k8s(&ours);
        assert_eq!(allocation(&back).unwrap(), ours);
        assert_eq!(back, a);
    }
}
