//! The plugin registry: plugin names to factories that build a plugin from
//! its `pluginConfig` args. The binary registers the built-in plugins; a
//! team's own binary can register more (`gpu_scheduler::App::with_plugin`,
//! and `examples/custom-plugin` for a whole crate).
//!
//! A plugin is a type implementing [`Plugin`] and the trait of each
//! extension point it serves (`FilterPlugin`, `ScorePlugin`, ... in
//! [`crate::framework`]), returning itself from the matching `as_*` method.
//! It reads the node through a [`NodeView`](crate::cache::NodeView), keeps
//! per-pod work in the [`CycleState`](crate::framework::CycleState), and
//! does no I/O: outside data reaches it as node facts.
//!
//! ```
//! use std::sync::Arc;
//! use gpu_scheduler_framework::cache::NodeView;
//! use gpu_scheduler_framework::framework::{CycleState, FilterPlugin, Plugin, Status};
//! use gpu_scheduler_framework::model::Pod;
//! use gpu_scheduler_framework::registry::{ArgsError, Registry, decode_args};
//! use gpu_scheduler_framework::testing::{node, pod};
//!
//! /// Keeps pods off nodes whose name has a configured prefix.
//! struct AvoidPrefix { prefix: String }
//!
//! #[derive(serde::Deserialize, Default)]
//! #[serde(deny_unknown_fields)]
//! struct Args { #[serde(default)] prefix: String }
//!
//! impl Plugin for AvoidPrefix {
//!     fn name(&self) -> &'static str { "AvoidPrefix" }
//!     fn as_filter(&self) -> Option<&dyn FilterPlugin> { Some(self) }
//! }
//!
//! impl FilterPlugin for AvoidPrefix {
//!     fn filter(&self, _: &CycleState, _: &Pod, node: &NodeView<'_>) -> Status {
//!         if !self.prefix.is_empty() && node.name().starts_with(&self.prefix) {
//!             Status::unschedulable("node(s) had an avoided name")
//!         } else {
//!             Status::success()
//!         }
//!     }
//! }
//!
//! fn new(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
//!     let args: Args = decode_args(args)?;
//!     Ok(Arc::new(AvoidPrefix { prefix: args.prefix }))
//! }
//!
//! let mut registry = Registry::new();
//! registry.register("AvoidPrefix", new);
//! // What a profile does with `pluginConfig: [{name: AvoidPrefix, args: {prefix: old-}}]`:
//! let factory = registry.get("AvoidPrefix").unwrap();
//! let plugin = factory(Some(&serde_json::json!({"prefix": "old-"}))).unwrap();
//! let filter = plugin.as_filter().unwrap();
//! let (state, p) = (CycleState::new(), pod("p").build());
//! assert!(!filter.filter(&state, &p, &node("old-1").info().view()).is_success());
//! assert!(filter.filter(&state, &p, &node("new-1").info().view()).is_success());
//! // Bad args name the field, as check-config reports them.
//! assert_eq!(factory(Some(&serde_json::json!({"prefx": 1}))).err().unwrap().path, "prefx");
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::framework::Plugin;

/// A problem with a plugin's args: where (a path inside `args`) and what.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{path}: {message}")]
pub struct ArgsError {
    /// Dotted path inside the args, e.g. `scoringStrategy.type`; empty for the args themselves.
    pub path: String,
    pub message: String,
}

impl ArgsError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ArgsError { path: path.into(), message: message.into() }
    }

    /// The value a range check (`crate::bounds`) let through, or its
    /// message as the error of the field at `path`.
    pub fn check<T>(path: impl Into<String>, checked: Result<T, String>) -> Result<T, ArgsError> {
        checked.map_err(|m| ArgsError::new(path, m))
    }
}

/// Builds a plugin from its args (`None` when the profile gives none).
pub type Factory = fn(args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError>;

#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<&'static str, Factory>,
}

impl Registry {
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers (or replaces) a plugin factory under `name`.
    pub fn register(&mut self, name: &'static str, factory: Factory) {
        self.factories.insert(name, factory);
    }

    pub fn get(&self, name: &str) -> Option<Factory> {
        self.factories.get(name).copied()
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.factories.keys().copied()
    }
}

/// Decodes plugin args into `T` (which should `deny_unknown_fields`),
/// defaulting when absent; errors carry the path of the bad field.
pub fn decode_args<T: DeserializeOwned + Default>(args: Option<&serde_json::Value>) -> Result<T, ArgsError> {
    let Some(v) = args else { return Ok(T::default()) };
    if v.is_null() {
        return Ok(T::default());
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let message = crate::bounds::with_type_range(e.into_inner().to_string());
        ArgsError::new(if path == "." { String::new() } else { path }, message)
    })
}

/// A plugin the default profile enables at every point it implements, with
/// its score weight. Weight 0 enables it everywhere but Score (users
/// cannot write 0: enabling it for Score without a weight gives 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DefaultPlugin {
    pub name: &'static str,
    pub weight: f64,
    /// Args the default profile gives the plugin (a JSON object), under
    /// the profile's own `pluginConfig` args for it, field by field, as
    /// kube-scheduler defaults args. They belong to the default list: a
    /// profile whose `multiPoint` disables the plugin (or `*`) does not
    /// get them, even if it enables the plugin again.
    pub args: Option<&'static str>,
}

impl DefaultPlugin {
    pub const fn new(name: &'static str, weight: f64) -> Self {
        DefaultPlugin { name, weight, args: None }
    }

    pub const fn with_args(self, args: &'static str) -> Self {
        DefaultPlugin { args: Some(args), ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Default, Debug)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Args {
        #[serde(default)]
        inner: Inner,
    }
    #[derive(Deserialize, Default, Debug)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Inner {
        #[serde(default)]
        weight: i32,
    }

    #[test]
    fn args_errors_name_the_path() {
        let v = serde_json::json!({"inner": {"weight": "heavy"}});
        let e = decode_args::<Args>(Some(&v)).unwrap_err();
        assert_eq!(e.path, "inner.weight");
        let v = serde_json::json!({"bogus": 1});
        let e = decode_args::<Args>(Some(&v)).unwrap_err();
        assert!(e.message.contains("bogus"), "{e}");
        assert_eq!(decode_args::<Args>(None).unwrap().inner.weight, 0);
    }
}
