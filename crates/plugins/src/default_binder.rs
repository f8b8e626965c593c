//! DefaultBinder: binds the pod through the [`Binder`] the caller supplies
//! (the `pods/binding` subresource in `run`, the simulated cluster in
//! `simulate`), as kube-scheduler's `DefaultBinder`.

use std::sync::Arc;

use framework::framework::{BindPlugin, Binder, ClusterEvent, CycleState, Plugin, Status};
use framework::model::Pod;
use framework::registry::ArgsError;

use crate::helper::decode_no_args;

pub const NAME: &str = "DefaultBinder";

#[derive(Debug, Default, Clone, Copy)]
pub struct DefaultBinder;

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Binding never marks a pod unschedulable; failures retry with backoff.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        Vec::new()
    }

    fn as_bind(&self) -> Option<&dyn BindPlugin> {
        Some(self)
    }
}

impl BindPlugin for DefaultBinder {
    fn bind(&self, _state: &mut CycleState, pod: &Pod, node: &str, binder: &dyn Binder) -> Status {
        match binder.bind(pod, node) {
            Ok(()) => Status::success(),
            Err(e) => Status::error(e),
        }
    }

    fn is_api_binding(&self) -> bool {
        true
    }
}

pub fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
    decode_no_args(args)?;
    Ok(Arc::new(DefaultBinder))
}

#[cfg(test)]
mod tests {
    use super::*;
    use framework::framework::Code;
    use framework::testing::pod;
    use std::sync::Mutex;

    struct Recorder {
        fail: Option<&'static str>,
        calls: Mutex<Vec<(String, String)>>,
    }

    impl Binder for Recorder {
        fn bind(&self, pod: &Pod, node: &str) -> Result<(), String> {
            self.calls.lock().unwrap().push((pod.key(), node.to_string()));
            match self.fail {
                Some(e) => Err(e.to_string()),
                None => Ok(()),
            }
        }
    }

    #[test]
    fn bind_table() {
        let cases = [
            ("bound", None, Code::Success, ""),
            ("api error becomes an Error status", Some("pods \"p\" not found"), Code::Error, "pods \"p\" not found"),
        ];
        for (name, fail, code, msg) in cases {
            let rec = Recorder { fail, calls: Mutex::new(Vec::new()) };
            let p = pod("p").build();
            let s = DefaultBinder.bind(&mut CycleState::new(), &p, "n1", &rec);
            assert_eq!(s.code, code, "{name}");
            assert_eq!(s.message(), msg, "{name}");
            assert_eq!(*rec.calls.lock().unwrap(), vec![("default/p".to_string(), "n1".to_string())], "{name}");
        }
    }

    #[test]
    fn factory() {
        let p = new(Some(&serde_json::json!({}))).unwrap();
        assert_eq!(p.name(), NAME);
        assert!(p.as_bind().is_some());
    }
}
