//! Label selectors, node selectors and (anti-)affinity terms, compiled and
//! validated as component-helpers' nodeaffinity does.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use super::{ConvertError, invalid, json_values, required, unsupported};
use crate::model::{
    self, AffinityTerm, NodeSelector, NodeSelectorTerm, PreferredSchedulingTerm, Requirement, SelectorOp,
    WeightedAffinityTerm,
};

// ---------------------------------------------------------------- selectors

const NODE_SELECTOR_OPS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const LABEL_SELECTOR_OPS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

fn selector_op(op: &str, allowed: &[&str], path: &str) -> Result<SelectorOp, ConvertError> {
    let parsed = match op {
        "In" => SelectorOp::In,
        "NotIn" => SelectorOp::NotIn,
        "Exists" => SelectorOp::Exists,
        "DoesNotExist" => SelectorOp::DoesNotExist,
        "Gt" => SelectorOp::Gt,
        "Lt" => SelectorOp::Lt,
        _ => return Err(unsupported(format!("{path}.operator"), op, allowed)),
    };
    if !allowed.contains(&op) {
        return Err(unsupported(format!("{path}.operator"), op, allowed));
    }
    Ok(parsed)
}

/// `labels.NewRequirement`'s checks on the values of a requirement at `path`.
fn requirement(
    key: &str,
    op: SelectorOp,
    values: Option<&Vec<String>>,
    path: &str,
) -> Result<Requirement, ConvertError> {
    let vals = values.map_or(&[][..], Vec::as_slice);
    let values_path = || format!("{path}.values");
    match op {
        SelectorOp::In | SelectorOp::NotIn if vals.is_empty() => {
            return Err(invalid(
                values_path(),
                json_values(values),
                "for 'in', 'notin' operators, values set can't be empty",
            ));
        }
        SelectorOp::Exists | SelectorOp::DoesNotExist if !vals.is_empty() => {
            return Err(invalid(
                values_path(),
                json_values(values),
                "values set must be empty for exists and does not exist",
            ));
        }
        SelectorOp::Gt | SelectorOp::Lt => {
            if vals.len() != 1 {
                return Err(invalid(
                    values_path(),
                    json_values(values),
                    "for 'Gt', 'Lt' operators, exactly one value is required",
                ));
            }
            if vals[0].parse::<i64>().is_err() {
                return Err(invalid(
                    format!("{path}.values[0]"),
                    format_args!("{:?}", vals[0]),
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
        }
        _ => {}
    }
    Ok(Requirement { key: key.to_string(), op, values: vals.to_vec() })
}

/// Compiles a `metav1.LabelSelector` found at `path` (e.g.
/// `spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector`).
/// An empty selector matches everything; callers map an absent one to
/// [`model::LabelSelector::nothing`] where Kubernetes does.
pub fn label_selector(sel: &metav1::LabelSelector, path: &str) -> Result<model::LabelSelector, ConvertError> {
    let mut requirements = Vec::new();
    for (k, v) in sel.match_labels.iter().flatten() {
        requirements.push(Requirement { key: k.clone(), op: SelectorOp::In, values: vec![v.clone()] });
    }
    for (i, expr) in sel.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = selector_op(&expr.operator, LABEL_SELECTOR_OPS, &p)?;
        requirements.push(requirement(&expr.key, op, expr.values.as_ref(), &p)?);
    }
    Ok(model::LabelSelector { requirements, matches_nothing: false })
}

/// A selector that may be absent: absent matches nothing.
pub(super) fn optional_selector(
    sel: Option<&metav1::LabelSelector>,
    path: &str,
) -> Result<model::LabelSelector, ConvertError> {
    match sel {
        Some(s) => label_selector(s, path),
        None => Ok(model::LabelSelector::nothing()),
    }
}

fn node_selector_term(term: &corev1::NodeSelectorTerm, path: &str) -> Result<NodeSelectorTerm, ConvertError> {
    let mut out = NodeSelectorTerm::default();
    for (i, expr) in term.match_expressions.iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = selector_op(&expr.operator, NODE_SELECTOR_OPS, &p)?;
        out.match_expressions.push(requirement(&expr.key, op, expr.values.as_ref(), &p)?);
    }
    for (i, expr) in term.match_fields.iter().flatten().enumerate() {
        let p = format!("{path}.matchFields[{i}]");
        if expr.key != "metadata.name" {
            return Err(unsupported(format!("{p}.key"), &expr.key, &["metadata.name"]));
        }
        let op = selector_op(&expr.operator, &["In", "NotIn"], &p)?;
        let vals = expr.values.as_deref().unwrap_or_default();
        if vals.len() != 1 {
            return Err(invalid(format!("{p}.values"), json_values(expr.values.as_ref()), "must have one element"));
        }
        out.match_fields.push(Requirement { key: expr.key.clone(), op, values: vals.to_vec() });
    }
    Ok(out)
}

fn weight(w: i32, path: &str) -> Result<i32, ConvertError> {
    if !(1..=100).contains(&w) {
        return Err(invalid(format!("{path}.weight"), w, "must be in the range 1-100"));
    }
    Ok(w)
}

/// A `NodeSelector` at `path` (its `nodeSelectorTerms`).
pub(super) fn node_selector(ns: &corev1::NodeSelector, path: &str) -> Result<NodeSelector, ConvertError> {
    let path = format!("{path}.nodeSelectorTerms");
    if ns.node_selector_terms.is_empty() {
        return Err(required(path, "must have at least one node selector term"));
    }
    let terms = ns
        .node_selector_terms
        .iter()
        .enumerate()
        .map(|(i, t)| node_selector_term(t, &format!("{path}[{i}]")))
        .collect::<Result<_, _>>()?;
    Ok(NodeSelector { terms })
}

pub(super) fn node_affinity(
    na: &corev1::NodeAffinity,
) -> Result<(Option<NodeSelector>, Vec<PreferredSchedulingTerm>), ConvertError> {
    const BASE: &str = "spec.affinity.nodeAffinity";
    let required = match na.required_during_scheduling_ignored_during_execution.as_ref() {
        None => None,
        Some(ns) => Some(node_selector(ns, &format!("{BASE}.requiredDuringSchedulingIgnoredDuringExecution"))?),
    };
    let mut preferred = Vec::new();
    for (i, t) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
        let path = format!("{BASE}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        preferred.push(PreferredSchedulingTerm {
            weight: weight(t.weight, &path)?,
            term: node_selector_term(&t.preference, &format!("{path}.preference"))?,
        });
    }
    Ok((required, preferred))
}

/// A `PodAffinityTerm` of a pod in `namespace` with `labels`, as the
/// scheduler's `newAffinityTerm` after the API server merged
/// `matchLabelKeys` (`key In [value]`) and `mismatchLabelKeys` (`key NotIn
/// [value]`) for the keys the pod has.
fn affinity_term(
    term: &corev1::PodAffinityTerm,
    namespace: &str,
    labels: &model::Labels,
    path: &str,
) -> Result<AffinityTerm, ConvertError> {
    if term.topology_key.is_empty() {
        return Err(required(format!("{path}.topologyKey"), "can not be empty"));
    }
    let mut selector = optional_selector(term.label_selector.as_ref(), &format!("{path}.labelSelector"))?;
    if term.label_selector.is_some() {
        let merged = [(&term.match_label_keys, SelectorOp::In), (&term.mismatch_label_keys, SelectorOp::NotIn)];
        for (keys, op) in merged {
            for key in keys.iter().flatten() {
                if let Some(v) = labels.get(key) {
                    selector.requirements.push(Requirement { key: key.clone(), op, values: vec![v.clone()] });
                }
            }
        }
    }
    let namespace_selector = term
        .namespace_selector
        .as_ref()
        .map(|s| label_selector(s, &format!("{path}.namespaceSelector")))
        .transpose()?;
    let mut namespaces = term.namespaces.clone().unwrap_or_default();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(namespace.to_string());
    }
    Ok(AffinityTerm { namespaces, namespace_selector, selector, topology_key: term.topology_key.clone() })
}

pub(super) fn pod_affinity_terms(
    required: Option<&Vec<corev1::PodAffinityTerm>>,
    preferred: Option<&Vec<corev1::WeightedPodAffinityTerm>>,
    namespace: &str,
    labels: &model::Labels,
    base: &str,
) -> Result<model::PodAffinity, ConvertError> {
    let mut out = model::PodAffinity::default();
    for (i, t) in required.into_iter().flatten().enumerate() {
        let path = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.required.push(affinity_term(t, namespace, labels, &path)?);
    }
    for (i, t) in preferred.into_iter().flatten().enumerate() {
        let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        out.preferred.push(WeightedAffinityTerm {
            weight: weight(t.weight, &path)?,
            term: affinity_term(&t.pod_affinity_term, namespace, labels, &format!("{path}.podAffinityTerm"))?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::model::{TaintEffect, Toleration, TolerationOp};

    #[test]
    fn tolerations_and_node_affinity() {
        let p = convert(
            r#"
metadata: {name: p}
spec:
  containers: []
  tolerations:
  - {key: k, value: v}
  - {operator: Exists}
  - {key: gpu, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a, b]}
          - {key: cores, operator: Gt, values: ["8"]}
          matchFields:
          - {key: metadata.name, operator: NotIn, values: [bad]}
        - matchExpressions:
          - {key: spot, operator: DoesNotExist}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference:
          matchExpressions:
          - {key: disk, operator: Exists}
"#,
        );
        assert_eq!(
            p.tolerations,
            vec![
                Toleration { key: "k".into(), op: TolerationOp::Equal, value: "v".into(), effect: None },
                Toleration { key: String::new(), op: TolerationOp::Exists, value: String::new(), effect: None },
                Toleration {
                    key: "gpu".into(),
                    op: TolerationOp::Exists,
                    value: String::new(),
                    effect: Some(TaintEffect::NoExecute)
                },
            ]
        );
        let want = NodeSelector {
            terms: vec![
                NodeSelectorTerm {
                    match_expressions: vec![
                        req("zone", SelectorOp::In, &["a", "b"]),
                        req("cores", SelectorOp::Gt, &["8"]),
                    ],
                    match_fields: vec![req("metadata.name", SelectorOp::NotIn, &["bad"])],
                },
                NodeSelectorTerm {
                    match_expressions: vec![req("spot", SelectorOp::DoesNotExist, &[])],
                    match_fields: vec![],
                },
            ],
        };
        assert_eq!(p.required_node_affinity, Some(want));
        assert_eq!(
            p.preferred_node_affinity,
            vec![PreferredSchedulingTerm {
                weight: 10,
                term: NodeSelectorTerm {
                    match_expressions: vec![req("disk", SelectorOp::Exists, &[])],
                    match_fields: vec![]
                },
            }]
        );
    }

    #[test]
    fn pod_affinity_terms_compile() {
        let p = convert(
            r#"
metadata:
  name: p
  namespace: team
  labels: {app: web, tenant: a, version: v2}
spec:
  containers: []
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: zone
        labelSelector: {matchLabels: {app: web}}
        matchLabelKeys: [version, missing]
      - topologyKey: zone
        namespaceSelector: {}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          namespaces: [other]
          namespaceSelector: {matchLabels: {env: prod}}
          labelSelector:
            matchExpressions: [{key: app, operator: NotIn, values: [db]}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchLabels: {app: web}}
        mismatchLabelKeys: [tenant]
"#,
        );
        let aff = &p.pod_affinity;
        assert_eq!(
            aff.required[0],
            AffinityTerm {
                namespaces: vec!["team".into()],
                namespace_selector: None,
                selector: model::LabelSelector {
                    requirements: vec![req("app", SelectorOp::In, &["web"]), req("version", SelectorOp::In, &["v2"])],
                    matches_nothing: false,
                },
                topology_key: "zone".into(),
            },
            "matchLabelKeys merged for keys the pod has; own namespace by default"
        );
        assert_eq!(aff.required[1].namespaces, Vec::<String>::new(), "namespaceSelector given: no default namespace");
        assert_eq!(aff.required[1].namespace_selector, Some(model::LabelSelector::everything()));
        assert_eq!(aff.required[1].selector, model::LabelSelector::nothing(), "absent labelSelector matches nothing");
        let pref = &aff.preferred[0];
        assert_eq!(pref.weight, 50);
        assert_eq!(pref.term.namespaces, vec!["other".to_string()]);
        assert_eq!(pref.term.namespace_selector, Some(model::LabelSelector::from_match_labels([("env", "prod")])));
        assert_eq!(pref.term.selector.requirements, vec![req("app", SelectorOp::NotIn, &["db"])]);
        assert_eq!(pref.term.topology_key, "kubernetes.io/hostname");

        let anti = &p.pod_anti_affinity.required[0];
        assert_eq!(
            anti.selector.requirements,
            vec![req("app", SelectorOp::In, &["web"]), req("tenant", SelectorOp::NotIn, &["a"])]
        );
        assert!(p.has_required_anti_affinity() && p.has_affinity());
    }

    #[test]
    fn label_selector_compiles_and_validates() {
        let sel: metav1::LabelSelector = serde_yaml_ng::from_str(
            "matchLabels: {a: b}\nmatchExpressions:\n- {key: c, operator: Exists}\n- {key: d, operator: In, values: [x, y]}\n",
        )
        .unwrap();
        let got = label_selector(&sel, "sel").unwrap();
        assert_eq!(
            got.requirements,
            vec![
                req("a", SelectorOp::In, &["b"]),
                req("c", SelectorOp::Exists, &[]),
                req("d", SelectorOp::In, &["x", "y"])
            ]
        );
        assert_eq!(
            label_selector(&metav1::LabelSelector::default(), "sel").unwrap(),
            model::LabelSelector::everything()
        );

        let cases: &[(&str, &str, &str)] = &[
            (
                "{key: c, operator: In}",
                "sel.matchExpressions[0].values",
                "Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "{key: c, operator: NotIn, values: []}",
                "sel.matchExpressions[0].values",
                "Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                "{key: c, operator: Exists, values: [x]}",
                "sel.matchExpressions[0].values",
                "Invalid value: [\"x\"]: values set must be empty for exists and does not exist",
            ),
            (
                "{key: c, operator: DoesNotExist, values: [x]}",
                "sel.matchExpressions[0].values",
                "Invalid value: [\"x\"]: values set must be empty for exists and does not exist",
            ),
            (
                "{key: c, operator: Gt, values: [\"1\"]}",
                "sel.matchExpressions[0].operator",
                "Unsupported value: \"Gt\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"",
            ),
        ];
        for (expr, path, message) in cases {
            let sel: metav1::LabelSelector = serde_yaml_ng::from_str(&format!("matchExpressions: [{expr}]")).unwrap();
            let err = label_selector(&sel, "sel").expect_err(expr);
            assert_eq!((err.path.as_str(), err.message.as_str()), (*path, *message), "{expr}");
        }
    }
}
