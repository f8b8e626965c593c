//! Taints, tolerations and topology-spread constraints.

use k8s_openapi::api::core::v1 as corev1;

use super::selectors::optional_selector;
use super::{ConvertError, invalid, required, unsupported};
use crate::model::{
    self, InclusionPolicy, Requirement, SelectorOp, Taint, TaintEffect, Toleration, TolerationOp,
    TopologySpreadConstraint, UnsatisfiableAction,
};

// --------------------------------------------------------- taints, tolerations

const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

pub(super) fn taint_effect(effect: &str) -> Option<TaintEffect> {
    match effect {
        "NoSchedule" => Some(TaintEffect::NoSchedule),
        "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
        "NoExecute" => Some(TaintEffect::NoExecute),
        _ => None,
    }
}

pub(super) fn toleration(t: &corev1::Toleration, path: &str) -> Result<Toleration, ConvertError> {
    let key = t.key.clone().unwrap_or_default();
    let value = t.value.clone().unwrap_or_default();
    let op_str = t.operator.as_deref().unwrap_or("");
    let op = match op_str {
        "" | "Equal" => TolerationOp::Equal,
        "Exists" => TolerationOp::Exists,
        other => {
            return Err(unsupported(format!("{path}.operator"), other, &["Equal", "Exists"]));
        }
    };
    if key.is_empty() && op != TolerationOp::Exists {
        return Err(invalid(
            format!("{path}.operator"),
            format_args!("{op_str:?}"),
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ));
    }
    if op == TolerationOp::Exists && !value.is_empty() {
        let rendered = serde_json::to_string(t).unwrap_or_default();
        return Err(invalid(format!("{path}.operator"), rendered, "value must be empty when `operator` is 'Exists'"));
    }
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(taint_effect(e).ok_or_else(|| unsupported(format!("{path}.effect"), e, TAINT_EFFECTS))?),
    };
    if t.toleration_seconds.is_some() && effect != Some(TaintEffect::NoExecute) {
        return Err(invalid(
            format!("{path}.effect"),
            format_args!("{:?}", t.effect.as_deref().unwrap_or("")),
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
    Ok(Toleration { key, op, value, effect })
}

pub(super) fn taint(t: &corev1::Taint, path: &str) -> Result<Taint, ConvertError> {
    if t.key.is_empty() {
        return Err(required(format!("{path}.key"), ""));
    }
    if t.effect.is_empty() {
        return Err(required(format!("{path}.effect"), ""));
    }
    let effect =
        taint_effect(&t.effect).ok_or_else(|| unsupported(format!("{path}.effect"), &t.effect, TAINT_EFFECTS))?;
    Ok(Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect })
}

// ------------------------------------------------------------ spread

fn inclusion_policy(v: Option<&str>, default: InclusionPolicy, path: &str) -> Result<InclusionPolicy, ConvertError> {
    match v {
        None => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(unsupported(path, other, &["Honor", "Ignore"])),
    }
}

pub(super) fn spread_constraint(
    c: &corev1::TopologySpreadConstraint,
    labels: &model::Labels,
    path: &str,
) -> Result<TopologySpreadConstraint, ConvertError> {
    if c.max_skew <= 0 {
        return Err(invalid(format!("{path}.maxSkew"), c.max_skew, "must be greater than zero"));
    }
    if c.topology_key.is_empty() {
        return Err(required(format!("{path}.topologyKey"), "can not be empty"));
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => UnsatisfiableAction::DoNotSchedule,
        "ScheduleAnyway" => UnsatisfiableAction::ScheduleAnyway,
        other => {
            return Err(unsupported(format!("{path}.whenUnsatisfiable"), other, &["DoNotSchedule", "ScheduleAnyway"]));
        }
    };
    if let Some(min) = c.min_domains {
        if min <= 0 {
            return Err(invalid(format!("{path}.minDomains"), min, "must be greater than zero"));
        }
        if when_unsatisfiable != UnsatisfiableAction::DoNotSchedule {
            return Err(invalid(
                format!("{path}.minDomains"),
                min,
                &format!("can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {}", c.when_unsatisfiable),
            ));
        }
    }
    let mut selector = optional_selector(c.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    for key in c.match_label_keys.iter().flatten() {
        if let Some(v) = labels.get(key) {
            selector.requirements.push(Requirement { key: key.clone(), op: SelectorOp::In, values: vec![v.clone()] });
        }
    }
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        selector,
        min_domains: c.min_domains,
        node_affinity_policy: inclusion_policy(
            c.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
            &format!("{path}.nodeAffinityPolicy"),
        )?,
        node_taints_policy: inclusion_policy(
            c.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
            &format!("{path}.nodeTaintsPolicy"),
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn topology_spread_constraints_compile() {
        let p = convert(
            r#"
metadata:
  name: p
  labels: {app: web, pod-template-hash: abc}
spec:
  containers: []
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: zone
    whenUnsatisfiable: DoNotSchedule
    minDomains: 3
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [pod-template-hash, absent]
  - maxSkew: 2
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    nodeAffinityPolicy: Ignore
    nodeTaintsPolicy: Honor
"#,
        );
        let c = &p.topology_spread_constraints;
        assert_eq!(
            c[0],
            TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: UnsatisfiableAction::DoNotSchedule,
                selector: model::LabelSelector {
                    requirements: vec![
                        req("app", SelectorOp::In, &["web"]),
                        req("pod-template-hash", SelectorOp::In, &["abc"])
                    ],
                    matches_nothing: false,
                },
                min_domains: Some(3),
                node_affinity_policy: InclusionPolicy::Honor,
                node_taints_policy: InclusionPolicy::Ignore,
            }
        );
        assert_eq!(c[1].when_unsatisfiable, UnsatisfiableAction::ScheduleAnyway);
        assert_eq!(c[1].selector, model::LabelSelector::nothing());
        assert_eq!(
            (c[1].node_affinity_policy, c[1].node_taints_policy),
            (InclusionPolicy::Ignore, InclusionPolicy::Honor)
        );
    }
}
