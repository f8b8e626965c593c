//! Timing for metrics. The engine reads no clock of its own: a caller that
//! wants kube-scheduler's duration metrics hands the `Scheduler` an
//! [`Instrument`], whose clock times the extension points and the per-cycle
//! plugin calls. No decision ever reads these times, so decisions stay a
//! function of snapshot, pod, configuration and seed.

use std::sync::Arc;

use crate::framework::Code;

pub trait Instrument: Send + Sync {
    /// Nanoseconds from a monotonic clock of the caller's.
    fn now_nanos(&self) -> u64;
    /// One plugin call at a once-per-cycle extension point (PreFilter,
    /// PreScore, NormalizeScore). Filter and Score run once per node and
    /// are timed as a whole extension point instead: a clock read per node
    /// and plugin would cost more than the plugins themselves.
    fn plugin_executed(&self, plugin: &'static str, extension_point: &'static str, code: Code, nanos: u64);
    /// One extension point of one cycle, all plugins (and nodes) together.
    fn extension_point(&self, extension_point: &'static str, code: Code, profile: &str, nanos: u64);
    /// An extender call failed (`verb`: filter, prioritize or bind);
    /// `ignored` when the cycle went on without it.
    fn extender_error(&self, _extender: &'static str, _verb: &'static str, _ignored: bool) {}
}

/// A started measurement; does nothing without an instrument.
pub struct Span<'a> {
    instrument: Option<&'a Arc<dyn Instrument>>,
    start: u64,
}

impl<'a> Span<'a> {
    /// Starts measuring (reads the instrument's clock, if any).
    pub fn start(instrument: Option<&'a Arc<dyn Instrument>>) -> Span<'a> {
        Span { instrument, start: instrument.map_or(0, |i| i.now_nanos()) }
    }

    fn elapsed(&self, i: &Arc<dyn Instrument>) -> u64 {
        i.now_nanos().saturating_sub(self.start)
    }

    /// Reports one plugin call.
    pub fn plugin(&self, plugin: &'static str, extension_point: &'static str, code: Code) {
        if let Some(i) = self.instrument {
            i.plugin_executed(plugin, extension_point, code, self.elapsed(i));
        }
    }

    /// Reports one extension point.
    pub fn point(&self, extension_point: &'static str, code: Code, profile: &str) {
        if let Some(i) = self.instrument {
            i.extension_point(extension_point, code, profile, self.elapsed(i));
        }
    }
}
