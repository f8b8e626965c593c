//! Capabilities: what the scheduler does beyond one plugin's verdict, with
//! state of its own across cycles. Each owns that state and hears the
//! pod lifecycle through the hooks it implements (the others do nothing);
//! the scheduler core calls the hooks of every capability in order and
//! names none of them. Plugins decide one
//! cycle (their state lives in the cycle); a capability remembers between
//! cycles (pods waiting for quota, nodes held for a starving pod, a demand
//! forecast).
//!
//! - [`StarvationGuard`]: a pod pending past its profile's
//!   `starvationGuard.after` gets a node held.
//! - [`Forecast`]: GPU demand counted as pods arrive, nodes held for the
//!   demand expected (`forecast.enabled`).
//! - [`QuotaCompetition`]: the pods competing for each queue's quota,
//!   which fair sharing weighs.
//!
//! The order of the list is the order of the hooks: a capability's
//! [`NodeHolds`](crate::framework::NodeHolds) are in the cycle state for
//! those after it (the forecast plans around the starvation guard's holds).

mod forecast;
mod quota_competition;
mod starvation_guard;

use std::any::Any;

pub use forecast::Forecast;
pub use quota_competition::QuotaCompetition;
pub use starvation_guard::StarvationGuard;

use crate::cache::Snapshot;
use crate::config::Configuration;
use crate::framework::{ClusterEvent, CycleState, Status};
use crate::model::{Labels, Pod};
use crate::profile::Profile;
use crate::time::Millis;

/// What a capability may read of the scheduler when it hears an event.
pub struct Context<'a> {
    /// The snapshot of the current cycle (updated before the cycle's hooks).
    pub snapshot: &'a Snapshot,
    /// Namespace labels (a pod's queue may come from its namespace).
    pub namespaces: &'a std::collections::HashMap<String, Labels>,
}

/// A capability's hooks; each has a default that does nothing.
pub trait Capability: Any + Send + Sync {
    /// The name pods it keeps from nodes are rejected under.
    fn name(&self) -> &'static str;

    /// Cluster events that may let a pod it kept from nodes in.
    fn events(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    /// A pending pod was added to the scheduling queue (`entered`) or
    /// changed there.
    fn pod_queued(&mut self, _cx: &Context<'_>, _pod: &Pod, _entered: bool, _now: Millis) {}

    /// A pod left the scheduling queue for good (placed, bound elsewhere,
    /// deleted).
    fn pod_left(&mut self, _uid: &str) {}

    /// Adds what it keeps across cycles to the state of `pod`'s cycle.
    fn prepare_cycle(&mut self, _cx: &Context<'_>, _state: &mut CycleState, _pod: &Pod, _now: Millis) {}

    /// A single pod's cycle decided (`placed` or not) with `state`.
    fn decided(&mut self, _pod: &Pod, _state: &CycleState, _placed: bool) {}

    /// `pod`, pending since `since`, fit no node and nominated none
    /// (`rejected`: each node's verdict); a gang's members that found no
    /// node each count.
    fn unschedulable(
        &mut self,
        _cx: &Context<'_>,
        _profile: &Profile,
        _pod: &Pod,
        _since: Millis,
        _rejected: &[(usize, Status)],
        _now: Millis,
    ) {
    }

    fn as_any(&self) -> &dyn Any;
}

/// The capabilities `cfg` turns on, in hook order.
pub fn for_config(cfg: &Configuration) -> Vec<Box<dyn Capability>> {
    let mut list: Vec<Box<dyn Capability>> = vec![Box::new(StarvationGuard::default())];
    if cfg.forecast.enabled {
        list.push(Box::new(Forecast::new(cfg.forecast.clone())));
    }
    list.push(Box::new(QuotaCompetition::default()));
    list
}
