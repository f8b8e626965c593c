//! Property tests of the engine's parsers of outside numbers over extreme
//! values (docs/RELIABILITY.md, "Hostile numbers"): Go durations,
//! quantities, RFC 3339 times, node facts, Prometheus answers, and the
//! numbers of Pods, Nodes, Queues, PodDisruptionBudgets and PodGroups.
//! None may panic; what they accept is in range.

use std::collections::BTreeMap;
use std::time::Duration;

use engine::bounds::MAX_DURATION;
use engine::config::go_duration;
use engine::convert::{self, PodGroupObject, QueueObject};
use engine::facts::{self, CELSIUS, FactsConfig, NodeFacts};
use engine::quantity::Quantity;
use engine::testing::{extremes, node};
use gpu_scheduler_engine as engine;
use proptest::prelude::*;
use serde_json::json;

const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Digits as a number may be written: small, near 2^63 and 2^64, or long.
fn digits() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|v| v.to_string()),
        any::<u128>().prop_map(|v| v.to_string()),
        (0u64..1000).prop_map(|v| v.to_string()),
        "[0-9]{1,60}",
    ]
}

/// Text where a number belongs: the shared extremes, numbers of every
/// size and sign, and a few characters of anything.
fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(extremes::all().collect::<Vec<_>>()).prop_map(String::from),
        digits(),
        any::<i128>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        (digits(), -400i32..400).prop_map(|(m, e)| format!("{m}e{e}")),
        ".{0,12}",
    ]
}

proptest! {
    /// A number with a unit is accepted exactly when it is at most Go's
    /// longest duration, and then it is exact.
    #[test]
    fn durations_are_exact_or_out_of_range(n in digits(), unit in prop::sample::select(UNITS)) {
        let (suffix, nanos) = unit;
        let text = format!("{n}{suffix}");
        let want = n.parse::<u128>().ok().and_then(|v| v.checked_mul(nanos)).filter(|v| *v <= MAX_DURATION.as_nanos());
        match go_duration::parse(&text) {
            Ok(d) => prop_assert_eq!(Some(d.as_nanos()), want, "{}", text),
            Err(e) => {
                prop_assert_eq!(want, None, "{} refused: {}", text, e);
                prop_assert!(e.contains("out of range"), "{}: {}", text, e);
            }
        }
    }

    #[test]
    fn any_text_parses_to_a_duration_in_range_or_an_error(
        parts in prop::collection::vec((number_text(), prop::sample::select(UNITS)), 1..4),
        sign in prop::sample::select(&["", "-", "+"][..]),
    ) {
        let text = sign.to_string() + &parts.iter().map(|(n, (u, _))| format!("{n}{u}")).collect::<String>();
        if let Ok(d) = go_duration::parse(&text) {
            prop_assert!(d <= MAX_DURATION);
        }
        for t in [text.as_str(), &parts[0].0] {
            let _ = go_duration::parse(t);
        }
    }

    /// What the configuration writes back, it reads back the same.
    #[test]
    fn formatted_durations_read_back(nanos in 0..=MAX_DURATION.as_nanos() as u64) {
        let d = Duration::from_nanos(nanos);
        prop_assert_eq!(go_duration::parse(&go_duration::format(&d)), Ok(d));
    }

    #[test]
    fn quantities_with_any_suffix_parse_or_refuse(
        n in number_text(),
        suffix in prop::sample::select(&["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e308", "E-320", "e2147483648"][..]),
    ) {
        if let Ok(q) = Quantity::parse(&format!("{n}{suffix}")) {
            // Saturated, not wrapped.
            let (v, m) = (q.value(), q.milli_value());
            prop_assert!(q.signum() == 0 || v.signum() == q.signum() && m.signum() == q.signum());
        }
    }

    /// Node annotations and labels with any number, time or text: facts in
    /// range or absent with a warning quoting the value; never a panic.
    #[test]
    fn node_facts_are_in_range_or_absent(v in number_text()) {
        for key in [facts::ANNOTATION_TEMPERATURE, facts::ANNOTATION_SPOT_EXPIRY, facts::ANNOTATION_LAST_ALERT] {
            let n = node("n").annotation(key, &v).label(engine::devices::LABEL_GPU_MEMORY, &v).build();
            let (f, warnings) = NodeFacts::of(&n, &FactsConfig::default());
            prop_assert!(f.temperature_celsius.is_none_or(|t| CELSIUS.contains(t)));
            prop_assert!(warnings.iter().all(|w| w.value == v));
        }
        let _ = facts::parse_time(&v);
    }

    #[test]
    fn prometheus_answers_give_finite_numbers(values in prop::collection::vec(number_text(), 1..4)) {
        let samples: Vec<_> = values
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"metric": {"node": format!("n{i}")}, "value": [1.5, v]}))
            .collect();
        let body = json!({"status": "success", "data": {"resultType": "vector", "result": samples}}).to_string();
        let read = engine::facts::provided::parse_prometheus_answer(&body, "node").map_err(TestCaseError::fail)?;
        prop_assert!(read.values().all(|v| v.is_finite()));
        // The sample's time is a number too.
        for t in &values {
            let body = format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"node":"a"}},"value":[{t},"1"]}}]}}}}"#);
            let _ = engine::facts::provided::parse_prometheus_answer(&body, "node");
        }
    }

    /// A pod's and a node's numbers where the API has them as text:
    /// quantities, GPU annotations, priorities, times.
    #[test]
    fn pods_and_nodes_with_extreme_numbers_convert_or_say_why(v in number_text()) {
        let annotations: BTreeMap<&str, &str> = [
            engine::devices::ANNOTATION_GPU_MILLI,
            engine::devices::ANNOTATION_GPU_MEMORY_MIB,
            engine::devices::ANNOTATION_GPU_INDEX,
            engine::devices::ANNOTATION_ALIBABA_GPU_COUNT,
        ]
        .into_iter()
        .map(|k| (k, v.as_str()))
        .collect();
        for resources in [json!({"cpu": v, "memory": v, "nvidia.com/gpu": v}), json!({"nvidia.com/mig-1g.5gb": v})] {
            let pod = json!({
                "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": annotations},
                "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": resources, "limits": resources}}],
                         "overhead": resources},
            });
            if let Ok(p) = serde_json::from_value(pod) {
                let _ = convert::pod_from_k8s(&p);
            }
            let node = json!({
                "metadata": {"name": "n", "labels": {"nvidia.com/gpu.memory": v}, "annotations": {facts::ANNOTATION_TEMPERATURE: v}},
                "status": {"allocatable": resources, "capacity": resources},
            });
            if let Ok(n) = serde_json::from_value(node) {
                let _ = convert::node_from_k8s(&n);
            }
        }
        let resource = format!("nvidia.com/mig-1g.{v}gb");
        prop_assert!(engine::devices::request::mig_memory_mib(resource.trim_start_matches("nvidia.com/mig-")) <= engine::devices::MAX_GPU_MEMORY_MIB);
    }

    #[test]
    fn queues_budgets_and_groups_convert_or_say_why(v in number_text()) {
        let number: serde_json::Value = serde_json::from_str(&v).unwrap_or_else(|_| json!(v));
        let queue = json!({"metadata": {"name": "q"}, "spec": {"weight": number, "quota": {"nvidia.com/gpu": number, "cpu": v}}});
        if let Ok(q) = serde_json::from_value::<QueueObject>(queue)
            && let Ok(q) = convert::queue_from_object(&q)
        {
            prop_assert!(convert::QUEUE_WEIGHT.contains(q.weight));
        }
        let pdb = json!({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"minAvailable": number, "maxUnavailable": format!("{v}%")}});
        if let Ok(b) = serde_json::from_value(pdb) {
            let _ = convert::pdb_from_k8s(&b);
        }
        let group = json!({"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": number, "scheduleTimeoutSeconds": number, "minResources": {"cpu": v}}});
        if let Ok(g) = serde_json::from_value::<PodGroupObject>(group) {
            let _ = convert::pod_group_from_object(&g);
        }
    }
}
