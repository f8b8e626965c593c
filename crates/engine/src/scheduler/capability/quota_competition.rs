//! Who competes for each queue's quota, kept across cycles: a pod in the
//! scheduling queue that belongs to a Queue competes until a cycle places
//! it or refuses it for another reason than quota. The count per queue
//! goes into every cycle ([`Waiting`]) for QueueQuota's fair sharing.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use super::{Capability, Context};
use crate::framework::CycleState;
use crate::model::Pod;
use crate::queues::{QuotaRefusal, Waiting};
use crate::time::Millis;

#[derive(Debug, Default)]
pub struct QuotaCompetition {
    /// Pods in the scheduling queue that belong to a Queue, by uid: the
    /// queue, and whether the pod competes (not yet tried, or refused by
    /// quota last time).
    queued_in: HashMap<String, (String, bool)>,
    /// The number of competing pods per queue, handed to each cycle.
    waiting: Arc<HashMap<String, usize>>,
}

impl QuotaCompetition {
    /// Records whether pod `uid` competes for quota in a queue (None: it
    /// does not, or left the scheduling queue), keeping the counts.
    fn set(&mut self, uid: &str, now: Option<(String, bool)>) {
        let old = match &now {
            Some(v) => self.queued_in.insert(uid.to_string(), v.clone()),
            None => self.queued_in.remove(uid),
        };
        let change = |queue: &str, delta: isize, w: &mut Arc<HashMap<String, usize>>| {
            let m = Arc::make_mut(w);
            let n = m.entry(queue.to_string()).or_default();
            *n = n.saturating_add_signed(delta);
            if *n == 0 {
                m.remove(queue);
            }
        };
        if old == now {
            return;
        }
        if let Some((q, true)) = &old {
            change(q, -1, &mut self.waiting);
        }
        if let Some((q, true)) = &now {
            change(q, 1, &mut self.waiting);
        }
    }
}

impl Capability for QuotaCompetition {
    fn name(&self) -> &'static str {
        "QuotaCompetition"
    }

    /// A pod entered the scheduling queue (or changed there): it competes
    /// for its queue's quota, if it has one.
    fn pod_queued(&mut self, cx: &Context<'_>, pod: &Pod, _entered: bool, _now: Millis) {
        match crate::queues::queue_of(pod, cx.namespaces).map(str::to_string) {
            Some(q) => self.set(&pod.uid, Some((q, true))),
            None if !self.queued_in.is_empty() => self.set(&pod.uid, None),
            None => {}
        }
    }

    fn pod_left(&mut self, uid: &str) {
        if !self.queued_in.is_empty() {
            self.set(uid, None);
        }
    }

    fn prepare_cycle(&mut self, _cx: &Context<'_>, state: &mut CycleState, _pod: &Pod, _now: Millis) {
        if !self.waiting.is_empty() {
            state.write(Waiting(self.waiting.clone()));
        }
    }

    /// Refused by quota: still competing for it; placed or refused for
    /// another reason: not (until it changes).
    fn decided(&mut self, pod: &Pod, state: &CycleState, placed: bool) {
        if !self.queued_in.is_empty()
            && let Some((q, _)) = self.queued_in.get(&pod.uid).cloned()
        {
            let competing = !placed && state.read::<QuotaRefusal>().is_some();
            self.set(&pod.uid, Some((q, competing)));
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
