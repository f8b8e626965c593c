//! Nodes kept for the pods that can use nothing else.
//!
//! Some pods fit only some kinds of GPU node: they name the GPU models they
//! accept (`alibabacloud.com/gpu-card-model: T4`), or they ask for more
//! GPUs or cpu than most nodes have (eight GPUs and 120 cores fit only the
//! 128-core 8-GPU nodes). Nodes are grouped in *types* (GPU model, GPUs,
//! allocatable cpu); each typical shape fits a set of types. When the
//! shapes that fit only within a set of types S ask, together, at least
//! S's share of the free GPUs (`demand(S) / demand ≥ free(S) / free`), the
//! pods to come would fill S's free GPUs by themselves: a pod that also
//! fits elsewhere takes, on S, the room of one that fits nowhere else. S
//! is then *kept*: such a pod goes to S's nodes only when nothing else fits
//! (GpuFragmentation ranks the other nodes first).
//!
//! The rule has no weight: it compares two shares the scheduler knows (the
//! typical shapes' and the snapshot's), and it corrects itself, since a
//! kept set stops losing free GPUs to other pods until its share is back
//! above its demand. Demand counts GPU thousandths (a share's part, or
//! 1000 a whole GPU, times the GPUs) weighted by the shapes' probabilities.
//!
//! [`TypeCapacity`] is the free GPU per node type, kept by the snapshot with
//! the nodes that change; [`KeptTypes`] are the types a request leaves to
//! the shapes that fit nothing else.

use std::sync::Arc;

use super::MILLI_PER_GPU;
use super::node::NodeGpus;
use super::request::{GpuKind, GpuRequest};
use super::shapes::TypicalShapes;

/// A kind of GPU node: its model, GPUs and allocatable cpu.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeType {
    pub model: Option<Arc<str>>,
    pub gpus: usize,
    pub milli_cpu: i64,
}

/// A node's type, borrowed from the node (`NodeInfo::gpu_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeTypeRef<'a> {
    pub model: Option<&'a Arc<str>>,
    pub gpus: usize,
    pub milli_cpu: i64,
}

impl NodeTypeRef<'_> {
    pub fn owned(self) -> NodeType {
        NodeType { model: self.model.cloned(), gpus: self.gpus, milli_cpu: self.milli_cpu }
    }
}

impl NodeType {
    /// Whether a pod of `gpus` whole GPUs or a share (1), `milli_cpu` and
    /// `models` fits a node of this type when it is empty.
    fn fits(&self, gpus: usize, milli_cpu: i64, models: Option<&[Arc<str>]>) -> bool {
        gpus <= self.gpus
            && milli_cpu <= self.milli_cpu
            && models.is_none_or(|list| self.model.as_deref().is_some_and(|m| list.iter().any(|x| &**x == m)))
    }
}

/// Free and total GPU thousandths per node type over the nodes with
/// devices, kept by the snapshot as nodes change (like the gap histogram).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeCapacity {
    /// (type, free, total), by type.
    types: Vec<(NodeType, i64, i64)>,
}

impl TypeCapacity {
    /// Counts a node of type `t` with `gpus` in (`delta` 1) or out
    /// (`delta` -1).
    pub fn apply(&mut self, t: NodeTypeRef<'_>, gpus: &NodeGpus, delta: i64) {
        let count = gpus.count();
        if count == 0 {
            return;
        }
        let free = gpus.free_total() * delta;
        let total = count as i64 * i64::from(MILLI_PER_GPU) * delta;
        let t = t.owned();
        match self.types.binary_search_by(|e| e.0.cmp(&t)) {
            Ok(i) => {
                self.types[i].1 += free;
                self.types[i].2 += total;
                if self.types[i].2 == 0 {
                    self.types.remove(i);
                }
            }
            Err(i) => self.types.insert(i, (t, free, total)),
        }
    }

    /// Free thousandths of every type.
    pub fn free_total(&self) -> i64 {
        self.types.iter().map(|e| e.1).sum()
    }
}

/// A set of node types, by their position in a `TypeCapacity`.
type TypeSet = Vec<bool>;

/// The node types a pod should leave to others this cycle (see the module).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptTypes {
    types: Vec<NodeType>,
}

impl KeptTypes {
    /// The kept sets of node types that `request` (with `milli_cpu`) also
    /// fits outside of; None when there are none (a pod without devices,
    /// no shape limited to part of the types, or none kept).
    pub fn for_request(
        shapes: &TypicalShapes,
        capacity: &TypeCapacity,
        request: &GpuRequest,
        milli_cpu: i64,
    ) -> Option<KeptTypes> {
        let own_gpus = match request.kind {
            GpuKind::Whole { count } => count as usize,
            GpuKind::Share { .. } => 1,
            GpuKind::None | GpuKind::Slices { .. } => return None,
        };
        let types = &capacity.types;
        let free_total = capacity.free_total();
        if free_total <= 0 || types.len() < 2 {
            return None;
        }
        let fits = |gpus: usize, cpu: i64, models: Option<&[Arc<str>]>| -> TypeSet {
            types.iter().map(|t| t.0.fits(gpus, cpu, models)).collect()
        };
        // Each typical GPU shape: the types it fits and its demand.
        let mut demands: Vec<(TypeSet, f64)> = Vec::new();
        for g in &shapes.groups {
            let per_pod = f64::from(g.milli.max(0)) * g.count as f64;
            let mut below = 0.0;
            for (&cpu, &cumulative) in g.cpu.iter().zip(&g.cumulative) {
                let p = cumulative - below;
                below = cumulative;
                demands.push((fits(g.count, cpu, g.models.as_deref()), p * per_pod));
            }
        }
        let total: f64 = demands.iter().map(|d| d.1).sum();
        if total <= 0.0 {
            return None;
        }
        let own = fits(own_gpus, milli_cpu, request.models.as_deref());
        let within = |inner: &TypeSet, outer: &TypeSet| inner.iter().zip(outer).all(|(i, o)| !i || *o);
        let mut kept: TypeSet = vec![false; types.len()];
        let mut seen: Vec<&TypeSet> = Vec::new();
        for (set, _) in &demands {
            // Shapes that fit nowhere, the pod's own set and sets already
            // weighed tell nothing.
            if !set.contains(&true) || within(&own, set) || seen.contains(&set) {
                continue;
            }
            seen.push(set);
            let need: f64 = demands.iter().filter(|(s, _)| within(s, set)).map(|d| d.1).sum();
            let free: i64 = types.iter().zip(set).filter(|(_, in_set)| **in_set).map(|(t, _)| t.1).sum();
            if need / total >= free as f64 / free_total as f64 {
                kept.iter_mut().zip(set).for_each(|(k, s)| *k |= *s);
            }
        }
        let kept: Vec<NodeType> = types.iter().zip(&kept).filter(|(_, k)| **k).map(|(t, _)| t.0.clone()).collect();
        (!kept.is_empty()).then_some(KeptTypes { types: kept })
    }

    /// Whether a node of type `node` is kept for others.
    pub fn keeps(&self, node: NodeTypeRef<'_>) -> bool {
        let model = node.model.map(|m| &**m);
        self.types.iter().any(|t| t.gpus == node.gpus && t.milli_cpu == node.milli_cpu && t.model.as_deref() == model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::shapes::Shape;
    use crate::devices::{DeviceSet, GpuModels};
    use crate::testing::pod;

    fn models(list: &[&str]) -> Option<GpuModels> {
        (!list.is_empty()).then(|| list.iter().map(|m| Arc::from(*m)).collect::<Vec<_>>().into())
    }

    fn shape(cpu: i64, milli: u32, count: u32, only: &[&str]) -> Shape {
        Shape { milli_cpu: cpu, gpu_milli: milli, gpu_count: count, gpu_memory_mib: 0, models: models(only) }
    }

    /// A node of `model`, `gpus` devices and `cpu` cores, `used` GPUs
    /// taken: its type and devices.
    fn gpu_node(name: &str, model: &str, gpus: usize, cpu: i64, used: usize) -> (NodeType, NodeGpus) {
        let mut devices = NodeGpus::new(gpus, None);
        for i in 0..used {
            let p = pod(&format!("{name}-{i}")).node(name).with(|p| {
                p.gpu = GpuRequest::whole(1);
                p.gpu_devices = Some(DeviceSet::single(i));
            });
            devices.add_pod(&p.build());
        }
        (NodeType { model: Some(Arc::from(model)), gpus, milli_cpu: cpu * 1000 }, devices)
    }

    fn type_ref(t: &NodeType) -> NodeTypeRef<'_> {
        NodeTypeRef { model: t.model.as_ref(), gpus: t.gpus, milli_cpu: t.milli_cpu }
    }

    #[test]
    fn capacity_follows_nodes_in_and_out() {
        let mut c = TypeCapacity::default();
        let a = gpu_node("a", "t4", 4, 32, 1);
        c.apply(type_ref(&a.0), &a.1, 1);
        for (t, g) in [gpu_node("b", "g2", 8, 96, 0), gpu_node("c", "g2", 8, 96, 2)] {
            c.apply(type_ref(&t), &g, 1);
        }
        assert_eq!((c.types.len(), c.free_total()), (2, 3000 + 8000 + 6000));
        c.apply(type_ref(&a.0), &a.1, -1);
        assert_eq!((c.types.len(), c.free_total()), (1, 14_000), "a type with no node left is dropped");
    }

    /// A cluster of one t4 node (4 GPUs, 32 cores, `t4_free` free), one g2
    /// node (8 GPUs, 96 cores, `g2_free` free) and one g3 node (8 GPUs, 128
    /// cores, all free): (case, shapes with weights, t4 free, g2 free, the
    /// pod (GPUs, milli-cpu, models), the models of the kept types).
    #[test]
    fn kept_types_table() {
        type Pod = (u32, i64, &'static [&'static str]);
        type Case = (&'static str, Vec<(Shape, f64)>, usize, usize, Pod, &'static [&'static str]);
        let one = shape(4000, 1000, 1, &[]);
        let t4 = shape(4000, 1000, 1, &["t4"]);
        let big = shape(120_000, 1000, 8, &[]);
        let cases: Vec<Case> = vec![
            ("flexible shapes only: nothing kept", vec![(one.clone(), 1.0)], 4, 8, (1, 4000, &[]), &[]),
            // t4-only demand 1/2 against t4's free share 4/20.
            ("t4 demand above its share", vec![(one.clone(), 1.0), (t4.clone(), 1.0)], 4, 8, (1, 4000, &[]), &["t4"]),
            // 1/10 against 4/20.
            ("t4 demand below its share", vec![(one.clone(), 9.0), (t4.clone(), 1.0)], 4, 8, (1, 4000, &[]), &[]),
            // Others took t4 down to 1 of 17 free: 1/10 ≥ 1/17.
            ("t4 used up by others: kept", vec![(one.clone(), 9.0), (t4.clone(), 1.0)], 1, 8, (1, 4000, &[]), &["t4"]),
            (
                "a t4-only pod is not kept from t4",
                vec![(one.clone(), 1.0), (t4.clone(), 1.0)],
                4,
                8,
                (1, 4000, &["t4"]),
                &[],
            ),
            (
                "a pod of t4 or g2 is kept from t4 alone",
                vec![(one.clone(), 1.0), (t4.clone(), 1.0)],
                4,
                8,
                (1, 4000, &["t4", "g2"]),
                &["t4"],
            ),
            // Shares count by their part: 4 × 250 against 9 × 1000.
            (
                "shares count by part",
                vec![(one.clone(), 9.0), (shape(0, 250, 1, &["t4"]), 4.0)],
                4,
                8,
                (1, 0, &[]),
                &[],
            ),
            // 8 GPUs of 120 cores fit the g3 node only: 8 × 1 of 8 + 8 × 1
            // demand against g3's 8 of 20 free.
            ("big pods keep the big node", vec![(one.clone(), 8.0), (big.clone(), 1.0)], 4, 8, (1, 4000, &[]), &["g3"]),
            (
                "a big pod is not kept from it",
                vec![(one.clone(), 8.0), (big.clone(), 1.0)],
                4,
                8,
                (8, 120_000, &[]),
                &[],
            ),
        ];
        for (name, weighted, t4_free, g2_free, (gpus, cpu, own), want) in cases {
            let shapes = TypicalShapes::build(weighted, 1.0);
            let mut c = TypeCapacity::default();
            let nodes = [
                gpu_node("t", "t4", 4, 32, 4 - t4_free),
                gpu_node("g", "g2", 8, 96, 8 - g2_free),
                gpu_node("h", "g3", 8, 128, 0),
            ];
            nodes.iter().for_each(|(t, g)| c.apply(type_ref(t), g, 1));
            let request = GpuRequest { models: models(own), ..GpuRequest::whole(gpus) };
            let got = KeptTypes::for_request(&shapes, &c, &request, cpu);
            let kept: Vec<&str> =
                got.as_ref().map_or(Vec::new(), |k| k.types.iter().filter_map(|t| t.model.as_deref()).collect());
            assert_eq!(kept, want, "{name}");
            if let Some(k) = &got {
                for (t, _) in &nodes {
                    let m = t.model.as_deref().unwrap_or("");
                    assert_eq!(k.keeps(type_ref(t)), want.contains(&m), "{name}: {m}");
                }
            }
        }
        let shapes = TypicalShapes::build(vec![(t4, 1.0)], 1.0);
        assert_eq!(KeptTypes::for_request(&shapes, &TypeCapacity::default(), &GpuRequest::default(), 0), None);
    }
}
