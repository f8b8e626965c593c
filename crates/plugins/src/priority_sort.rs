//! PrioritySort: orders the active queue by pod priority, highest first,
//! and among equal priorities by arrival (kube-scheduler's `PrioritySort`).

use std::sync::Arc;

use framework::framework::{ClusterEvent, Plugin, QueueSortPlugin};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = "PrioritySort";

#[derive(Debug, Default, Clone, Copy)]
pub struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Sorting never rejects a pod, so no event needs to requeue one.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &Pod, a_seq: u64, b: &Pod, b_seq: u64) -> bool {
        a.priority > b.priority || (a.priority == b.priority && a_seq < b_seq)
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(PrioritySort))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::testing::pod;

    #[test]
    fn less_table() {
        struct Case {
            name: &'static str,
            a: (i32, u64),
            b: (i32, u64),
            want: bool,
        }
        let cases = [
            Case { name: "higher priority first", a: (100, 9), b: (1, 0), want: true },
            Case { name: "lower priority later", a: (1, 0), b: (100, 9), want: false },
            Case { name: "equal priority: earlier arrival first", a: (5, 1), b: (5, 2), want: true },
            Case { name: "equal priority: later arrival after", a: (5, 2), b: (5, 1), want: false },
            Case { name: "same pod is not less than itself", a: (5, 1), b: (5, 1), want: false },
            Case { name: "negative priorities order too", a: (-1, 0), b: (-10, 0), want: true },
        ];
        let pl = PrioritySort;
        for c in cases {
            let a = pod("a").priority(c.a.0).build();
            let b = pod("b").priority(c.b.0).build();
            assert_eq!(pl.less(&a, c.a.1, &b, c.b.1), c.want, "{}", c.name);
        }
    }

    #[test]
    fn factory() {
        let p = new(None).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_queue_sort().is_some());
        assert!(p.as_filter().is_none());
        assert!(new(Some(&serde_json::json!({"x": 1}))).is_err());
    }
}
