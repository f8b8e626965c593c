//! The starvation guard as a capability: the holds ([`Holds`]) live here,
//! are added to every cycle, released when their holder leaves the queue,
//! and taken when a pod past its profile's `starvationGuard.after` fits
//! nowhere (the rule is in [`crate::starvation`]).

use std::any::Any;

use super::{Capability, Context};
use crate::framework::{ClusterEvent, CycleState, EventResource, Status};
use crate::model::Pod;
use crate::profile::Profile;
use crate::starvation::{Holds, STARVATION_GUARD};
use crate::time::Millis;

#[derive(Debug, Default)]
pub struct StarvationGuard {
    holds: Holds,
}

impl StarvationGuard {
    /// The nodes held for starving pods.
    pub fn holds(&self) -> &Holds {
        &self.holds
    }
}

impl Capability for StarvationGuard {
    fn name(&self) -> &'static str {
        STARVATION_GUARD
    }

    /// A pod kept off a held node may go there once the holder is placed.
    fn events(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::any(EventResource::AssignedPod), ClusterEvent::any(EventResource::Node)]
    }

    fn pod_left(&mut self, uid: &str) {
        if !self.holds.is_empty() {
            self.holds.release(uid);
        }
    }

    fn prepare_cycle(&mut self, _cx: &Context<'_>, state: &mut CycleState, _pod: &Pod, _now: Millis) {
        if let Some(held) = self.holds.index() {
            state.add_holds(held);
        }
    }

    fn unschedulable(
        &mut self,
        cx: &Context<'_>,
        profile: &Profile,
        pod: &Pod,
        since: Millis,
        rejected: &[(usize, Status)],
        now: Millis,
    ) {
        let Some(cfg) = &profile.starvation else { return };
        if now.saturating_sub(since) < cfg.after_ms() {
            return;
        }
        self.holds.hold(cfg, cx.snapshot, pod, since, rejected);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
