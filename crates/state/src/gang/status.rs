//! The PodGroup status the scheduler reports, derived from what it knows:
//! how many members are placed (bound or assumed) and running.

use std::fmt;

use super::PodGroup;
use crate::time::Millis;

/// `status.phase` of a PodGroup (scheduler-plugins' phases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GangPhase {
    /// Fewer than minMember members placed; none placed.
    Pending,
    /// Some members placed but fewer than minMember (a binding failed
    /// after others succeeded); the rest are being retried.
    Unknown,
    /// At least minMember members placed, fewer than minMember running.
    Scheduled,
    /// At least minMember members running.
    Running,
}

impl GangPhase {
    pub const ALL: [GangPhase; 4] = [GangPhase::Pending, GangPhase::Unknown, GangPhase::Scheduled, GangPhase::Running];

    pub fn as_str(self) -> &'static str {
        match self {
            GangPhase::Pending => "Pending",
            GangPhase::Unknown => "Unknown",
            GangPhase::Scheduled => "Scheduled",
            GangPhase::Running => "Running",
        }
    }
}

impl fmt::Display for GangPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the scheduler writes to a PodGroup's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GangStatus {
    pub phase: GangPhase,
    /// Members bound or assumed.
    pub scheduled: u32,
    pub running: u32,
    /// When the scheduler first tried to place the gang (`scheduleStartTime`).
    pub schedule_start: Option<Millis>,
}

impl GangStatus {
    pub fn of(group: &PodGroup, scheduled: u32, running: u32, schedule_start: Option<Millis>) -> Self {
        let phase = if running >= group.min_member {
            GangPhase::Running
        } else if scheduled >= group.min_member {
            GangPhase::Scheduled
        } else if scheduled > 0 {
            GangPhase::Unknown
        } else {
            GangPhase::Pending
        };
        GangStatus { phase, scheduled, running, schedule_start }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Resources;

    #[test]
    fn phase_follows_the_counts() {
        let g = PodGroup {
            namespace: "ml".into(),
            name: "g".into(),
            min_member: 3,
            min_resources: Resources::default(),
            schedule_timeout: None,
            topology_key: None,
        };
        // (scheduled, running, phase)
        let cases = [
            (0, 0, GangPhase::Pending),
            (2, 0, GangPhase::Unknown),
            (3, 0, GangPhase::Scheduled),
            (4, 2, GangPhase::Scheduled),
            (3, 3, GangPhase::Running),
        ];
        for (scheduled, running, want) in cases {
            assert_eq!(GangStatus::of(&g, scheduled, running, None).phase, want, "{scheduled} {running}");
        }
    }
}
