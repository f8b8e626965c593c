//! Workloads beyond single pods on a real control plane (DESIGN.md §6): a
//! PyTorchJob-shaped gang (a Job whose pods carry the pod-group label,
//! created by kube-controller-manager's Job controller) bound together or
//! not at all, with the PodGroup's status written and the gang's message in
//! `kubectl describe`; a high-priority GPU pod preempting a low-priority one
//! the way kube-scheduler does (DisruptionTarget condition, deletion,
//! Preempted Event, nominatedNodeName), bound once the victim is gone; and
//! pods with PersistentVolumeClaims, bound by kube-controller-manager's PV
//! controller after the scheduler's PreBind; and a Deployment's pods spread
//! over zones by kube's default constraints, their selector taken from the
//! ReplicaSet the Deployment controller made; and GPUs through DRA: a claim
//! made by kube-controller-manager's resourceclaim controller from a
//! template for one GPU of a DeviceClass selecting `model == "a100"`,
//! allocated on the A100 node's ResourceSlice and written before the pod
//! is bound, and two pods sharing one claim on one node. KWOK plays the
//! kubelets: pods run, finish (`gpu-scheduler.io/run-for`) and go when
//! deleted, so a finished pod frees its GPUs and a victim leaves by itself.
//! The scenarios share one cluster, each in its own namespace,
//! schedulerName and pool.

mod support;

use std::collections::HashMap;

use support::cluster::{Cluster, config_yaml, items, node_yaml, pod_yaml, s, wait_for, with_grace};

type Scenario = fn(&Cluster);

#[test]
fn workloads_on_a_live_cluster() {
    let c = Cluster::up_with_lifecycles("workloads");
    c.install_crds();
    let scenarios: [(&str, Scenario); 7] = [
        ("pods that finish free their GPUs", finished_pods_free_their_gpus),
        ("a gang from a Job, all or nothing", gang_from_a_job),
        ("preemption", preemption),
        ("volumes", volumes),
        ("default spreading of a Deployment", default_spreading),
        ("GPUs through DRA", dra),
        ("queues with quotas", queues),
    ];
    let failed: Vec<&str> = std::thread::scope(|scope| {
        let handles: Vec<_> = scenarios.iter().map(|(name, f)| (*name, scope.spawn(|| f(&c)))).collect();
        handles.into_iter().filter_map(|(name, h)| h.join().is_err().then_some(name)).collect()
    });
    assert!(failed.is_empty(), "failed scenarios: {failed:?} (their panics are printed above)");
}

/// Pods come and go with no hand on them: a pod that runs for 10 s on the
/// only 8-GPU node succeeds (KWOK), leaves the scheduler's view (finished
/// pods hold nothing), and the 8-GPU pod that arrived while it ran is
/// bound there, not before it finished.
fn finished_pods_free_their_gpus(c: &Cluster) {
    c.kubectl(&["create", "namespace", "finish"]);
    c.kubectl_in(&["create", "-f", "-"], &gpu_nodes("finish", "finish", 1));
    let config = c.file("finish-config.yaml", &config_yaml("gs-finish", "finish", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("finish-scheduler.log"));
    let short = pod_yaml("short", "gs-finish", &[], "cpu: 1", 8)
        .replace("metadata:\n", "metadata:\n  annotations: {gpu-scheduler.io/run-for: 10s}\n");
    c.kubectl_in(&["create", "-n", "finish", "-f", "-"], &short);
    wait_for(60, "short running", || {
        let p = c.get_json(&["pod", "short", "-n", "finish"]);
        (p["status"]["phase"] == "Running").then_some(())
    });
    c.kubectl_in(&["create", "-n", "finish", "-f", "-"], &pod_yaml("next", "gs-finish", &[], "cpu: 1", 8));
    let next = wait_for(90, "next bound once short finished", || {
        let p = c.get_json(&["pod", "next", "-n", "finish"]);
        (!s(&p["spec"]["nodeName"]).is_empty()).then_some(p)
    });
    assert_eq!(s(&next["spec"]["nodeName"]), "finish-1");
    let short = c.get_json(&["pod", "short", "-n", "finish"]);
    assert_eq!(s(&short["status"]["phase"]), "Succeeded", "{short}");
    // RFC 3339 in seconds, UTC, on both sides: ordered as strings.
    let finished = s(&short["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]);
    let bound = next["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled" && c["status"] == "True"))
        .map(|c| s(&c["lastTransitionTime"]))
        .unwrap_or_default();
    assert!(!finished.is_empty() && bound >= finished, "next bound at {bound:?}, short finished at {finished:?}");
    assert!(sched.terminate().success());
}

/// Queues (the CRD of deploy/crds/) on live pods: team-a's namespace is
/// in the queue by its label, takes its 8 GPUs and borrows team-b's 8,
/// and a 17th GPU waits with the queue's reason; team-b's pod, within its
/// quota but lent out, reclaims it: team-a's borrowing pod is preempted.
fn queues(c: &Cluster) {
    for ns in ["qa", "qb"] {
        c.kubectl(&["create", "namespace", ns]);
    }
    c.kubectl(&["label", "namespace", "qa", "gpu-scheduler.io/queue=team-a"]);
    c.kubectl_in(&["create", "-f", "-"], &gpu_nodes("queues", "queues", 3));
    let queue = |name: &str, parent: &str, gpus: u32| {
        format!(
            "apiVersion: gpu-scheduler.io/v1alpha1\nkind: Queue\nmetadata: {{name: {name}}}\nspec:\n  parent: {parent}\n  quota: {{nvidia.com/gpu: {gpus}}}\n---\n"
        )
    };
    let root = "apiVersion: gpu-scheduler.io/v1alpha1\nkind: Queue\nmetadata: {name: gpu-pool}\nspec:\n  quota: {nvidia.com/gpu: 16}\n---\n";
    c.kubectl_in(
        &["create", "-f", "-"],
        &[root.to_string(), queue("team-a", "gpu-pool", 8), queue("team-b", "gpu-pool", 8)].concat(),
    );
    // The API server validates against the CRD's schema.
    let refused = c.kubectl_refused(
        &["create", "-f", "-"],
        "apiVersion: gpu-scheduler.io/v1alpha1\nkind: Queue\nmetadata: {name: bad}\nspec: {weight: 0}\n",
    );
    assert!(refused.contains("spec.weight"), "{refused}");

    let config = c.file("queues-config.yaml", &config_yaml("gs-queues", "queues", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("queues-scheduler.log"));
    // 17 GPUs for team-a: its 8, team-b's 8, and one too many.
    for (name, gpus) in [("a-big-1", 8), ("a-big-2", 8), ("a-one", 1)] {
        // Victims take 5 s to stop: long enough to see them terminating.
        let pod = with_grace(&pod_yaml(name, "gs-queues", &[], "cpu: 1", gpus), 5);
        c.kubectl_in(&["create", "-n", "qa", "-f", "-"], &pod);
    }
    wait_for(60, "team-a's 16 GPUs bound", || {
        let p = c.placements("qa");
        (p.iter().filter(|(n, node)| n.starts_with("a-big") && !node.is_empty()).count() == 2).then_some(())
    });
    // The leader writes the Queue's status, and /metrics has it.
    let status = wait_for(30, "team-a's status written", || {
        let q = c.get_json(&["queue", "team-a"]);
        (q["status"]["usage"]["nvidia.com/gpu"] == "16").then(|| q["status"].clone())
    });
    assert_eq!(
        (s(&status["borrowed"]["nvidia.com/gpu"]), status["admitted"].as_u64()),
        ("8".to_string(), Some(2)),
        "{status}"
    );
    // The gauges are refreshed once a second, apart from the status
    // (which any scheduler watching the Queue may have written first).
    wait_for(30, "team-a's usage in /metrics", || {
        let (_, metrics) = sched.get("/metrics");
        let used = metrics.lines().find_map(|l| {
            l.strip_prefix("gpu_scheduler_queue_usage{queue=\"team-a\",resource=\"nvidia.com/gpu\"} ")?
                .trim()
                .parse::<f64>()
                .ok()
        });
        (used == Some(16.0)).then_some(())
    });
    let message = |ns: &str, pod: &str| -> Option<String> {
        let p = c.get_json(&["pod", pod, "-n", ns]);
        let cond = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "PodScheduled")?.clone();
        (cond["status"] == "False").then(|| s(&cond["message"]))
    };
    let waiting = wait_for(30, "a-one waits for quota", || message("qa", "a-one"));
    assert!(
        waiting.contains("queue team-a: 16/8 GPUs in use, cannot borrow: team-b lends 8, 8 borrowed already"),
        "{waiting}"
    );
    // team-b, by the pod's own label: within its quota, but lent out.
    c.kubectl_in(
        &["create", "-n", "qb", "-f", "-"],
        &pod_yaml("b-one", "gs-queues", &[("gpu-scheduler.io/queue", "team-b")], "cpu: 1", 1),
    );
    let waiting = wait_for(30, "b-one waits for its lent quota", || message("qb", "b-one"));
    assert!(
        waiting.contains("queue team-b: 0/8 GPUs in use, within its quota, but its siblings borrow it"),
        "{waiting}"
    );
    // Reclaim: team-a's newest borrowing pod is preempted for it (marked,
    // then deleted; it terminates for its grace period, then goes).
    let victim = wait_for(60, "a borrowed pod of team-a preempted", || {
        let p = c.get_json(&["pod", "a-big-2", "-n", "qa"]);
        let cond = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "DisruptionTarget")?.clone();
        (!p["metadata"]["deletionTimestamp"].is_null()).then_some(cond)
    });
    assert_eq!(s(&victim["reason"]), "PreemptionByScheduler", "{victim}");
    assert!(s(&victim["message"]).ends_with(": queue team-b reclaims the quota this pod's queue borrowed"), "{victim}");
    let b = c.get_json(&["pod", "b-one", "-n", "qb"]);
    assert!(!s(&b["status"]["nominatedNodeName"]).is_empty(), "b-one waits nominated: {b}");
    wait_for(60, "b-one bound once the quota came back", || {
        c.placements("qb").into_iter().find(|(p, n)| p == "b-one" && !n.is_empty())
    });
    let status = sched.terminate();
    assert!(status.success(), "{}", sched.log_text());
}

fn gpu_nodes(prefix: &str, pool: &str, n: usize) -> String {
    (1..=n)
        .map(|i| node_yaml(&format!("{prefix}-{i}"), &[("pool", pool), ("gpu-model", "a100")], 64, 512, 8, &[]))
        .collect()
}

fn pod_group(name: &str, min: u32) -> String {
    format!(
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {name}}}\nspec: {{minMember: {min}}}\n---\n"
    )
}

/// A Job of `n` workers, each asking for 8 GPUs, in the gang `group`.
fn job(name: &str, group: &str, scheduler: &str, n: u32) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  parallelism: {n}\n  completions: {n}\n  template:\n    metadata:\n      labels: {{scheduling.x-k8s.io/pod-group: {group}, gpu-scheduler.io/workload: training}}\n    spec:\n      schedulerName: {scheduler}\n      restartPolicy: Never\n      containers:\n      - name: worker\n        image: registry.k8s.io/pause:3.10\n        resources:\n          requests: {{cpu: \"4\", memory: 16Gi}}\n          limits: {{nvidia.com/gpu: \"8\"}}\n---\n"
    )
}

/// Pods of a Job, by name, with their node ("" while pending).
fn job_pods(c: &Cluster, ns: &str, job: &str) -> HashMap<String, String> {
    let list = c.get_json(&["pods", "-n", ns, "-l", &format!("job-name={job}")]);
    items(&list).iter().map(|p| (s(&p["metadata"]["name"]), s(&p["spec"]["nodeName"]))).collect()
}

fn gang_from_a_job(c: &Cluster) {
    c.kubectl(&["create", "namespace", "train"]);
    c.kubectl_in(&["create", "-f", "-"], &gpu_nodes("train", "train", 4));
    let config = c.file("train-config.yaml", &config_yaml("gs-train", "train", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("train-scheduler.log"));
    c.kubectl_in(
        &["create", "-n", "train", "-f", "-"],
        &(pod_group("pretrain", 4) + &job("pretrain", "pretrain", "gs-train", 4)),
    );
    let placed = sched.wait_for(90, "the 4 workers of pretrain bound", || {
        let p = job_pods(c, "train", "pretrain");
        (p.len() == 4 && p.values().all(|n| !n.is_empty())).then_some(p)
    });
    let mut nodes: Vec<&String> = placed.values().collect();
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 4, "one 8-GPU worker per node: {placed:?}");
    // KWOK runs the bound workers: the group goes Scheduled, then Running.
    let status = sched.wait_for(60, "the PodGroup's status written", || {
        let g = c.get_json(&["podgroups.scheduling.x-k8s.io", "pretrain", "-n", "train"]);
        (g["status"]["phase"] == "Running").then_some(g)
    });
    assert_eq!((&status["status"]["scheduled"], &status["status"]["running"]), (&4.into(), &4.into()), "{status}");

    // A second gang of 3 finds one node's worth of room at most: none of
    // it is bound, and each member says why.
    c.kubectl_in(
        &["create", "-n", "train", "-f", "-"],
        &(pod_group("finetune", 3) + &job("finetune", "finetune", "gs-train", 3)),
    );
    let describe = sched.wait_for(90, "the gang's message on a finetune member", || {
        let pods = job_pods(c, "train", "finetune");
        let name = pods.keys().next()?.clone();
        let d = c.kubectl(&["describe", "pod", &name, "-n", "train"]);
        d.contains("for gang train/finetune").then_some(d)
    });
    assert!(describe.contains("0 of 3 members fit"), "{describe}");
    let pods = job_pods(c, "train", "finetune");
    assert!(pods.values().all(String::is_empty), "no member of the gang that does not fit is bound: {pods:?}");
    let g = c.get_json(&["podgroups.scheduling.x-k8s.io", "finetune", "-n", "train"]);
    assert_eq!(g["status"]["phase"], "Pending", "{g}");
    let status = sched.terminate();
    assert!(status.success(), "exit status {status:?}:\n{}", sched.log_text());
}

fn preemption(c: &Cluster) {
    c.kubectl(&["create", "namespace", "preempt"]);
    c.kubectl_in(&["create", "-f", "-"], &gpu_nodes("preempt", "preempt", 1));
    let classes = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: preempt-low}\nvalue: 0\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: preempt-high}\nvalue: 1000\n---\n";
    c.kubectl_in(&["create", "-f", "-"], classes);
    let with_class =
        |yaml: String, class: &str| yaml.replace("spec:\n", &format!("spec:\n  priorityClassName: {class}\n"));
    let low = with_class(with_grace(&pod_yaml("low", "gs-preempt", &[], "cpu: 1", 8), 5), "preempt-low");
    c.kubectl_in(&["create", "-n", "preempt", "-f", "-"], &low);
    let config = c.file("preempt-config.yaml", &config_yaml("gs-preempt", "preempt", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("preempt-scheduler.log"));
    wait_for(60, "low bound", || c.placements("preempt").into_iter().find(|(p, n)| p == "low" && !n.is_empty()));

    let high = with_class(pod_yaml("high", "gs-preempt", &[], "cpu: 1", 8), "preempt-high");
    c.kubectl_in(&["create", "-n", "preempt", "-f", "-"], &high);
    // The victim: the DisruptionTarget condition, then deleted (graceful:
    // it terminates for its 5 s grace period).
    let victim = wait_for(60, "low marked for preemption and deleted", || {
        let p = c.get_json(&["pod", "low", "-n", "preempt"]);
        let cond = p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "DisruptionTarget")?.clone();
        (!p["metadata"]["deletionTimestamp"].is_null()).then_some(cond)
    });
    assert_eq!((s(&victim["status"]).as_str(), s(&victim["reason"]).as_str()), ("True", "PreemptionByScheduler"));
    assert_eq!(s(&victim["message"]), "gs-preempt: preempting to accommodate a higher priority pod");
    let high_pod = c.get_json(&["pod", "high", "-n", "preempt"]);
    assert_eq!(s(&high_pod["status"]["nominatedNodeName"]), "preempt-1", "{high_pod}");
    assert_eq!(s(&high_pod["spec"]["nodeName"]), "", "not bound while the victim is still there");
    let events = c.kubectl(&["get", "events", "-n", "preempt", "--field-selector", "reason=Preempted", "-o", "json"]);
    assert!(events.contains("Preempted by pod"), "{events}");

    // The kubelet's part (KWOK's): the victim's containers stop and it goes.
    wait_for(60, "high bound on the freed node", || {
        c.placements("preempt").into_iter().find(|(p, n)| p == "high" && n == "preempt-1")
    });
    let status = sched.terminate();
    let log = sched.log_text();
    assert!(status.success(), "exit status {status:?}:\n{log}");
    let metrics_seen = log.contains("preempting");
    assert!(metrics_seen, "the preemption is logged:\n{log}");
}

fn volumes(c: &Cluster) {
    c.kubectl(&["create", "namespace", "vol"]);
    let nodes: String = [("vol-1", "z1"), ("vol-2", "z1"), ("vol-3", "z2")]
        .iter()
        .map(|(n, z)| {
            let labels = [("pool", "vol"), ("topology.kubernetes.io/zone", z), ("kubernetes.io/hostname", n)];
            node_yaml(n, &labels, 8, 32, 0, &[])
        })
        .collect();
    c.kubectl_in(&["create", "-f", "-"], &nodes);
    let objects = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: vol-local}\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n---\n\
apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: vol-pv-local}\nspec:\n  storageClassName: vol-local\n  capacity: {storage: 10Gi}\n  accessModes: [ReadWriteOnce]\n  local: {path: /data}\n  nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [vol-2]}]}]}}\n---\n\
apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: dataset, namespace: vol}\nspec: {storageClassName: vol-local, accessModes: [ReadWriteOnce], resources: {requests: {storage: 5Gi}}}\n---\n\
apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: vol-pv-zonal, labels: {topology.kubernetes.io/zone: z2}}\nspec:\n  storageClassName: \"\"\n  capacity: {storage: 10Gi}\n  accessModes: [ReadWriteOncePod]\n  hostPath: {path: /zonal}\n---\n\
apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: checkpoints, namespace: vol}\nspec: {storageClassName: \"\", volumeName: vol-pv-zonal, accessModes: [ReadWriteOncePod], resources: {requests: {storage: 5Gi}}}\n---\n";
    c.kubectl_in(&["create", "-f", "-"], objects);
    // The pre-bound claim is bound by the PV controller before any pod.
    wait_for(60, "checkpoints bound", || {
        (c.get_json(&["pvc", "checkpoints", "-n", "vol"])["status"]["phase"] == "Bound").then_some(())
    });
    let config = c.file("vol-config.yaml", &config_yaml("gs-vol", "vol", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("vol-scheduler.log"));
    let with_claim = |name: &str, claim: &str| {
        pod_yaml(name, "gs-vol", &[], "cpu: 1", 0).replace(
            "  containers:\n",
            &format!("  volumes: [{{name: v, persistentVolumeClaim: {{claimName: {claim}}}}}]\n  containers:\n"),
        )
    };
    c.kubectl_in(
        &["create", "-n", "vol", "-f", "-"],
        &(with_claim("loader", "dataset") + &with_claim("writer", "checkpoints")),
    );
    // The WaitForFirstConsumer claim: the pod goes where the volume is,
    // PreBind hands the volume to the claim, the PV controller binds it.
    let placed = wait_for(90, "loader and writer bound", || {
        let p: HashMap<String, String> = c.placements("vol").into_iter().collect();
        ["loader", "writer"].iter().all(|n| p.get(*n).is_some_and(|v| !v.is_empty())).then_some(p)
    });
    assert_eq!(placed["loader"], "vol-2", "the local volume's node");
    assert_eq!(placed["writer"], "vol-3", "the zonal volume's zone");
    let claim = c.get_json(&["pvc", "dataset", "-n", "vol"]);
    assert_eq!(
        (s(&claim["status"]["phase"]).as_str(), s(&claim["spec"]["volumeName"]).as_str()),
        ("Bound", "vol-pv-local")
    );
    // The ReadWriteOncePod claim is in use: a second user is refused.
    c.kubectl_in(&["create", "-n", "vol", "-f", "-"], &with_claim("second-writer", "checkpoints"));
    let describe = wait_for(60, "FailedScheduling on second-writer", || {
        let d = c.kubectl(&["describe", "pod", "second-writer", "-n", "vol"]);
        d.contains("FailedScheduling").then_some(d)
    });
    assert!(describe.contains("ReadWriteOncePod access mode"), "{describe}");
    let status = sched.terminate();
    assert!(status.success(), "exit status {status:?}:\n{}", sched.log_text());
}

/// kube's default profile, as shipped, for scheduler `gs-spread` on the
/// `spread` pool (NodePool added: it is what keeps a profile to its pool).
fn kube_default_config() -> String {
    let shipped = std::fs::read_to_string(support::cluster::repo().join("examples/kube-default-config.yaml"))
        .unwrap_or_else(|e| panic!("reading examples/kube-default-config.yaml: {e}"));
    shipped
        .replace(
            "- schedulerName: gpu-scheduler\n",
            "- schedulerName: gs-spread\n  nodeSelector: {matchLabels: {pool: spread}}\n",
        )
        .replace("      - name: NodeName\n", "      - name: NodeName\n      - name: NodePool\n")
        + "leaderElection: {leaderElect: false}\n"
}

fn default_spreading(c: &Cluster) {
    c.kubectl(&["create", "namespace", "spread"]);
    // Zone za has the big nodes: without spreading every replica would go there.
    let nodes: String =
        [("spread-a1", "za", 32), ("spread-a2", "za", 32), ("spread-b1", "zb", 8), ("spread-c1", "zc", 8)]
            .iter()
            .map(|(n, z, cpu)| {
                node_yaml(
                    n,
                    &[("pool", "spread"), ("topology.kubernetes.io/zone", z), ("kubernetes.io/hostname", n)],
                    *cpu,
                    64,
                    0,
                    &[],
                )
            })
            .collect();
    c.kubectl_in(&["create", "-f", "-"], &nodes);
    let config = c.file("spread-config.yaml", &kube_default_config());
    let mut sched = c.start_scheduler(&config, &c.dir.join("spread-scheduler.log"));
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 6\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      schedulerName: gs-spread\n      containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: '1', memory: 1Gi}}}]\n";
    c.kubectl_in(&["create", "-n", "spread", "-f", "-"], deployment);
    let placed = wait_for(90, "the 6 replicas bound", || {
        let p = c.placements("spread");
        (p.len() == 6 && p.iter().all(|(_, n)| !n.is_empty())).then_some(p)
    });
    let mut per_zone: HashMap<char, usize> = HashMap::new();
    for (_, node) in &placed {
        *per_zone.entry(node.chars().nth("spread-".len()).unwrap_or('?')).or_default() += 1;
    }
    // What `simulate` with the same config gives for the same Deployment.
    assert_eq!(per_zone, HashMap::from([('a', 2), ('b', 2), ('c', 2)]), "{placed:?}");
    let status = sched.terminate();
    assert!(status.success(), "exit status {status:?}:\n{}", sched.log_text());
}

/// A ResourceSlice of `n` GPUs of `model` local to `node`.
fn gpu_slice(node: &str, model: &str, n: usize) -> String {
    let devices: String = (0..n)
        .map(|i| format!("  - {{name: gpu-{i}, attributes: {{model: {{string: {model}}}, index: {{int: {i}}}}}, capacity: {{memory: {{value: 40Gi}}}}}}\n"))
        .collect();
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node}-gpus}}\nspec:\n  driver: gpu.nvidia.com\n  nodeName: {node}\n  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}\n  devices:\n{devices}---\n"
    )
}

/// A pod of scheduler `gs-dra` using the claim `source` (a
/// `resourceClaimTemplateName` or `resourceClaimName` entry).
fn dra_pod(name: &str, source: &str) -> String {
    pod_yaml(name, "gs-dra", &[], "cpu: 1", 0)
        .replace("  containers:\n", &format!("  resourceClaims: [{{name: gpu, {source}}}]\n  containers:\n"))
        .replace("resources: {requests: {cpu: 1}}", "resources: {requests: {cpu: 1}, claims: [{name: gpu}]}")
}

fn dra(c: &Cluster) {
    c.kubectl(&["create", "namespace", "dra"]);
    let nodes: String =
        ["dra-a100", "dra-t4"].iter().map(|n| node_yaml(n, &[("pool", "dra")], 16, 64, 0, &[])).collect();
    c.kubectl_in(&["create", "-f", "-"], &nodes);
    let objects = gpu_slice("dra-a100", "a100", 2)
        + &gpu_slice("dra-t4", "t4", 2)
        + "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: dra-a100}\nspec:\n  selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].model == \"a100\"'}}]\n---\n\
apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: dra-t4}\nspec:\n  selectors: [{cel: {expression: 'device.attributes[\"gpu.nvidia.com\"].model == \"t4\"'}}]\n---\n\
apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: one-a100, namespace: dra}\nspec:\n  spec:\n    devices:\n      requests: [{name: gpu, exactly: {deviceClassName: dra-a100}}]\n---\n\
apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: shared-t4, namespace: dra}\nspec:\n  devices:\n    requests: [{name: gpu, exactly: {deviceClassName: dra-t4}}]\n---\n";
    c.kubectl_in(&["create", "-f", "-"], &objects);
    let config = c.file("dra-config.yaml", &config_yaml("gs-dra", "dra", 50, 100));
    let mut sched = c.start_scheduler(&config, &c.dir.join("dra-scheduler.log"));
    let pods = dra_pod("trainer", "resourceClaimTemplateName: one-a100")
        + &dra_pod("notebook-0", "resourceClaimName: shared-t4")
        + &dra_pod("notebook-1", "resourceClaimName: shared-t4");
    c.kubectl_in(&["create", "-n", "dra", "-f", "-"], &pods);
    let placed = wait_for(90, "the three DRA pods bound", || {
        let p: HashMap<String, String> = c.placements("dra").into_iter().collect();
        (p.len() == 3 && p.values().all(|n| !n.is_empty())).then_some(p)
    });
    assert_eq!(placed["trainer"], "dra-a100", "the A100 class's node");
    assert_eq!(placed["notebook-0"], "dra-t4", "the shared claim's T4");
    assert_eq!(placed["notebook-1"], "dra-t4", "one shared claim, one node");
    // The claim the controller made for the trainer: allocated on the
    // A100 slice, reserved for the pod, protected by the finalizer.
    let trainer = c.get_json(&["pod", "trainer", "-n", "dra"]);
    let claim_name = s(&trainer["status"]["resourceClaimStatuses"][0]["resourceClaimName"]);
    let claim = c.get_json(&["resourceclaim", &claim_name, "-n", "dra"]);
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!((s(&result["driver"]).as_str(), s(&result["pool"]).as_str()), ("gpu.nvidia.com", "dra-a100"), "{claim}");
    assert_eq!(s(&claim["status"]["reservedFor"][0]["uid"]), s(&trainer["metadata"]["uid"]), "{claim}");
    let list = |v: &serde_json::Value| v.as_array().cloned().unwrap_or_default();
    assert!(list(&claim["metadata"]["finalizers"]).iter().any(|f| f == "resource.kubernetes.io/delete-protection"));
    let node_selector = &claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0];
    assert_eq!(s(&node_selector["values"][0]), "dra-a100");
    let shared = c.get_json(&["resourceclaim", "shared-t4", "-n", "dra"]);
    assert_eq!(list(&shared["status"]["reservedFor"]).len(), 2, "both notebooks use it: {shared}");
    assert_eq!(list(&shared["status"]["allocation"]["devices"]["results"]).len(), 1, "one device for both");
    // One A100 is left: of two more trainers one is bound, the other
    // waits, explained.
    c.kubectl_in(
        &["create", "-n", "dra", "-f", "-"],
        &(dra_pod("trainer-2", "resourceClaimTemplateName: one-a100")
            + &dra_pod("trainer-3", "resourceClaimTemplateName: one-a100")),
    );
    wait_for(90, "one more trainer bound, the other refused", || {
        let p: HashMap<String, String> = c.placements("dra").into_iter().collect();
        let bound = ["trainer-2", "trainer-3"].iter().filter(|n| p.get(**n).is_some_and(|v| !v.is_empty())).count();
        (bound == 1).then_some(())
    });
    // The pod's PodScheduled condition and its latest FailedScheduling
    // Event carry the reason (the first Event said the claim was not made
    // yet: a new message is a new Event, not a count on the old one).
    wait_for(60, "the waiting trainer's condition and Event say why", || {
        let p: HashMap<String, String> = c.placements("dra").into_iter().collect();
        let waiting = if p.get("trainer-2").is_some_and(|v| v.is_empty()) { "trainer-2" } else { "trainer-3" };
        let pod = c.get_json(&["pod", waiting, "-n", "dra"]);
        let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let condition = conditions
            .iter()
            .any(|c| c["type"] == "PodScheduled" && s(&c["message"]).contains("cannot allocate all claims"));
        let described = c.kubectl(&["describe", "pod", waiting, "-n", "dra"]);
        (condition && described.contains("cannot allocate all claims")).then_some(())
    });
    // A snapshot of the cluster carries the DRA objects: simulated, the
    // waiting trainer still finds no A100 (the claims hold them).
    let report = c.simulate_snapshot(&config, "dra-snapshot.yaml");
    let simulated: Vec<&serde_json::Value> = report["placements"]
        .as_array()
        .map(|ps| ps.iter().filter(|p| s(&p["pod"]).starts_with("dra/")).collect())
        .unwrap_or_default();
    assert_eq!(simulated.len(), 1, "only the waiting trainer is pending: {report}");
    assert_eq!(simulated[0]["node"], serde_json::Value::Null, "{report}");
    assert!(s(&simulated[0]["reason"]).contains("cannot allocate all claims"), "{report}");
    let status = sched.terminate();
    assert!(status.success(), "exit status {status:?}:\n{}", sched.log_text());
}
