//! Errors in the fields of an object, worded as apimachinery's
//! `field.Error` bodies so users see familiar text. [`ConvertError`] is what
//! conversion returns (the engine's `convert` re-exports it): the field
//! path and the message.

use std::fmt::Display;

use thiserror::Error;

/// A field of the object that cannot be converted.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{path}: {message}")]
pub struct ConvertError {
    /// Field path inside the object, e.g. `spec.containers[1].resources.requests.cpu`.
    pub path: String,
    pub message: String,
}

pub fn required(path: impl Into<String>, detail: &str) -> ConvertError {
    let message = if detail.is_empty() { "Required value".to_string() } else { format!("Required value: {detail}") };
    ConvertError { path: path.into(), message }
}

/// `bad` is already rendered (quoted string, number or JSON).
pub fn invalid(path: impl Into<String>, bad: impl Display, detail: &str) -> ConvertError {
    ConvertError { path: path.into(), message: format!("Invalid value: {bad}: {detail}") }
}

pub fn unsupported(path: impl Into<String>, bad: &str, supported: &[&str]) -> ConvertError {
    let list = supported.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ");
    ConvertError { path: path.into(), message: format!("Unsupported value: {bad:?}: supported values: {list}") }
}

/// A configuration problem: the field path and what is wrong with it.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { path: path.into(), message: message.into() }
    }

    /// The value a range check ([`crate::bounds`]) let through, or its
    /// message as the error of the field at `path`.
    pub fn check<T>(path: impl Into<String>, checked: Result<T, String>) -> Result<T, ConfigError> {
        checked.map_err(|m| ConfigError::new(path, m))
    }
}
