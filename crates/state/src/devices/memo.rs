//! What the fragmentation measure said of a node, kept with the node so
//! that a decision does not measure again what an earlier one measured.
//!
//! A node's measure depends only on its own state (free devices, cpu left,
//! model) and on the typical shapes; between two decisions all but one
//! node usually keep their state, and the shapes change only now and then
//! (`shapes.rs` rebuilds them on a new shape or after a sixty-fourth more
//! pods). So each `NodeInfo` keeps, for its cache generation and one
//! build of the shapes, the measure before any pod and, for each request
//! asked since, the devices it could take with the measure after each
//! ([`Candidates`]): the numbers the measure would compute again, so
//! decisions are unchanged, bit for bit. What changes between decisions
//! (the gap balance's costs) is computed each time from them.
//!
//! The memo is a cache inside an otherwise immutable snapshot: each node
//! is scored by one thread in a decision, so its lock is uncontended; a
//! lock that is taken or poisoned is passed by (the value is computed).

use std::sync::Mutex;

use super::frag::Measure;
use super::index::DeviceSet;

/// At most this many requests are kept per node; past it they are
/// dropped and kept afresh (a node sees a few pod shapes between changes).
const MAX_REQUESTS: usize = 16;

/// Which state of which node, measured against which shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoKey {
    /// The node's cache generation (`NodeInfo::generation`, never 0 here).
    pub generation: u64,
    /// `TypicalShapes::id` of the shapes measured against.
    pub shapes: u64,
    pub measure: Measure,
}

/// A request as the measure sees it: thousandths and MiB per device, the
/// number of devices (0 for none), cpu.
pub type RequestKey = (i32, i64, u32, i64);

/// The devices a request may take on a node, one entry per distinct
/// device state in index order (any device of a state leaves the node
/// alike), with the node's measure after; empty when it does not fit.
pub type Candidates = Vec<(DeviceSet, f64)>;

#[derive(Debug, Default)]
struct Memo {
    key: Option<MemoKey>,
    before: Option<f64>,
    requests: Vec<(RequestKey, Candidates)>,
}

/// A node's remembered measures.
#[derive(Debug, Default)]
pub struct FragMemo(Mutex<Memo>);

/// A new copy of a node (the cache changes it) starts with nothing.
impl Clone for FragMemo {
    fn clone(&self) -> Self {
        FragMemo::default()
    }
}

impl FragMemo {
    /// The measure before any pod, computed by `compute` unless known.
    pub fn before(&self, key: MemoKey, compute: impl FnOnce() -> f64) -> f64 {
        let Ok(mut m) = self.0.try_lock() else { return compute() };
        m.reset_unless(key);
        *m.before.get_or_insert_with(compute)
    }

    /// `with` of the measure before any pod and the candidates of
    /// `request`, each computed (by `before`, `compute`) unless known.
    pub fn candidates<R>(
        &self,
        key: MemoKey,
        request: RequestKey,
        before: impl FnOnce() -> f64,
        compute: impl FnOnce() -> Candidates,
        with: impl FnOnce(f64, &[(DeviceSet, f64)]) -> R,
    ) -> R {
        let Ok(mut m) = self.0.try_lock() else { return with(before(), &compute()) };
        m.reset_unless(key);
        let b = *m.before.get_or_insert_with(before);
        if let Some((_, c)) = m.requests.iter().find(|(r, _)| *r == request) {
            return with(b, c);
        }
        if m.requests.len() == MAX_REQUESTS {
            m.requests.clear();
        }
        let c = compute();
        let out = with(b, &c);
        m.requests.push((request, c));
        out
    }
}

impl Memo {
    fn reset_unless(&mut self, key: MemoKey) {
        if self.key != Some(key) {
            *self = Memo { key: Some(key), ..Memo::default() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: MemoKey = MemoKey { generation: 7, shapes: 3, measure: Measure::Packed };

    #[test]
    fn values_are_kept_per_node_state_and_shapes() {
        let memo = FragMemo::default();
        let mut calls = 0;
        let mut count = |v: f64| {
            calls += 1;
            v
        };
        assert_eq!(memo.before(K, || count(1.0)), 1.0);
        assert_eq!(memo.before(K, || count(2.0)), 1.0, "known");
        let one = |v: f64| vec![(DeviceSet::single(1), v)];
        let first = |b: f64, c: &[(DeviceSet, f64)]| (b, c[0].1);
        let r = (300, 0, 1, 100);
        assert_eq!(memo.candidates(K, r, || 0.0, || one(count(5.0)), first), (1.0, 5.0));
        assert_eq!(memo.candidates(K, r, || 0.0, || one(count(6.0)), first), (1.0, 5.0), "known");
        let other_request = memo.candidates(K, (300, 0, 1, 200), || 0.0, || one(count(6.0)), first);
        assert_eq!(other_request, (1.0, 6.0), "another request");
        // Another generation, shapes or measure: all forgotten.
        for other in
            [MemoKey { generation: 8, ..K }, MemoKey { shapes: 4, ..K }, MemoKey { measure: Measure::Fgd, ..K }]
        {
            assert_eq!(memo.before(other, || count(9.0)), 9.0, "{other:?}");
            assert_eq!(memo.candidates(other, r, || 0.0, || one(count(9.5)), first), (9.0, 9.5), "{other:?}");
        }
        assert_eq!(calls, 9);
        // A clone (a changed copy of the node) remembers nothing.
        let copy = memo.clone();
        assert_eq!(copy.before(MemoKey { measure: Measure::Fgd, ..K }, || 4.0), 4.0);
    }

    #[test]
    fn requests_are_bounded() {
        let memo = FragMemo::default();
        for i in 0..(3 * MAX_REQUESTS as i64) {
            let got = memo.candidates(K, (1, 0, 1, i), || 0.0, || vec![(DeviceSet::EMPTY, i as f64)], |_, c| c[0].1);
            assert_eq!(got, i as f64);
        }
        assert!(memo.0.lock().unwrap().requests.len() <= MAX_REQUESTS);
    }

    #[test]
    fn a_held_lock_is_passed_by() {
        let memo = FragMemo::default();
        let _held = memo.0.lock().unwrap();
        assert_eq!(memo.before(K, || 2.5), 2.5);
        let got = memo.candidates(K, (1, 0, 1, 0), || 1.5, || vec![(DeviceSet::EMPTY, 3.5)], |b, c| (b, c[0].1));
        assert_eq!(got, (1.5, 3.5));
    }
}
