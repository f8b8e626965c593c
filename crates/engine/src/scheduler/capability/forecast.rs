//! Intent prediction as a capability ([`crate::forecast`] has the rule):
//! GPU pods counted as they enter the queue, released as they leave it,
//! and the holds planned on each cycle's snapshot around the nodes the
//! capabilities before it hold.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use super::{Capability, Context};
use crate::forecast::{Demand, FORECAST, ForecastConfig, Forecaster};
use crate::framework::{ClusterEvent, CycleState, EventResource};
use crate::model::Pod;
use crate::time::Millis;

#[derive(Debug)]
pub struct Forecast {
    forecaster: Forecaster,
}

impl Forecast {
    pub fn new(cfg: ForecastConfig) -> Self {
        Forecast { forecaster: Forecaster::new(cfg) }
    }

    pub fn forecaster(&self) -> &Forecaster {
        &self.forecaster
    }
}

impl Capability for Forecast {
    fn name(&self) -> &'static str {
        FORECAST
    }

    /// A pod kept off a node held for a forecast may go there once the
    /// forecast's pods are placed (or the window ends: `retry_at`).
    fn events(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::any(EventResource::AssignedPod), ClusterEvent::any(EventResource::Node)]
    }

    /// A pod entered the queue: one more request of its queue and shape.
    fn pod_queued(&mut self, cx: &Context<'_>, pod: &Pod, entered: bool, now: Millis) {
        if entered {
            let demand = Demand::of(pod, crate::queues::queue_of(pod, cx.namespaces));
            self.forecaster.arrived(&pod.uid, demand, now);
        }
    }

    fn pod_left(&mut self, uid: &str) {
        self.forecaster.left(uid);
    }

    /// Plans the holds on the cycle's snapshot, leaving the nodes already
    /// held, and hands them to the cycle with the pod's own demand, which
    /// they do not keep off.
    fn prepare_cycle(&mut self, cx: &Context<'_>, state: &mut CycleState, pod: &Pod, now: Millis) {
        let taken: HashSet<&str> = state.holds().iter().flat_map(|h| h.held_nodes()).collect();
        self.forecaster.plan(cx.snapshot, now, &taken);
        let demand = Demand::of(pod, crate::queues::queue_of(pod, cx.namespaces));
        if let Some(held) = self.forecaster.index(demand) {
            state.add_holds(Arc::new(held));
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
