//! PodGroups on a live cluster: the status patch the scheduler writes. The CRD's objects are
//! `engine::convert::PodGroupObject`, a kube-rs resource by kube-derive
//! (k8s-openapi has no type for them), lenient so that a field a newer CRD
//! adds does not stop the watch.

use engine::convert::PodGroupStatus;
use engine::gang::GangStatus;
use serde_json::json;

/// The merge patch of a PodGroup's status (a CRD takes no strategic
/// merge; the status has no lists to merge). Typed by the CRD's status, so
/// what the scheduler writes is in the schema.
pub fn status_patch(status: &GangStatus) -> serde_json::Value {
    let s = PodGroupStatus {
        phase: Some(status.phase.as_str().to_string()),
        scheduled: Some(status.scheduled.into()),
        running: Some(status.running.into()),
        schedule_start_time: status
            .schedule_start
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms as i64).ok())
            .map(|t| t.to_string()),
        ..PodGroupStatus::default()
    };
    json!({ "status": s })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::convert::PodGroupObject;
    use engine::convert::pod_group_from_object;
    use engine::gang::GangPhase;
    use kube::Resource;

    #[test]
    fn live_objects_convert_leniently_and_the_status_patch_is_a_merge() {
        let v = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml", "uid": "u1"},
            "spec": {"minMember": 2, "minResources": {"nvidia.com/gpu": 16}, "futureField": true},
            "status": {"phase": "Pending"}
        });
        let r: PodGroupObject = serde_json::from_value(v).unwrap_or_default();
        let g = pod_group_from_object(&r).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g.key(), g.min_member, g.min_resources.get("nvidia.com/gpu")), ("ml/g".into(), 2, 16));
        assert_eq!(
            PodGroupObject::url_path(&(), Some("ml")),
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups"
        );
        let s = GangStatus { phase: GangPhase::Scheduled, scheduled: 4, running: 0, schedule_start: Some(0) };
        assert_eq!(
            status_patch(&s),
            json!({"status": {"phase": "Scheduled", "scheduled": 4, "running": 0, "scheduleStartTime": "1970-01-01T00:00:00Z"}})
        );
    }

    #[test]
    fn a_number_out_of_int32_is_the_podgroups_error_not_the_lists() {
        // Kubernetes 1.35 stores it: the CRD's int32 format is not enforced.
        let list = json!({"items": [
            {"metadata": {"name": "huge", "namespace": "ml"}, "spec": {"minMember": 3_000_000_000_i64}},
            {"metadata": {"name": "late", "namespace": "ml"}, "spec": {"minMember": 1, "scheduleTimeoutSeconds": -3_000_000_000_i64}},
            {"metadata": {"name": "fine", "namespace": "ml"}, "spec": {"minMember": 2}}
        ]});
        let items: Vec<PodGroupObject> = serde_json::from_value(list["items"].clone()).unwrap_or_default();
        assert_eq!(items.len(), 3, "every item reads");
        let errors: Vec<String> =
            items.iter().filter_map(|g| pod_group_from_object(g).err()).map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors[0].contains("spec.minMember") && errors[0].contains("int32"), "{errors:?}");
        assert!(errors[1].contains("spec.scheduleTimeoutSeconds"), "{errors:?}");
        assert!(pod_group_from_object(&items[2]).is_ok());
    }
}
