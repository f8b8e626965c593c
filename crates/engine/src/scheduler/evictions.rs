//! Victims of a preemption between the decision and the API's view of
//! their deletion. A driver sends the deletions in the background; until
//! the watch shows a victim terminating, the next cycles would see it
//! running, and its preemptor, tried again, would preempt again (the same
//! victims, or more). So a victim is marked terminating in the cache at
//! the decision, as the API will soon show it, and DefaultPreemption's
//! "a lower-priority pod is terminating on the nominated node" check holds
//! the preemptor back. The mark lasts `EVICTION_TTL` at most: a deletion
//! that failed must not keep the preemptor waiting for ever.
//!
//! The preemptor itself waits for its victims alone (no other event moves
//! it: each would cost a try that fails and a longer backoff) and is
//! activated, backoff waived, when the last of them is gone or the marks
//! end, as kube-scheduler activates a pod whose preemption completed.
//!
//! The mark is `Cache::set_terminating` (a later object of the pod does not
//! unmark it); the preemptor's waiting is the `PreemptionVictims` rejection,
//! which registers no event; activation is `SchedulingQueue::activate_now`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cache::Cache;
use crate::model::PodRef;
use crate::time::Millis;

/// How long a victim stays marked without the API showing it terminating.
pub(super) const EVICTION_TTL: Millis = 30_000;

/// The "plugin" a preemptor waits on: it registers no event, so only its
/// victims' going ([`Evictions::forget`], [`Evictions::expire`]) moves it.
pub(super) const PREEMPTION_VICTIMS: &str = "PreemptionVictims";

#[derive(Debug)]
struct Mark {
    deadline: Millis,
    /// Whether the API's latest object of the pod says it is terminating.
    api_terminating: bool,
    /// The pods waiting for this one to go.
    preemptors: Vec<String>,
}

#[derive(Debug, Default)]
pub(super) struct Evictions {
    /// Marked victims by uid.
    marked: HashMap<String, Mark>,
    /// Per preemptor, how many of its victims are still marked.
    waiting: HashMap<String, usize>,
    /// The earliest deadline of `marked` (skips the scan until then).
    next: Millis,
}

impl Evictions {
    /// Marks `victims` terminating in `cache` until `now + EVICTION_TTL`,
    /// for `preemptors` to wait on.
    pub(super) fn mark(&mut self, cache: &mut Cache, victims: &[PodRef], preemptors: &[String], now: Millis) {
        let deadline = now.saturating_add(EVICTION_TTL);
        for v in victims {
            let Some(was) = cache.set_terminating(&v.uid, true) else { continue };
            let mark = self.marked.entry(v.uid.clone()).or_insert(Mark {
                deadline,
                api_terminating: was,
                preemptors: Vec::new(),
            });
            mark.deadline = deadline;
            for p in preemptors {
                if !mark.preemptors.contains(p) {
                    mark.preemptors.push(p.clone());
                    *self.waiting.entry(p.clone()).or_default() += 1;
                }
            }
            self.next = if self.marked.len() == 1 { deadline } else { self.next.min(deadline) };
        }
    }

    /// Whether `uid` waits for victims of its own.
    #[cfg(test)]
    pub(super) fn is_waiting(&self, uid: &str) -> bool {
        !self.waiting.is_empty() && self.waiting.contains_key(uid)
    }

    /// Takes `uid`'s mark; returns the preemptors it was the last victim of.
    fn unmark(&mut self, uid: &str) -> Option<(Mark, Vec<String>)> {
        let mark = self.marked.remove(uid)?;
        let mut ready = Vec::new();
        for p in &mark.preemptors {
            if let Some(n) = self.waiting.get_mut(p) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.waiting.remove(p);
                    ready.push(p.clone());
                }
            }
        }
        Some((mark, ready))
    }

    /// A newer object of a bound pod: a marked victim stays terminating
    /// (what the API says is kept for when the mark ends).
    pub(super) fn adjust(&mut self, pod: PodRef) -> PodRef {
        if self.marked.is_empty() {
            return pod;
        }
        let Some(mark) = self.marked.get_mut(&pod.uid) else { return pod };
        mark.api_terminating = pod.terminating;
        if pod.terminating {
            return pod;
        }
        let mut p = (*pod).clone();
        p.terminating = true;
        Arc::new(p)
    }

    /// The pod is gone: its mark with it. Returns the preemptors that
    /// waited for it last, to activate.
    pub(super) fn forget(&mut self, uid: &str) -> Vec<String> {
        if self.marked.is_empty() {
            return Vec::new();
        }
        self.unmark(uid).map(|(_, ready)| ready).unwrap_or_default()
    }

    /// Ends the marks whose deadline passed, giving the pods back what the
    /// API last said; returns the preemptors that waited for any of them,
    /// to activate (they may preempt again).
    pub(super) fn expire(&mut self, cache: &mut Cache, now: Millis) -> Vec<String> {
        if self.marked.is_empty() || now < self.next {
            return Vec::new();
        }
        let ended: Vec<String> =
            self.marked.iter().filter(|(_, m)| m.deadline <= now).map(|(uid, _)| uid.clone()).collect();
        let mut activate = Vec::new();
        for uid in &ended {
            let Some((mark, _)) = self.unmark(uid) else { continue };
            cache.set_terminating(uid, mark.api_terminating);
            for p in mark.preemptors {
                self.waiting.remove(&p);
                if !activate.contains(&p) {
                    activate.push(p);
                }
            }
        }
        self.next = self.marked.values().map(|m| m.deadline).min().unwrap_or(0);
        activate
    }

    #[cfg(test)]
    pub(super) fn is_marked(&self, uid: &str) -> bool {
        self.marked.contains_key(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Node, Pod};

    fn cache_with(pods: &[(&str, bool)]) -> Cache {
        let mut cache = Cache::new();
        cache.upsert_node(Node { name: "n1".into(), ..Default::default() });
        for (uid, terminating) in pods {
            let pod = Pod {
                uid: uid.to_string(),
                name: uid.to_string(),
                node_name: Some("n1".into()),
                terminating: *terminating,
                ..Default::default()
            };
            cache.add_pod(Arc::new(pod)).expect("added");
        }
        cache
    }

    fn terminating(cache: &Cache, uid: &str) -> bool {
        let in_node = cache.node("n1").and_then(|n| n.pods.iter().find(|p| p.uid == uid).map(|p| p.terminating));
        let in_cache = cache.pod(uid).map(|p| p.terminating);
        assert_eq!(in_node, in_cache, "node and cache agree on {uid}");
        in_cache.expect("pod in the cache")
    }

    #[test]
    fn a_mark_lasts_until_the_ttl_and_gives_back_what_the_api_said() {
        // (what the API says before, an update during the mark, what the pod is after expiry)
        let cases = [(false, None, false), (false, Some(true), true), (true, None, true), (false, Some(false), false)];
        for (before, update, after) in cases {
            let mut cache = cache_with(&[("v", before)]);
            let mut ev = Evictions::default();
            let victim = cache.pod("v").cloned().expect("pod");
            ev.mark(&mut cache, &[victim], &["p".to_string()], 1_000);
            assert!(terminating(&cache, "v"));
            if let Some(t) = update {
                let newer = Arc::new(Pod { terminating: t, ..(*cache.pod("v").cloned().expect("pod")).clone() });
                let adjusted = ev.adjust(newer);
                assert!(adjusted.terminating, "marked pods stay terminating");
                cache.update_pod(adjusted).expect("updated");
            }
            assert_eq!(
                ev.expire(&mut cache, 1_000 + EVICTION_TTL - 1),
                Vec::<String>::new(),
                "not before the deadline"
            );
            assert!(terminating(&cache, "v") && ev.is_waiting("p"));
            assert_eq!(ev.expire(&mut cache, 1_000 + EVICTION_TTL), ["p"]);
            assert!(!ev.is_waiting("p"));
            assert_eq!(terminating(&cache, "v"), after, "{before} {update:?}");
            assert!(!ev.is_marked("v"));
        }
    }

    #[test]
    fn a_preemptor_is_ready_when_its_last_victim_is_gone() {
        let mut cache = cache_with(&[("a", false), ("b", false), ("c", false)]);
        let mut ev = Evictions::default();
        let pods = |names: &[&str]| names.iter().map(|n| cache.pod(n).cloned().expect("pod")).collect::<Vec<_>>();
        let (first, second) = (pods(&["a", "b"]), pods(&["b"]));
        // Two preemptors chose b: each is ready when its own last victim goes.
        ev.mark(&mut cache, &first, &["p1".to_string()], 0);
        ev.mark(&mut cache, &second, &["p2".to_string()], 0);
        assert!(!terminating(&cache, "c"));
        let c = cache.pod("c").cloned().expect("pod");
        assert!(!ev.adjust(c).terminating, "an unmarked pod is left as the API says");
        assert_eq!(ev.forget("c"), Vec::<String>::new());
        assert_eq!(ev.forget("a"), Vec::<String>::new());
        assert_eq!(ev.forget("b"), ["p1", "p2"]);
        assert!(!ev.is_waiting("p1") && !ev.is_waiting("p2"));
        cache.remove_pod("a").expect("removed");
        cache.remove_pod("b").expect("removed");
        assert_eq!(ev.expire(&mut cache, EVICTION_TTL * 2), Vec::<String>::new());
        assert!(cache.node("n1").expect("node").pods.iter().all(|p| !p.terminating));
    }
}
