//! Hot reload of the configuration file. Kubernetes updates a mounted
//! ConfigMap by swapping a symlink (`..data`), which file-change
//! notifications follow badly; the file is small, so it is read every
//! `interval` and compared with the text in force. A changed text is
//! loaded (parsed, validated, its profiles and extenders built) off the
//! scheduling thread, and handed to it as a [`Reload`]: the scheduling
//! thread applies it between cycles or refuses it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use engine::config::Configuration;
use engine::extender::Extender;
use engine::profile::Profile;
use tokio::sync::mpsc;
use tracing::debug;

/// A configuration ready to apply.
pub struct Loaded {
    pub config: Configuration,
    pub profiles: Vec<Profile>,
    pub extenders: Vec<Arc<dyn Extender>>,
}

/// Builds a configuration from the file's text; the error names the
/// field that is wrong.
pub type Loader = Arc<dyn Fn(&str) -> Result<Loaded, String> + Send + Sync>;

/// What a changed file gave.
pub enum Reload {
    Valid(Box<Loaded>),
    /// The file could not be read or its configuration is invalid.
    Invalid(String),
}

/// Where the configuration comes from, for `run`.
#[derive(Clone)]
pub struct ConfigSource {
    pub path: PathBuf,
    /// The text the running configuration was loaded from.
    pub text: String,
    pub loader: Loader,
    /// How often the file is read.
    pub interval: Duration,
    /// The ConfigMap mounted at `path` (namespace, name): reload Events
    /// are recorded on it.
    pub config_map: Option<(String, String)>,
}

impl std::fmt::Debug for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigSource")
            .field("path", &self.path)
            .field("interval", &self.interval)
            .field("config_map", &self.config_map)
            .finish_non_exhaustive()
    }
}

/// Reads the file every `interval` and sends each new text's outcome.
/// A failure is sent once until the text (or the failure) changes.
pub fn spawn<T>(source: &ConfigSource, tx: mpsc::Sender<T>)
where
    T: From<Reload> + Send + 'static,
{
    let ConfigSource { path, text, loader, interval, .. } = source.clone();
    tokio::spawn(async move {
        let mut in_force = text;
        let mut last_failure: Option<String> = None;
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let file = path.clone();
            let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(file))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            let outcome = match read {
                Ok(t) if t == in_force => {
                    last_failure = None;
                    continue;
                }
                Ok(t) => {
                    let load = loader.clone();
                    let text = t.clone();
                    match tokio::task::spawn_blocking(move || load(&text)).await {
                        Ok(Ok(loaded)) => {
                            in_force = t;
                            Reload::Valid(Box::new(loaded))
                        }
                        Ok(Err(e)) => Reload::Invalid(e),
                        Err(e) => Reload::Invalid(format!("loading {}: {e}", path.display())),
                    }
                }
                Err(e) => Reload::Invalid(format!("reading {}: {e}", path.display())),
            };
            if let Reload::Invalid(e) = &outcome {
                if last_failure.as_ref() == Some(e) {
                    continue;
                }
                last_failure = Some(e.clone());
            } else {
                last_failure = None;
            }
            debug!(path = %path.display(), "configuration file changed");
            if tx.send(T::from(outcome)).await.is_err() {
                break;
            }
        }
    });
}
