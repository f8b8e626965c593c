//! Alibaba's GPU-sharing trace (`cluster-trace-gpu-v2023`, "openb"): its
//! node and pod lists (CSV) read into the Kubernetes objects they stand
//! for, as the FGD paper's simulator builds them: nodes with cpu, memory,
//! `nvidia.com/gpu` and the `gpu-model` label; pods with cpu and memory
//! requests and the openb annotations `alibabacloud.com/gpu-milli`,
//! `alibabacloud.com/gpu-count` and `alibabacloud.com/gpu-card-model`.
//! Columns are found by the header's names; errors name the file, line
//! and column. The pod list's times (`creation_time`, `deletion_time`,
//! `scheduled_time`, seconds from the trace's start; blank for none) are
//! read when present, for `replay --timed`; a `queue` column, which openb
//! lacks, puts each pod in that queue (label `gpu-scheduler.io/queue`).

use std::collections::BTreeMap;

use engine::devices::{ANNOTATION_ALIBABA_GPU_COUNT, ANNOTATION_ALIBABA_GPU_MILLI, ANNOTATION_ALIBABA_GPU_MODEL};
use engine::facts::{GPU_RESOURCE, LABEL_GPU_MODEL};
use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use thiserror::Error;

/// A problem in a trace file: where it is and what is wrong.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{file}:{line}: column {column}: {message}")]
pub struct CsvError {
    pub file: String,
    /// 1-based; the header is line 1.
    pub line: usize,
    /// The column's name (or its number when the header lacks it).
    pub column: String,
    pub message: String,
}

/// One node of a node list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceNode {
    pub name: String,
    pub milli_cpu: i64,
    pub memory_mib: i64,
    pub gpus: i64,
    /// GPU model as the trace names it (`G2`, `T4`, `V100M32`); empty for none.
    pub model: String,
}

/// One pod of a pod list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TracePod {
    pub name: String,
    pub milli_cpu: i64,
    pub memory_mib: i64,
    pub gpus: i64,
    /// Thousandths of each GPU (1000 for whole GPUs).
    pub gpu_milli: i64,
    /// Accepted models, `|`-separated; empty for any.
    pub gpu_spec: String,
    /// The pod's queue (the optional `queue` column); empty for none.
    pub queue: String,
    /// Seconds from the trace's start; None when the column is absent or blank.
    pub creation_time: Option<u64>,
    pub deletion_time: Option<u64>,
    pub scheduled_time: Option<u64>,
}

/// Namespace of the replayed pods.
pub const NAMESPACE: &str = "openb";
/// Pods allowed per node: the trace's nodes set no limit (FGD's simulator uses 1001).
const PODS_PER_NODE: &str = "1001";

/// A column's name for an error, or its number when the header has no
/// (or a blank) name there.
fn column_name(header: &[&str], i: usize) -> String {
    match header.get(i) {
        Some(h) if !h.is_empty() => h.to_string(),
        _ => (i + 1).to_string(),
    }
}

/// A CSV file split into rows, with its header.
struct Table<'a> {
    file: &'a str,
    header: Vec<&'a str>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

impl<'a> Table<'a> {
    fn parse(file: &'a str, text: &'a str) -> Result<Table<'a>, CsvError> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
        let (_, header) = lines.next().ok_or_else(|| CsvError {
            file: file.to_string(),
            line: 1,
            column: "-".into(),
            message: "empty file: a header line is expected".into(),
        })?;
        let header: Vec<&str> = header.split(',').map(str::trim).collect();
        let mut rows = Vec::new();
        for (n, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            let cells: Vec<&str> = line.split(',').collect();
            if let Some(i) = cells.iter().position(|c| c.contains('"')) {
                return Err(CsvError {
                    file: file.to_string(),
                    line: n,
                    column: column_name(&header, i),
                    message: "quoted fields are not supported".into(),
                });
            }
            if cells.len() != header.len() {
                return Err(CsvError {
                    file: file.to_string(),
                    line: n,
                    column: (cells.len().min(header.len()) + 1).to_string(),
                    message: format!("{} fields, the header has {}", cells.len(), header.len()),
                });
            }
            rows.push((n, cells));
        }
        Ok(Table { file, header, rows })
    }

    /// The index of a column the file must have.
    fn column(&self, name: &str) -> Result<usize, CsvError> {
        self.header.iter().position(|h| *h == name).ok_or_else(|| CsvError {
            file: self.file.to_string(),
            line: 1,
            column: name.to_string(),
            message: format!("missing column (the header has: {})", self.header.join(",")),
        })
    }

    fn error(&self, line: usize, column: usize, message: String) -> CsvError {
        CsvError { file: self.file.to_string(), line, column: self.header[column].to_string(), message }
    }

    /// An optional column's non-negative integer; None when the column is
    /// absent or the cell blank.
    fn time(&self, line: usize, cells: &[&str], column: Option<usize>) -> Result<Option<u64>, CsvError> {
        match column {
            Some(c) if !cells[c].trim().is_empty() => Ok(Some(self.int(line, cells, c, 0, i64::MAX / 1000)? as u64)),
            _ => Ok(None),
        }
    }

    fn int(&self, line: usize, cells: &[&str], column: usize, min: i64, max: i64) -> Result<i64, CsvError> {
        let raw = cells[column].trim();
        match raw.parse::<i64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            Ok(v) => Err(self.error(line, column, format!("{v} is out of range ({min} to {max})"))),
            Err(_) => Err(self.error(line, column, format!("{raw:?} is not an integer"))),
        }
    }
}

/// Reads a node list (`sn,cpu_milli,memory_mib,gpu,model`).
pub fn read_nodes(file: &str, text: &str) -> Result<Vec<TraceNode>, CsvError> {
    let t = Table::parse(file, text)?;
    let (sn, cpu, mem, gpu, model) =
        (t.column("sn")?, t.column("cpu_milli")?, t.column("memory_mib")?, t.column("gpu")?, t.column("model")?);
    let mut seen = BTreeMap::new();
    t.rows
        .iter()
        .map(|(line, cells)| {
            let name = cells[sn].trim().to_string();
            if name.is_empty() {
                return Err(t.error(*line, sn, "empty node name".into()));
            }
            if let Some(first) = seen.insert(name.clone(), *line) {
                return Err(t.error(*line, sn, format!("duplicate node {name:?} (first on line {first})")));
            }
            Ok(TraceNode {
                name,
                milli_cpu: t.int(*line, cells, cpu, 0, i64::MAX / 1000)?,
                memory_mib: t.int(*line, cells, mem, 0, i64::MAX >> 20)?,
                gpus: t.int(*line, cells, gpu, 0, engine::devices::MAX_DEVICES as i64)?,
                model: cells[model].trim().to_string(),
            })
        })
        .collect()
}

/// Reads a pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli` and
/// optionally `gpu_spec`, `queue`, `creation_time`, `deletion_time`,
/// `scheduled_time`; other columns are ignored).
pub fn read_pods(file: &str, text: &str) -> Result<Vec<TracePod>, CsvError> {
    let t = Table::parse(file, text)?;
    let (name, cpu, mem, gpus, milli) = (
        t.column("name")?,
        t.column("cpu_milli")?,
        t.column("memory_mib")?,
        t.column("num_gpu")?,
        t.column("gpu_milli")?,
    );
    let spec = t.column("gpu_spec").ok();
    let queue = t.column("queue").ok();
    let (created, deleted, scheduled) =
        (t.column("creation_time").ok(), t.column("deletion_time").ok(), t.column("scheduled_time").ok());
    let mut seen = BTreeMap::new();
    t.rows
        .iter()
        .map(|(line, cells)| {
            let pod_name = cells[name].trim().to_string();
            if pod_name.is_empty() {
                return Err(t.error(*line, name, "empty pod name".into()));
            }
            if let Some(first) = seen.insert(pod_name.clone(), *line) {
                return Err(t.error(*line, name, format!("duplicate pod {pod_name:?} (first on line {first})")));
            }
            let gpu_count = t.int(*line, cells, gpus, 0, engine::devices::MAX_DEVICES as i64)?;
            let gpu_milli = t.int(*line, cells, milli, 0, 1000)?;
            if gpu_count > 0 && gpu_milli == 0 {
                return Err(t.error(*line, milli, format!("0 thousandths of each of {gpu_count} GPUs")));
            }
            if gpu_count > 1 && gpu_milli < 1000 {
                return Err(t.error(
                    *line,
                    milli,
                    format!("a share ({gpu_milli}) of {gpu_count} GPUs: shares are of one GPU"),
                ));
            }
            Ok(TracePod {
                name: pod_name,
                milli_cpu: t.int(*line, cells, cpu, 0, i64::MAX / 1000)?,
                memory_mib: t.int(*line, cells, mem, 0, i64::MAX >> 20)?,
                gpus: gpu_count,
                gpu_milli: if gpu_count == 0 { 0 } else { gpu_milli },
                gpu_spec: spec.map(|c| cells[c].trim().to_string()).unwrap_or_default(),
                queue: queue.map(|c| cells[c].trim().to_string()).unwrap_or_default(),
                creation_time: t.time(*line, cells, created)?,
                deletion_time: t.time(*line, cells, deleted)?,
                scheduled_time: t.time(*line, cells, scheduled)?,
            })
        })
        .collect()
}

/// The queues the pods name, without quota (a queue limits only what its
/// quota names): the trace has none, and QueueQuota refuses pods of a
/// queue that does not exist.
pub fn queues(pods: &[TracePod]) -> Vec<engine::queues::Queue> {
    let names: std::collections::BTreeSet<&str> =
        pods.iter().map(|p| p.queue.as_str()).filter(|q| !q.is_empty()).collect();
    names
        .into_iter()
        .map(|name| engine::queues::Queue {
            name: name.to_string(),
            parent: None,
            quota: BTreeMap::new(),
            borrowing_limit: BTreeMap::new(),
            lending_limit: BTreeMap::new(),
            weight: 1.0,
            reclaim: false,
        })
        .collect()
}

impl TraceNode {
    /// The Node the trace describes.
    pub fn to_k8s(&self) -> Node {
        let mut labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), self.name.clone())]);
        if self.gpus > 0 && !self.model.is_empty() {
            labels.insert(LABEL_GPU_MODEL.to_string(), self.model.clone());
        }
        let mut allocatable = BTreeMap::from([
            ("cpu".to_string(), Quantity(format!("{}m", self.milli_cpu))),
            ("memory".to_string(), Quantity(format!("{}Mi", self.memory_mib))),
            ("pods".to_string(), Quantity(PODS_PER_NODE.into())),
        ]);
        if self.gpus > 0 {
            allocatable.insert(GPU_RESOURCE.to_string(), Quantity(self.gpus.to_string()));
        }
        Node {
            metadata: ObjectMeta { name: Some(self.name.clone()), labels: Some(labels), ..Default::default() },
            status: Some(NodeStatus { allocatable: Some(allocatable), ..Default::default() }),
            ..Default::default()
        }
    }
}

impl TracePod {
    /// The Pod the trace describes, for `scheduler_name`.
    pub fn to_k8s(&self, scheduler_name: &str) -> Pod {
        let requests = BTreeMap::from([
            ("cpu".to_string(), Quantity(format!("{}m", self.milli_cpu))),
            ("memory".to_string(), Quantity(format!("{}Mi", self.memory_mib))),
        ]);
        let mut annotations = BTreeMap::new();
        if self.gpus > 0 {
            annotations.insert(ANNOTATION_ALIBABA_GPU_MILLI.to_string(), self.gpu_milli.to_string());
            annotations.insert(ANNOTATION_ALIBABA_GPU_COUNT.to_string(), self.gpus.to_string());
            if !self.gpu_spec.is_empty() {
                annotations.insert(ANNOTATION_ALIBABA_GPU_MODEL.to_string(), self.gpu_spec.clone());
            }
        }
        let labels = (!self.queue.is_empty())
            .then(|| BTreeMap::from([(engine::queues::LABEL_QUEUE.to_string(), self.queue.clone())]));
        Pod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(NAMESPACE.to_string()),
                annotations: Some(annotations),
                labels,
                ..Default::default()
            },
            spec: Some(PodSpec {
                scheduler_name: Some(scheduler_name.to_string()),
                containers: vec![Container {
                    name: "main".into(),
                    resources: Some(ResourceRequirements { requests: Some(requests), ..Default::default() }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// How long the pod runs, ms: from `scheduled_time` (or, when blank,
    /// 0 before a later creation, or absent, from `creation_time`: the
    /// trace then never saw it start) to `deletion_time`; None when the
    /// trace has no deletion time (the pod runs to the end).
    pub fn run_ms(&self) -> Option<u64> {
        let created = self.creation_time.unwrap_or(0);
        let started = self.scheduled_time.filter(|&s| s >= created).unwrap_or(created);
        Some(self.deletion_time?.saturating_sub(started) * 1000)
    }

    /// GPU asked, in thousandths: 1000 per whole GPU.
    pub fn gpu_milli_total(&self) -> i64 {
        self.gpus * self.gpu_milli
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,32000,131072,0,\n";
    const PODS: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\np0,12000,16384,1,1000,,LS\np1,6000,12288,1,460,,BE\np2,88000,327680,8,1000,V100M16|V100M32,LS\np3,4000,8192,0,0,,BE\n";

    #[test]
    fn lists_are_read() {
        let nodes = read_nodes("n.csv", NODES).unwrap();
        assert_eq!(
            nodes[0],
            TraceNode { name: "n0".into(), milli_cpu: 64000, memory_mib: 262144, gpus: 2, model: "P100".into() }
        );
        assert_eq!((nodes[1].gpus, nodes[1].model.as_str()), (0, ""));
        let pods = read_pods("p.csv", PODS).unwrap();
        assert_eq!(pods.len(), 4);
        assert_eq!((pods[1].gpus, pods[1].gpu_milli, pods[1].gpu_milli_total()), (1, 460, 460));
        assert_eq!((pods[2].gpu_spec.as_str(), pods[2].gpu_milli_total()), ("V100M16|V100M32", 8000));
        assert_eq!((pods[0].creation_time, pods[0].queue.as_str()), (None, ""));
        // Times and a queue: the run from the start seen (or the creation) to the deletion.
        let timed = read_pods(
            "p.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,queue,creation_time,deletion_time,scheduled_time\n\
             a,1,1,1,1000,ml,100,400,130\nb,1,1,1,1000,,100,400,\nc,1,1,0,0,,5,,\nd,1,1,1,1000,,100,400,0\n",
        )
        .unwrap();
        let runs: Vec<(Option<u64>, Option<u64>)> = timed.iter().map(|p| (p.creation_time, p.run_ms())).collect();
        assert_eq!(
            runs,
            [(Some(100), Some(270_000)), (Some(100), Some(300_000)), (Some(5), None), (Some(100), Some(300_000))]
        );
        let labelled = engine::convert::pod_from_k8s(&timed[0].to_k8s("gpu-scheduler")).unwrap();
        assert_eq!(labelled.labels.get(engine::queues::LABEL_QUEUE).map(String::as_str), Some("ml"));
        assert!(engine::convert::pod_from_k8s(&timed[1].to_k8s("gpu-scheduler")).unwrap().labels.is_empty());
        // The multigpu lists have the first five columns only.
        let short = read_pods("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1000,1024,2,1000\n").unwrap();
        assert_eq!((short[0].gpus, short[0].gpu_spec.as_str()), (2, ""));
    }

    #[test]
    fn objects_carry_what_the_engine_reads() {
        let nodes = read_nodes("n.csv", NODES).unwrap();
        let n = engine::convert::node_from_k8s(&nodes[0].to_k8s()).unwrap();
        assert_eq!(
            (n.allocatable.milli_cpu, n.allocatable.memory, n.allocatable.get(GPU_RESOURCE)),
            (64000, 262144 << 20, 2)
        );
        assert_eq!(n.labels.get(LABEL_GPU_MODEL).map(String::as_str), Some("P100"));
        let cpu_node = engine::convert::node_from_k8s(&nodes[1].to_k8s()).unwrap();
        assert!(!cpu_node.labels.contains_key(LABEL_GPU_MODEL));
        let pods = read_pods("p.csv", PODS).unwrap();
        let convert = |p: &TracePod| engine::convert::pod_from_k8s(&p.to_k8s("gpu-scheduler")).unwrap();
        use engine::devices::GpuRequest;
        assert_eq!(convert(&pods[0]).gpu, GpuRequest::whole(1));
        assert_eq!(convert(&pods[1]).gpu, GpuRequest::share(460, 0));
        assert_eq!(convert(&pods[2]).gpu, GpuRequest::whole(8).with_models(&["v100m16", "v100m32"]));
        assert_eq!(convert(&pods[3]).gpu, GpuRequest::default());
        assert_eq!(convert(&pods[1]).requests.milli_cpu, 6000);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let cases: &[(&str, bool, &str)] = &[
            ("", true, "n.csv:1: column -: empty file"),
            ("sn,cpu_milli,memory_mib,gpu\nn0,1,1,1\n", true, "n.csv:1: column model: missing column"),
            (
                "sn,cpu_milli,memory_mib,gpu,model\nn0,lots,1,1,G2\n",
                true,
                "n.csv:2: column cpu_milli: \"lots\" is not an integer",
            ),
            (
                "sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,1,G2\nn0,1,1,1,G2\n",
                true,
                "n.csv:3: column sn: duplicate node \"n0\" (first on line 2)",
            ),
            ("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,-1,G2\n", true, "n.csv:2: column gpu: -1 is out of range"),
            ("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1\n", true, "n.csv:2: column 4: 3 fields, the header has 5"),
            // A blank header cell is named by its number (found by the openb fuzz target).
            ("sn,,memory_mib,gpu,model\nn0,\"1\",1,1,G2\n", true, "n.csv:2: column 2: quoted fields"),
            (
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n",
                false,
                "p.csv:2: column gpu_milli: a share (500) of 2 GPUs",
            ),
            (
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1001\n",
                false,
                "p.csv:2: column gpu_milli: 1001 is out of range",
            ),
            (
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,\"1\",1,1,1\n",
                false,
                "p.csv:2: column cpu_milli: quoted fields",
            ),
        ];
        for (text, nodes, want) in cases {
            let got = if *nodes {
                read_nodes("n.csv", text).map(|_| ()).unwrap_err()
            } else {
                read_pods("p.csv", text).map(|_| ()).unwrap_err()
            };
            assert!(got.to_string().starts_with(want), "{got}\nwant: {want}");
        }
    }
}
