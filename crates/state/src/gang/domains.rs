//! Topology domains for gangs: the nodes grouped by the value of the
//! gang's topology key (a zone, a rack label), ordered so that the fullest
//! domain that can still hold the gang is tried first: a gang packed into
//! one rack leaves whole racks for the next.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::resources::CPU;

/// The nodes of one value of the topology key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub value: String,
    /// Snapshot positions, in search order.
    pub positions: Arc<Vec<usize>>,
    /// Free amount of the resource the domains were ordered by.
    pub free: i64,
}

/// The domains of `key` whose free `resource` (summed over their nodes) is
/// at least `needed`, fullest first (least free, then by value). Nodes
/// without the label belong to no domain.
pub fn domains(snap: &Snapshot, key: &str, resource: &str, needed: i64) -> Vec<Domain> {
    let mut by_value: BTreeMap<&str, (Vec<usize>, i64)> = BTreeMap::new();
    for (i, info) in snap.nodes().iter().enumerate() {
        let Some(value) = info.node.labels.get(key) else { continue };
        let free = if resource == CPU {
            info.node.allocatable.milli_cpu - info.requested.milli_cpu
        } else {
            info.free(resource)
        };
        let e = by_value.entry(value.as_str()).or_default();
        e.0.push(i);
        e.1 += free.max(0);
    }
    let mut out: Vec<Domain> = by_value
        .into_iter()
        .filter(|(_, (_, free))| *free >= needed)
        .map(|(value, (positions, free))| Domain { value: value.to_string(), positions: Arc::new(positions), free })
        .collect();
    out.sort_by(|a, b| a.free.cmp(&b.free).then_with(|| a.value.cmp(&b.value)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn fullest_domain_that_fits_comes_first() {
        let gpu = "nvidia.com/gpu";
        let nodes = vec![
            node("a1").zone("a").resource(gpu, 8).build(),
            node("a2").zone("a").resource(gpu, 8).build(),
            node("b1").zone("b").resource(gpu, 8).build(),
            node("b2").zone("b").resource(gpu, 8).build(),
            node("c1").zone("c").resource(gpu, 8).build(),
            node("x").resource(gpu, 8).build(),
        ];
        // Zone a has 4 GPUs taken, zone b none, zone c only 8 in all.
        let pods = vec![pod("p").node("a1").resource(gpu, 4).arc()];
        let snap = Snapshot::from_parts(nodes, pods);
        let zone = crate::model::LABEL_ZONE;
        let got = |needed| -> Vec<(String, i64)> {
            domains(&snap, zone, gpu, needed).into_iter().map(|d| (d.value, d.free)).collect()
        };
        assert_eq!(got(8), [("c".to_string(), 8), ("a".to_string(), 12), ("b".to_string(), 16)]);
        assert_eq!(got(12), [("a".to_string(), 12), ("b".to_string(), 16)]);
        assert!(got(20).is_empty());
        let a = &domains(&snap, zone, gpu, 0)[1];
        let names: Vec<&str> = a.positions.iter().map(|&i| snap.nodes()[i].name()).collect();
        assert_eq!(names, ["a1", "a2"]);
        assert_eq!(domains(&snap, "no-such-label", gpu, 0), []);
    }
}
