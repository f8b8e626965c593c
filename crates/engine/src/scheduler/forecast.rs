//! The scheduler's side of intent prediction ([`crate::forecast`]): GPU
//! pods counted as they enter the queue, released as they leave it, and
//! the holds planned on each cycle's snapshot.

use std::collections::HashSet;
use std::sync::Arc;

use super::Scheduler;
use crate::forecast::{Demand, Forecaster};
use crate::framework::CycleState;
use crate::model::Pod;
use crate::time::Millis;

impl Scheduler {
    /// The forecaster, when `forecast.enabled`.
    pub fn forecast(&self) -> Option<&Forecaster> {
        self.forecast.as_ref()
    }

    /// A pod entered the queue: one more request of its queue and shape.
    pub(super) fn forecast_arrival(&mut self, pod: &Pod, now: Millis) {
        let Some(f) = &mut self.forecast else { return };
        let demand = Demand::of(pod, crate::queues::queue_of(pod, self.cache.namespaces()));
        f.arrived(&pod.uid, demand, now);
    }

    /// Plans the forecast holds on the cycle's snapshot (already updated)
    /// and hands them to the cycle with the pod's own demand, which they
    /// do not keep off.
    pub(super) fn forecast_cycle(&mut self, state: &mut CycleState, pod: &Pod, now: Millis) {
        let Some(f) = &mut self.forecast else { return };
        let taken: HashSet<&str> = self.holds.all().into_iter().map(|h| h.node.as_str()).collect();
        f.plan(&self.snapshot, now, &taken);
        let demand = Demand::of(pod, crate::queues::queue_of(pod, self.cache.namespaces()));
        if let Some(held) = f.index(demand) {
            state.add_holds(Arc::new(held));
        }
    }
}
