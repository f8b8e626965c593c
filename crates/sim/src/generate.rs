//! Synthetic clusters shaped like kube-scheduler's scheduler_perf
//! `SchedulingBasic` workload (nodes of 4 cpu, 32 GiB, 110 pods; pods of
//! 100m and 500 MiB), for benchmarks and load tests.

use std::fmt::Write;

/// Zones the nodes are spread over, round-robin.
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// Multi-document YAML: `nodes` Nodes then `pods` pending Pods for `scheduler_name`.
pub fn scheduling_basic_yaml(nodes: usize, pods: usize, scheduler_name: &str) -> String {
    let mut out = String::with_capacity(nodes * 400 + pods * 400);
    for i in 0..nodes {
        let zone = ZONES[i % ZONES.len()];
        let _ = write!(
            out,
            "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i}\n  labels:\n    kubernetes.io/hostname: node-{i}\n    topology.kubernetes.io/zone: {zone}\nstatus:\n  allocatable:\n    cpu: \"4\"\n    memory: 32Gi\n    pods: \"110\"\n"
        );
    }
    for i in 0..pods {
        let _ = write!(
            out,
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-{i}\n  namespace: default\nspec:\n  schedulerName: {scheduler_name}\n  containers:\n  - name: pause\n    image: registry.k8s.io/pause:3.10\n    resources:\n      requests:\n        cpu: 100m\n        memory: 500Mi\n"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Manifests;

    #[test]
    fn generated_manifests_parse() {
        let mut m = Manifests::default();
        m.add_str("gen", &scheduling_basic_yaml(3, 2, "gpu-scheduler")).unwrap();
        assert_eq!(m.objects.len(), 5);
    }
}
