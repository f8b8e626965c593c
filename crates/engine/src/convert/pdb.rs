//! PodDisruptionBudgets (`policy/v1`).

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::selectors::optional_selector;
use super::{ConvertError, DEFAULT_NAMESPACE, invalid, non_empty, required};
use crate::disruption::{Budget, Pdb};

fn budget(v: Option<&IntOrString>, path: &str) -> Result<Option<Budget>, ConvertError> {
    match v {
        None => Ok(None),
        Some(IntOrString::Int(n)) if *n < 0 => Err(invalid(path, n, "must be greater than or equal to 0")),
        Some(IntOrString::Int(n)) => Ok(Some(Budget::Count(*n))),
        Some(IntOrString::String(s)) => {
            let p = s.strip_suffix('%').and_then(|p| p.parse::<i32>().ok()).filter(|p| (0..=100).contains(p));
            p.map(|p| Some(Budget::Percent(p))).ok_or_else(|| {
                invalid(path, format_args!("{s:?}"), "must be an integer or a percentage between 0% and 100%")
            })
        }
    }
}

/// Converts a PodDisruptionBudget; errors name the field.
pub fn pdb_from_k8s(p: &PodDisruptionBudget) -> Result<Pdb, ConvertError> {
    let meta = &p.metadata;
    let name = non_empty(meta.name.as_ref()).ok_or_else(|| required("metadata.name", ""))?;
    let namespace = non_empty(meta.namespace.as_ref()).unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let spec = p.spec.as_ref();
    let min_available = budget(spec.and_then(|s| s.min_available.as_ref()), "spec.minAvailable")?;
    let max_unavailable = budget(spec.and_then(|s| s.max_unavailable.as_ref()), "spec.maxUnavailable")?;
    if min_available.is_some() && max_unavailable.is_some() {
        return Err(invalid("spec", "{...}", "minAvailable and maxUnavailable cannot be both set"));
    }
    let status = p.status.as_ref();
    Ok(Pdb {
        selector: optional_selector(spec.and_then(|s| s.selector.as_ref()), "spec.selector")?,
        min_available,
        max_unavailable,
        status_allowed: status.and_then(|s| s.disruptions_allowed),
        disrupted_pods: status
            .and_then(|s| s.disrupted_pods.as_ref())
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default(),
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Labels;

    fn convert(yaml: &str) -> Result<Pdb, ConvertError> {
        let p: PodDisruptionBudget = serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
        pdb_from_k8s(&p)
    }

    #[test]
    fn budgets_convert() {
        let p = convert(
            "metadata: {name: b, namespace: shop}\nspec:\n  minAvailable: 50%\n  selector: {matchLabels: {app: web}}\n",
        )
        .unwrap();
        assert_eq!((p.min_available, p.max_unavailable, p.status_allowed), (Some(Budget::Percent(50)), None, None));
        let web: Labels = [("app".to_string(), "web".to_string())].into();
        assert!(p.selector.matches(&web));
        let live = convert(
            "metadata: {name: b}\nspec: {maxUnavailable: 1, selector: {}}\nstatus: {disruptionsAllowed: 0, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3, disruptedPods: {web-1: \"2026-01-01T00:00:00Z\"}}\n",
        )
        .unwrap();
        assert_eq!((live.max_unavailable, live.status_allowed), (Some(Budget::Count(1)), Some(0)));
        assert_eq!(live.disrupted_pods, ["web-1"]);
        assert!(live.selector.matches(&Labels::new()), "an empty selector covers every pod");
        let nil = convert("metadata: {name: b}\nspec: {minAvailable: 1}\n").unwrap();
        assert!(!nil.selector.matches(&Labels::new()), "no selector covers no pod");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("metadata: {name: b}\nspec: {minAvailable: 150%}\n", "spec.minAvailable"),
            ("metadata: {name: b}\nspec: {maxUnavailable: -1}\n", "spec.maxUnavailable"),
            ("metadata: {name: b}\nspec: {minAvailable: 1, maxUnavailable: 1}\n", "spec"),
            ("spec: {minAvailable: 1}\n", "metadata.name"),
        ];
        for (yaml, path) in cases {
            assert_eq!(convert(yaml).expect_err(yaml).path, path, "{yaml}");
        }
    }
}
