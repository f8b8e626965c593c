//! The plugin registry: plugin names to factories that build a plugin from
//! its `pluginConfig` args. The binary registers the built-in plugins; a
//! team's own binary can register more.

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
        ArgsError::new(if path == "." { String::new() } else { path }, e.into_inner().to_string())
    })
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
