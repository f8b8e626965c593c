//! The trace a live replay plays: Alibaba's openb node and pod lists
//! (the CSV columns `crates/sim/src/openb.rs` documents), reshaped onto a
//! live clock, and the Kubernetes objects a user would write for it.
//!
//! The reshaping, in order, all of it deterministic for a seed:
//!
//! 1. **Sample** (small runs): `nodes` nodes spread evenly over the list,
//!    and pods spread evenly over theirs in the same proportion.
//! 2. **Window**: the trace's arrivals span 149 days, but nineteen in
//!    twenty come in its last month. The window starts at the 5th
//!    percentile of creation times: pods gone before it are dropped, pods
//!    created before it and still running arrive at once.
//! 3. **Clock**: arrivals are compressed so that the window lasts
//!    `minutes`; a pod runs for its trace duration (from its start, or its
//!    creation when the trace never saw it start, to its deletion) times
//!    `duration_scale`, in whole seconds, at least one.
//! 4. **Load**: the trace's pods, were they all running at once, would ask
//!    for 98 % of its GPUs, and most finish within minutes: at its own
//!    density the cluster never fills. As `replay --inflate` does, random
//!    copies are added until the GPU asked reaches `inflate` times the
//!    cluster's; a copy arrives when another random pod does.
//!
//! What comes out is an openb pod list whose times are live seconds
//! ([`write_pods`]): `gpu-scheduler replay --timed` replays the same
//! file to predict the live run.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Node, Pod};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Thousandths of a GPU in one GPU.
pub const MILLI_PER_GPU: u64 = 1000;
/// The pod annotation KWOK's stages read (tools/k8s/kwok/stages.yaml): the
/// pod succeeds that long after it started.
const RUN_FOR: &str = "gpu-scheduler.io/run-for";
/// The share of a GPU a pod asks for, in thousandths (the trace's form,
/// which gpu-scheduler reads).
const GPU_MILLI: &str = "alibabacloud.com/gpu-milli";
/// Accepted GPU models, `|`-separated.
const GPU_MODEL: &str = "alibabacloud.com/gpu-card-model";
/// The node label naming its GPU model.
const LABEL_GPU_MODEL: &str = "gpu-model";
/// Pods a node may hold: the trace sets no limit (as `replay`, 1001).
const PODS_PER_NODE: &str = "1001";

/// One node of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNode {
    pub name: String,
    pub milli_cpu: u64,
    pub memory_mib: u64,
    pub gpus: u64,
    pub model: String,
}

/// One pod of the list as read: times in the trace's seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePod {
    pub name: String,
    pub milli_cpu: u64,
    pub memory_mib: u64,
    pub gpus: u64,
    pub gpu_milli: u64,
    pub gpu_spec: String,
    pub creation: u64,
    pub deletion: u64,
    pub scheduled: Option<u64>,
}

/// One pod on the live clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LivePod {
    pub name: String,
    pub milli_cpu: u64,
    pub memory_mib: u64,
    pub gpus: u64,
    pub gpu_milli: u64,
    pub gpu_spec: String,
    /// Seconds from the run's start.
    pub arrival_s: u64,
    /// Seconds it runs once started.
    pub run_s: u64,
}

impl LivePod {
    /// GPU asked, in thousandths.
    pub fn gpu_total_milli(&self) -> u64 {
        self.gpus.saturating_mul(self.gpu_milli)
    }

    /// The size class its queueing delay is reported under.
    pub fn class(&self) -> &'static str {
        match (self.gpus, self.gpu_milli) {
            (0, _) | (_, 0) => "cpu",
            (1, m) if m < MILLI_PER_GPU => "share",
            (1, _) => "1",
            (2, _) => "2",
            (4, _) => "4",
            (8, _) => "8",
            _ => "other",
        }
    }
}

/// The classes of [`LivePod::class`], in report order.
pub const CLASSES: [&str; 7] = ["cpu", "share", "1", "2", "4", "8", "other"];

/// How the trace is reshaped (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// Nodes kept (evenly spread); None for all.
    pub nodes: Option<usize>,
    /// Live minutes over which the window's arrivals come.
    pub minutes: f64,
    pub duration_scale: f64,
    pub inflate: f64,
    pub seed: u64,
}

/// A CSV file: its header's columns by name, and its rows.
struct Csv<'a> {
    file: &'a str,
    columns: BTreeMap<&'a str, usize>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

impl<'a> Csv<'a> {
    fn parse(file: &'a str, text: &'a str) -> Result<Csv<'a>> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let Some((_, header)) = lines.next() else { bail!("{file}: empty, a header line is expected") };
        let columns =
            header.trim_end_matches('\r').split(',').map(str::trim).enumerate().map(|(i, h)| (h, i)).collect();
        let rows = lines.map(|(i, l)| (i + 1, l.trim_end_matches('\r').split(',').collect())).collect();
        Ok(Csv { file, columns, rows })
    }

    fn column(&self, name: &str) -> Result<usize> {
        self.columns.get(name).copied().with_context(|| format!("{}: no column {name:?}", self.file))
    }

    fn cell<'r>(&self, row: &'r (usize, Vec<&'a str>), column: usize, name: &str) -> Result<&'r str> {
        row.1.get(column).map(|c| c.trim()).with_context(|| format!("{}:{}: no {name} field", self.file, row.0))
    }

    fn number(&self, row: &(usize, Vec<&'a str>), column: usize, name: &str) -> Result<u64> {
        let cell = self.cell(row, column, name)?;
        cell.parse().with_context(|| format!("{}:{}: {name} {cell:?} is not a non-negative integer", self.file, row.0))
    }
}

/// Reads a node list (sn,cpu_milli,memory_mib,gpu,model).
pub fn read_nodes(file: &str, text: &str) -> Result<Vec<TraceNode>> {
    let csv = Csv::parse(file, text)?;
    let (sn, cpu, mem, gpu, model) = (
        csv.column("sn")?,
        csv.column("cpu_milli")?,
        csv.column("memory_mib")?,
        csv.column("gpu")?,
        csv.column("model")?,
    );
    csv.rows
        .iter()
        .map(|row| {
            Ok(TraceNode {
                name: csv.cell(row, sn, "sn")?.to_string(),
                milli_cpu: csv.number(row, cpu, "cpu_milli")?,
                memory_mib: csv.number(row, mem, "memory_mib")?,
                gpus: csv.number(row, gpu, "gpu")?,
                model: csv.cell(row, model, "model")?.to_string(),
            })
        })
        .collect()
}

/// Reads a pod list with its times (creation_time and deletion_time on
/// every line).
pub fn read_pods(file: &str, text: &str) -> Result<Vec<TracePod>> {
    let csv = Csv::parse(file, text)?;
    let c = |n| csv.column(n);
    let (name, cpu, mem, gpus, milli) = (c("name")?, c("cpu_milli")?, c("memory_mib")?, c("num_gpu")?, c("gpu_milli")?);
    let (spec, created, deleted) = (c("gpu_spec")?, c("creation_time")?, c("deletion_time")?);
    let scheduled = csv.columns.get("scheduled_time").copied();
    csv.rows
        .iter()
        .map(|row| {
            let scheduled = match scheduled.map(|s| csv.cell(row, s, "scheduled_time")).transpose()? {
                None | Some("") => None,
                Some(_) => scheduled.map(|s| csv.number(row, s, "scheduled_time")).transpose()?,
            };
            Ok(TracePod {
                name: csv.cell(row, name, "name")?.to_string(),
                milli_cpu: csv.number(row, cpu, "cpu_milli")?,
                memory_mib: csv.number(row, mem, "memory_mib")?,
                gpus: csv.number(row, gpus, "num_gpu")?,
                gpu_milli: csv.number(row, milli, "gpu_milli")?,
                gpu_spec: csv.cell(row, spec, "gpu_spec")?.to_string(),
                creation: csv.number(row, created, "creation_time")?,
                deletion: csv.number(row, deleted, "deletion_time")?,
                scheduled,
            })
        })
        .collect()
}

/// `k` items spread evenly over `items` (all when `k` is not smaller).
fn spread<T: Clone>(items: &[T], k: usize) -> Vec<T> {
    if k >= items.len() {
        return items.to_vec();
    }
    (0..k).map(|i| items[i * items.len() / k].clone()).collect()
}

/// The nodes kept and the pods on the live clock (see the module docs).
pub fn reshape(nodes: &[TraceNode], pods: &[TracePod], shape: &Shape) -> Result<(Vec<TraceNode>, Vec<LivePod>)> {
    if !(shape.minutes > 0.0 && shape.minutes.is_finite()) {
        bail!("--minutes must be a positive number, not {}", shape.minutes);
    }
    if !(shape.duration_scale > 0.0 && shape.duration_scale.is_finite()) {
        bail!("--duration-scale must be a positive number, not {}", shape.duration_scale);
    }
    // As `replay --inflate`: at most 10 times the cluster's GPUs.
    if !(0.0..=10.0).contains(&shape.inflate) {
        bail!("--inflate must be a number from 0 to 10, not {}", shape.inflate);
    }
    let kept_nodes = match shape.nodes {
        Some(0) => bail!("--nodes must be at least 1"),
        Some(k) => spread(nodes, k),
        None => nodes.to_vec(),
    };
    let pods = match shape.nodes {
        Some(k) if k < nodes.len() => spread(pods, (pods.len() * k).div_ceil(nodes.len().max(1))),
        _ => pods.to_vec(),
    };
    let mut created: Vec<u64> = pods.iter().map(|p| p.creation).collect();
    created.sort_unstable();
    let (Some(&start), Some(&last)) = (created.get(created.len() / 20), created.last()) else {
        bail!("the pod list is empty");
    };
    // Trace seconds per live second.
    let speed = (last.saturating_sub(start) as f64 / (shape.minutes * 60.0)).max(f64::MIN_POSITIVE);
    let mut live: Vec<LivePod> = pods
        .iter()
        .filter(|p| p.deletion > start)
        .map(|p| {
            let began = p.scheduled.filter(|&s| s >= p.creation).unwrap_or(p.creation).max(start);
            let run = p.deletion.saturating_sub(began) as f64 * shape.duration_scale;
            let arrival = (p.creation.max(start) - start) as f64 / speed;
            LivePod {
                // Object names are lower case; the CSV uses the same.
                name: p.name.to_ascii_lowercase(),
                milli_cpu: p.milli_cpu,
                memory_mib: p.memory_mib,
                gpus: p.gpus,
                gpu_milli: p.gpu_milli,
                gpu_spec: p.gpu_spec.clone(),
                // Whole seconds: the CSV `replay --timed` reads has no finer unit.
                arrival_s: arrival.round() as u64,
                run_s: run.round().max(1.0) as u64,
            }
        })
        .collect();
    let capacity: u64 = kept_nodes.iter().map(|n| n.gpus.saturating_mul(MILLI_PER_GPU)).sum();
    let target = (capacity as f64 * shape.inflate) as u64;
    let mut asked: u64 = live.iter().map(LivePod::gpu_total_milli).sum();
    if !live.iter().any(|p| p.gpu_total_milli() > 0) && asked < target {
        bail!("no pod of the list asks for GPUs: --inflate cannot reach {}", shape.inflate);
    }
    let originals = live.len();
    let mut rng = StdRng::seed_from_u64(shape.seed);
    let mut copies = 0usize;
    while asked < target {
        let (of, when) = (rng.random_range(0..originals), rng.random_range(0..originals));
        copies += 1;
        let mut copy = live[of].clone();
        copy.name = format!("{}-copy-{copies}", live[of].name);
        copy.arrival_s = live[when].arrival_s;
        asked = asked.saturating_add(copy.gpu_total_milli());
        live.push(copy);
    }
    live.sort_by(|a, b| a.arrival_s.cmp(&b.arrival_s).then_with(|| a.name.cmp(&b.name)));
    Ok((kept_nodes, live))
}

/// The node list, as read (for `replay --nodes`).
pub fn write_nodes(nodes: &[TraceNode]) -> String {
    let mut out = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
    for n in nodes {
        let _ = writeln!(out, "{},{},{},{},{}", n.name, n.milli_cpu, n.memory_mib, n.gpus, n.model);
    }
    out
}

/// The pods on the live clock as an openb pod list (for `replay --timed
/// --pods`): created at their arrival, started then, deleted when their
/// run ends.
pub fn write_pods(pods: &[LivePod]) -> String {
    let mut out = String::from(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time\n",
    );
    for p in pods {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            p.name,
            p.milli_cpu,
            p.memory_mib,
            p.gpus,
            p.gpu_milli,
            p.gpu_spec,
            p.arrival_s,
            p.arrival_s.saturating_add(p.run_s),
            p.arrival_s
        );
    }
    out
}

/// The Node a KWOK node plays: its GPUs as `nvidia.com/gpu`, its model
/// as the `gpu-model` label, as the device plugin and a labeller set them.
pub fn node(n: &TraceNode) -> Result<Node> {
    let mut labels = json!({"kubernetes.io/hostname": n.name});
    let mut resources =
        json!({"cpu": format!("{}m", n.milli_cpu), "memory": format!("{}Mi", n.memory_mib), "pods": PODS_PER_NODE});
    if n.gpus > 0 {
        resources["nvidia.com/gpu"] = json!(n.gpus.to_string());
        if !n.model.is_empty() {
            labels[LABEL_GPU_MODEL] = json!(n.model);
        }
    }
    Ok(serde_json::from_value(json!({
        "metadata": {"name": n.name, "labels": labels},
        "status": {"capacity": resources, "allocatable": resources}
    }))?)
}

/// The Pod a user would write for `p`: `nvidia.com/gpu` for its GPUs (one
/// for a share, which kube-scheduler can only give whole), the share in
/// thousandths and the accepted models as annotations gpu-scheduler
/// reads, and how long it runs for KWOK. It leaves at once when deleted.
pub fn pod(p: &LivePod, namespace: &str, scheduler: &str) -> Result<Pod> {
    let mut annotations = json!({RUN_FOR: format!("{}s", p.run_s)});
    let mut resources =
        json!({"requests": {"cpu": format!("{}m", p.milli_cpu), "memory": format!("{}Mi", p.memory_mib)}});
    if p.gpu_total_milli() > 0 {
        resources["limits"] = json!({"nvidia.com/gpu": p.gpus.to_string()});
        resources["requests"]["nvidia.com/gpu"] = json!(p.gpus.to_string());
        if p.gpu_milli < MILLI_PER_GPU {
            annotations[GPU_MILLI] = json!(p.gpu_milli.to_string());
        }
        if !p.gpu_spec.is_empty() {
            annotations[GPU_MODEL] = json!(p.gpu_spec);
        }
    }
    Ok(serde_json::from_value(json!({
        "metadata": {"name": p.name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}]
        }
    }))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,V100M32\nn1,32000,131072,0,\n";
    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
        early,1000,1024,1,1000,,LS,Running,0,50,0\n\
        long,1000,1024,1,500,,LS,Running,0,10000,0\n\
        p2,1000,1024,8,1000,V100M32,LS,Running,100,700,\n\
        p3,1000,1024,0,0,,BE,Running,200,260,230\n\
        p4,1000,1024,2,1000,,LS,Running,400,1000,400\n";

    fn shape(inflate: f64) -> Shape {
        Shape { nodes: None, minutes: 5.0, duration_scale: 1.0, inflate, seed: 1 }
    }

    #[test]
    fn reads_the_lists() {
        let nodes = read_nodes("n.csv", NODES).unwrap();
        assert_eq!(
            nodes[0],
            TraceNode { name: "n0".into(), milli_cpu: 64000, memory_mib: 262144, gpus: 8, model: "V100M32".into() }
        );
        let pods = read_pods("p.csv", PODS).unwrap();
        assert_eq!(pods.len(), 5);
        assert_eq!((pods[2].scheduled, pods[3].scheduled), (None, Some(230)));
        let bad = PODS.replace("p4,1000", "p4,-1");
        assert!(read_pods("p.csv", &bad).unwrap_err().to_string().contains("p.csv:6: cpu_milli \"-1\""));
        assert!(read_pods("p.csv", "name\nx\n").unwrap_err().to_string().contains("no column \"cpu_milli\""));
    }

    #[test]
    fn the_window_and_the_clock() {
        let (nodes, pods) = (read_nodes("n", NODES).unwrap(), read_pods("p", PODS).unwrap());
        let (_, live) = reshape(&nodes, &pods, &shape(0.0)).unwrap();
        // The window starts at the 5th percentile (the first of five
        // creations, 0), ends at the last (400) and lasts 300 live
        // seconds: 4/3 trace seconds per live second.
        let got: Vec<(&str, u64, u64)> = live.iter().map(|p| (p.name.as_str(), p.arrival_s, p.run_s)).collect();
        assert_eq!(
            got,
            [("early", 0, 50), ("long", 0, 10000), ("p2", 75, 600), ("p3", 150, 30), ("p4", 300, 600)],
            "durations from the start (p3 started at 230), or the creation when none (p2)"
        );
        let scaled = reshape(&nodes, &pods, &Shape { duration_scale: 0.001, ..shape(0.0) }).unwrap().1;
        for (bad, what) in
            [(Shape { inflate: 11.0, ..shape(0.0) }, "--inflate"), (Shape { minutes: 0.0, ..shape(0.0) }, "--minutes")]
        {
            assert!(reshape(&nodes, &pods, &bad).unwrap_err().to_string().starts_with(what), "{bad:?}");
        }
        assert!(scaled.iter().all(|p| p.run_s >= 1), "a pod runs at least a second");
    }

    #[test]
    fn inflating_adds_copies_arriving_with_others() {
        let (nodes, pods) = (read_nodes("n", NODES).unwrap(), read_pods("p", PODS).unwrap());
        let (_, live) = reshape(&nodes, &pods, &shape(3.0)).unwrap();
        let asked: u64 = live.iter().map(LivePod::gpu_total_milli).sum();
        assert!(asked >= 24_000, "3 × 8 GPUs asked, got {asked}");
        let arrivals = [0, 75, 150, 300];
        for copy in live.iter().filter(|p| p.name.contains("-copy-")) {
            assert!(arrivals.contains(&copy.arrival_s), "{copy:?} arrives with another pod");
        }
        assert!(live.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s), "sorted by arrival");
        assert_eq!(live, reshape(&nodes, &pods, &shape(3.0)).unwrap().1, "the same for a seed");
    }

    #[test]
    fn sampling_keeps_the_proportion() {
        let nodes: Vec<TraceNode> = (0..10)
            .map(|i| TraceNode { name: format!("n{i}"), milli_cpu: 1, memory_mib: 1, gpus: 1, model: String::new() })
            .collect();
        let pods = read_pods("p", PODS).unwrap();
        let (kept, live) = reshape(&nodes, &pods, &Shape { nodes: Some(5), ..shape(0.0) }).unwrap();
        assert_eq!(kept.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["n0", "n2", "n4", "n6", "n8"]);
        assert_eq!(live.len(), 3, "half the pods, rounded up, spread: early, long, p3");
    }

    #[test]
    fn objects_as_users_write_them() {
        let p = LivePod {
            name: "Share-1".into(),
            milli_cpu: 500,
            memory_mib: 64,
            gpus: 1,
            gpu_milli: 250,
            gpu_spec: "T4|P100".into(),
            arrival_s: 3,
            run_s: 42,
        };
        let v = serde_json::to_value(pod(&p, "ns", "sched").unwrap()).unwrap();
        assert_eq!(v["metadata"]["name"], "Share-1", "names are lower-cased when reshaped, not here");
        assert_eq!(v["metadata"]["annotations"][RUN_FOR], "42s");
        assert_eq!(v["metadata"]["annotations"][GPU_MILLI], "250");
        assert_eq!(v["metadata"]["annotations"][GPU_MODEL], "T4|P100");
        assert_eq!(v["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], "1");
        let whole = LivePod { gpu_milli: 1000, gpus: 2, gpu_spec: String::new(), ..p.clone() };
        let v = serde_json::to_value(pod(&whole, "ns", "sched").unwrap()).unwrap();
        assert!(v["metadata"]["annotations"].get(GPU_MILLI).is_none());
        assert_eq!(v["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "2");
        let cpu = LivePod { gpus: 0, gpu_milli: 0, ..p };
        let v = serde_json::to_value(pod(&cpu, "ns", "sched").unwrap()).unwrap();
        assert!(v["spec"]["containers"][0]["resources"].get("limits").is_none());
        let n = serde_json::to_value(node(&read_nodes("n", NODES).unwrap()[0]).unwrap()).unwrap();
        assert_eq!(n["metadata"]["labels"][LABEL_GPU_MODEL], "V100M32");
        assert_eq!(n["status"]["allocatable"]["nvidia.com/gpu"], "8");
        assert_eq!(CLASSES.len(), 7);
    }

    #[test]
    fn size_classes() {
        let p = |gpus, gpu_milli| LivePod {
            name: String::new(),
            milli_cpu: 0,
            memory_mib: 0,
            gpus,
            gpu_milli,
            gpu_spec: String::new(),
            arrival_s: 0,
            run_s: 1,
        };
        let cases = [
            ((0, 0), "cpu"),
            ((1, 300), "share"),
            ((1, 1000), "1"),
            ((2, 1000), "2"),
            ((4, 1000), "4"),
            ((8, 1000), "8"),
            ((3, 1000), "other"),
        ];
        for ((g, m), class) in cases {
            assert_eq!(p(g, m).class(), class, "{g} × {m}");
        }
    }
}
