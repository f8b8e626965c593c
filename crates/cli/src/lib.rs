//! The `gpu-scheduler` command line as a library, so that a team can build
//! its own scheduler binary with plugins of its own, the way
//! kube-scheduler's `app.NewSchedulerCommand(app.WithPlugin(...))` does:
//!
//! ```no_run
//! use std::sync::Arc;
//! use gpu_scheduler::App;
//! use gpu_scheduler::engine::framework::{Plugin, FilterPlugin, CycleState, Status};
//! use gpu_scheduler::engine::cache::NodeView;
//! use gpu_scheduler::engine::model::Pod;
//! use gpu_scheduler::engine::registry::ArgsError;
//!
//! struct NoFridays;
//! impl Plugin for NoFridays {
//!     fn name(&self) -> &'static str { "NoFridays" }
//!     fn as_filter(&self) -> Option<&dyn FilterPlugin> { Some(self) }
//! }
//! impl FilterPlugin for NoFridays {
//!     fn filter(&self, _: &CycleState, _: &Pod, node: &NodeView<'_>) -> Status {
//!         if node.node.labels.contains_key("example.com/friday") {
//!             Status::unschedulable("node(s) rest on Fridays")
//!         } else {
//!             Status::success()
//!         }
//!     }
//! }
//! fn new(_args: Option<&serde_json::Value>) -> Result<Arc<dyn Plugin>, ArgsError> {
//!     Ok(Arc::new(NoFridays))
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     // Every built-in command (run, simulate, check-config, ...), with one
//!     // more plugin that configs may enable by name.
//!     App::new().with_plugin("NoFridays", new).run()
//! }
//! ```
//!
//! The binary's code: `anyhow` stays inside; the API is [`App`].

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use engine::config::{self, Configuration};
use engine::extender::Extender;
use engine::profile::DefaultPlugin;
use engine::profile::build_profiles;
use engine::registry::{Factory, Registry};
use indicatif::{ProgressBar, ProgressStyle};
use sim::{Manifests, SimOptions, compare, report};

mod http;

/// The crates a plugin is written against, re-exported so that a custom
/// binary depends on one crate and gets matching versions.
pub use {engine, plugins};

/// The gpu-scheduler command line with a plugin registry and a default
/// plugin list: the built-in ones unless changed.
#[derive(Clone)]
pub struct App {
    registry: Registry,
    defaults: Vec<DefaultPlugin>,
}

impl Default for App {
    fn default() -> Self {
        App::new()
    }
}

impl App {
    /// The built-in plugins, and the default profile of DESIGN.md §4.
    pub fn new() -> Self {
        App { registry: plugins::registry(), defaults: plugins::default_plugins() }
    }

    /// Registers a plugin under `name`: configs can then enable it and
    /// give it `pluginConfig` args. A built-in plugin of that name is
    /// replaced.
    pub fn with_plugin(mut self, name: &'static str, factory: Factory) -> Self {
        self.registry.register(name, factory);
        self
    }

    /// Adds a registered plugin to the default profile (what a profile
    /// runs when its config does not list its plugins), with the weight
    /// its score counts with. It runs after the built-in plugins.
    pub fn with_default_plugin(mut self, name: &'static str, weight: f64) -> Self {
        self.defaults.push(DefaultPlugin::new(name, weight));
        self
    }

    /// Parses the process's arguments and runs the command: the whole
    /// `main` of a scheduler binary.
    pub fn run(&self) -> ExitCode {
        self.run_from(std::env::args_os())
    }

    /// As [`App::run`], with the arguments given (the first is the program name).
    pub fn run_from<I, T>(&self, args: I) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        self.run_with_output(args, &mut std::io::stdout().lock())
    }

    /// As [`App::run_from`], with the reports of `simulate` and
    /// `check-config` written to `out` instead of standard output (so a
    /// test can run thousands of them in one process).
    pub fn run_with_output<I, T>(&self, args: I, out: &mut dyn Write) -> ExitCode
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(e) => {
                let _ = e.print();
                return ExitCode::from(if e.use_stderr() { EXIT_BAD_CONFIG } else { 0 });
            }
        };
        // A long-running scheduler logs what it does; one-shot commands only
        // their warnings. RUST_LOG overrides both.
        let default_filter = match cli.command {
            Command::Run(_) => "info",
            _ => "warn",
        };
        // A second App in one process keeps the first subscriber.
        let _ = tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into()),
            )
            .try_init();
        let result = match cli.command {
            Command::Simulate(args) => self.simulate(args, out),
            Command::Replay(args) => self.replay(args),
            Command::CheckConfig { file } => self.check_config(&file, out),
            Command::Run(args) => self.run_live(args),
            Command::Snapshot { kubeconfig, output } => snapshot(kubeconfig, output),
            Command::Explain { pod, address, output } => explain(&pod, &address, output),
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(Exit(code, e)) => {
                eprintln!("error: {e:#}");
                ExitCode::from(code)
            }
        }
    }
}

/// A Kubernetes scheduler for clusters that mix GPU work with ordinary services.
#[derive(Parser)]
#[command(name = "gpu-scheduler", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Schedule the pods in Kubernetes manifests offline, with the same engine as a live cluster.
    Simulate(SimulateArgs),
    /// Replay a GPU cluster trace (Alibaba's openb) with the same engine: the FGD paper's protocol.
    Replay(ReplayArgs),
    /// Validate a configuration file: exit 0, or exit 2 naming the bad field.
    CheckConfig {
        /// The configuration file (GpuSchedulerConfiguration YAML).
        file: PathBuf,
    },
    /// Schedule a live cluster: the pods whose schedulerName is one of the profiles'.
    Run(RunArgs),
    /// Show a pod's last decision in a running scheduler: each node's verdict and scores.
    Explain {
        /// The pod, as NAMESPACE/NAME.
        pod: String,
        /// The scheduler's HTTP address (run with --enable-explain-endpoint),
        /// e.g. after `kubectl -n gpu-scheduler port-forward deploy/gpu-scheduler 10251`.
        #[arg(long, default_value = "127.0.0.1:10251")]
        address: String,
        /// Report format.
        #[arg(long, value_enum, default_value = "table")]
        output: Output,
    },
    /// Write a live cluster's Nodes, Namespaces, PriorityClasses and Pods as YAML `simulate` reads.
    Snapshot {
        /// Kubeconfig of the cluster; without one, the in-cluster service account.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Write here instead of standard output.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Kubeconfig of the cluster; without one, the in-cluster service account.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Configuration file; without one, the default profile.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed for breaking ties between equally scored nodes (the same seed
    /// as `simulate` makes a snapshot's simulation decide alike).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Bindings in flight at most.
    #[arg(long, default_value_t = 64)]
    bind_concurrency: usize,
    /// Where /healthz, /readyz and /metrics are served (plain HTTP).
    #[arg(long, default_value = "0.0.0.0:10251")]
    http_address: std::net::SocketAddr,
    /// Keep each pod's last decision and serve it at /debug/explain/NS/POD
    /// (for `gpu-scheduler explain`); costs an explanation per decision.
    #[arg(long)]
    enable_explain_endpoint: bool,
    /// Run the spot rebalancer in dry-run whatever the configuration says
    /// (`spotDrain`): it reports what it would taint and evict, and does
    /// neither.
    #[arg(long)]
    dry_run: bool,
    /// How often the --config file is read for changes, applied without a
    /// restart when valid (Go duration; 0s: never).
    #[arg(long, default_value = "2s")]
    config_check_interval: String,
    /// The ConfigMap (NAMESPACE/NAME) mounted as the --config file: Events
    /// about reloads and policy switches are recorded on it.
    #[arg(long)]
    config_map: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(clap::Args)]
struct SimulateArgs {
    /// Configuration file; without one, the default profile.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Report format.
    #[arg(long, value_enum, default_value = "table")]
    output: Output,
    /// Seed for breaking ties between equally scored nodes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The clock for time-dependent rules (RFC 3339); default: now.
    #[arg(long)]
    now: Option<String>,
    /// Show the full decision for one pod (NAMESPACE/NAME).
    #[arg(long, value_name = "NS/POD", conflicts_with = "compare")]
    explain: Option<String>,
    /// Simulate the same manifests under two configurations and compare
    /// them (GPU allocation, fragmentation, pending pods, GPU pods on a
    /// preferred model).
    #[arg(long, num_args = 2, value_names = ["A.yaml", "B.yaml"], conflicts_with = "config")]
    compare: Option<Vec<PathBuf>>,
    /// Also write the result as one self-contained HTML page with charts.
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
    /// Manifests: multi-document YAML of Nodes, Pods, Namespaces,
    /// PriorityClasses, Deployments, ReplicaSets, StatefulSets and Jobs.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum TraceFormat {
    /// Alibaba's cluster-trace-gpu-v2023 node and pod lists (CSV).
    Openb,
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The trace's format.
    #[arg(long, value_enum)]
    format: TraceFormat,
    /// The node list (CSV: sn,cpu_milli,memory_mib,gpu,model).
    #[arg(long)]
    nodes: PathBuf,
    /// The pod list (CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,queue,creation_time,deletion_time,scheduled_time,...]).
    #[arg(long)]
    pods: PathBuf,
    /// Configuration file; without one, the default profile.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seed for the shuffle, the copies and ties between equally scored nodes.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Append random copies of the pods until their GPU requests reach this
    /// multiple of the cluster's GPUs.
    #[arg(long, default_value_t = 1.3)]
    inflate: f64,
    /// Report format.
    #[arg(long, value_enum, default_value = "table")]
    output: Output,
    /// Replay under two configurations and compare them.
    #[arg(long, num_args = 2, value_names = ["A.yaml", "B.yaml"], conflicts_with = "config")]
    compare: Option<Vec<PathBuf>>,
    /// Also write the result as one self-contained HTML page with charts.
    #[arg(long, value_name = "FILE.html", conflicts_with = "timed")]
    report: Option<PathBuf>,
    /// Replay on the trace's clock: pods arrive at their creation_time, run
    /// as long as they ran in the trace, and wait when they do not fit;
    /// reports mean and p95 wait (the pod list needs creation_time).
    #[arg(long, conflicts_with = "inflate")]
    timed: bool,
    /// With --timed: also write where and when every pod ran, as CSV
    /// (pod,node,arrival_s,start_s,end_s; node and start blank for a pod
    /// never placed, end blank for one that ran to the end).
    #[arg(long, value_name = "FILE.csv", requires = "timed", conflicts_with = "compare")]
    placements: Option<PathBuf>,
}

/// Exit code for bad configuration or arguments, as `check-config` promises.
const EXIT_BAD_CONFIG: u8 = 2;

/// An error that carries its exit code.
#[derive(Debug)]
struct Exit(u8, anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for Exit {
    fn from(e: E) -> Self {
        Exit(1, e.into())
    }
}

fn bad_config(e: impl Into<anyhow::Error>) -> Exit {
    Exit(EXIT_BAD_CONFIG, e.into())
}

impl App {
    /// Loads and fully validates a configuration, plugins and their args
    /// included, and builds its extenders (reading their TLS material);
    /// without a file, the default configuration, which has none.
    fn load_config(&self, path: Option<&PathBuf>) -> Result<(Configuration, Vec<Arc<dyn Extender>>), Exit> {
        let Some(path) = path else { return Ok((Configuration::default(), Vec::new())) };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display())).map_err(bad_config)?;
        let loaded = build_config(&text, &self.registry, &self.defaults)
            .with_context(|| format!("{}", path.display()))
            .map_err(bad_config)?;
        Ok((loaded.config, loaded.extenders))
    }

    fn check_config(&self, path: &PathBuf, out: &mut dyn Write) -> Result<(), Exit> {
        let (cfg, _) = self.load_config(Some(path))?;
        let names: Vec<&str> = cfg.profiles.iter().map(|p| p.scheduler_name.as_str()).collect();
        writeln!(out, "{}: valid ({} profile(s): {})", path.display(), names.len(), names.join(", "))?;
        Ok(())
    }

    /// What `run` loads its configuration file with, at start and on every
    /// change: parsed, validated, profiles and extenders built; the error
    /// names the field.
    pub fn config_loader(&self) -> live::reload::Loader {
        let (registry, defaults) = (self.registry.clone(), self.defaults.clone());
        Arc::new(move |text: &str| build_config(text, &registry, &defaults).map_err(|e| format!("{e:#}")))
    }

    fn simulate(&self, args: SimulateArgs, out: &mut dyn Write) -> Result<(), Exit> {
        let now = match &args.now {
            // The engine's clock starts in 1970: an earlier time is refused, not read as 1970.
            Some(t) => t
                .parse::<jiff::Timestamp>()
                .ok()
                .filter(|ts| ts.as_millisecond() >= 0)
                .with_context(|| format!("--now {t:?}: must be {}", engine::facts::TIME_RANGE))
                .map_err(bad_config)?,
            None => jiff::Timestamp::now(),
        };
        // Every configuration first: a bad one exits 2 before any manifest is read.
        let configs: Vec<Option<&PathBuf>> = match &args.compare {
            Some(c) => c.iter().map(Some).collect(),
            None => vec![args.config.as_ref()],
        };
        let loaded = configs.iter().map(|c| self.load_config(*c)).collect::<Result<Vec<_>, Exit>>()?;
        let mut manifests = Manifests::default();
        for f in &args.files {
            manifests.add_file(&f.to_string_lossy())?;
        }
        for (source, what) in &manifests.ignored {
            tracing::debug!("{source}: {what} does not affect scheduling; ignored");
        }

        let run = |(cfg, extenders): (Configuration, Vec<Arc<dyn Extender>>)| -> Result<sim::Simulation, Exit> {
            // A progress bar on stderr for long runs on a terminal; never for JSON.
            let mut bar = progress_bar("pods");
            bar.shown &= matches!(args.output, Output::Table);
            let opts = SimOptions { seed: args.seed, now, explain: args.explain.clone(), extenders };
            let result =
                sim::simulate(&manifests, &cfg, &self.registry, &self.defaults, &opts, &mut |d, t| bar.update(d, t));
            bar.finish();
            let simulation = result?;
            for w in &simulation.warnings {
                eprintln!("warning: {w}");
            }
            Ok(simulation)
        };
        if args.compare.is_some() {
            let runs = configs
                .iter()
                .zip(loaded)
                .map(|(c, l)| Ok(compare::Run::of_simulation(&config_label(*c), &run(l)?)))
                .collect::<Result<Vec<_>, Exit>>()?;
            return comparison(&runs, args.output, args.report.as_ref(), "simulate --compare", out);
        }
        let simulation = run(loaded.into_iter().next().unwrap_or_default())?;
        if let Some(path) = &args.report {
            let label = config_label(args.config.as_ref());
            write_report(path, "simulate", &[compare::Run::of_simulation(&label, &simulation)])?;
        }

        let explanation = match &args.explain {
            Some(pod) => Some(simulation.explanation().ok_or_else(|| {
                bad_config(anyhow::anyhow!(
                    "--explain {pod}: no pending pod of ours with that NAMESPACE/NAME was scheduled"
                ))
            })?),
            None => None,
        };
        match args.output {
            Output::Json => {
                serde_json::to_writer(&mut *out, &report::to_json(&simulation, explanation.as_ref()))?;
                writeln!(out)?;
            }
            Output::Table => {
                write!(out, "{}", report::to_table(&simulation))?;
                if let Some(e) = &explanation {
                    write!(out, "\n{}", report::explanation_table(e))?;
                }
            }
        }
        Ok(())
    }

    fn replay(&self, args: ReplayArgs) -> Result<(), Exit> {
        if !(args.inflate.is_finite() && args.inflate > 0.0 && args.inflate <= 10.0) {
            return Err(bad_config(anyhow::anyhow!(
                "--inflate {}: must be a number above 0 and at most 10",
                args.inflate
            )));
        }
        let TraceFormat::Openb = args.format;
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display())).map_err(bad_config)
        };
        let (nodes_file, pods_file) = (args.nodes.to_string_lossy(), args.pods.to_string_lossy());
        let nodes = sim::openb::read_nodes(&nodes_file, &read(&args.nodes)?).map_err(bad_config)?;
        let pods = sim::openb::read_pods(&pods_file, &read(&args.pods)?).map_err(bad_config)?;
        if args.timed {
            return self.replay_timed(&args, &nodes, &pods, &pods_file);
        }
        let opts = sim::replay::ReplayOptions { seed: args.seed, inflate: args.inflate };
        let run = |config: Option<&PathBuf>| {
            self.with_progress(config, |cfg, progress| {
                sim::replay::replay(&nodes, &pods, cfg, &self.registry, &self.defaults, &opts, progress)
            })
        };
        if let Some(configs) = &args.compare {
            let runs = configs
                .iter()
                .map(|c| Ok(compare::Run::of_replay(&c.display().to_string(), &run(Some(c))?)))
                .collect::<Result<Vec<_>, Exit>>()?;
            return comparison(
                &runs,
                args.output,
                args.report.as_ref(),
                &format!("replay --compare ({pods_file})"),
                &mut std::io::stdout().lock(),
            );
        }
        let replay = run(args.config.as_ref())?;
        if let Some(path) = &args.report {
            let label = config_label(args.config.as_ref());
            write_report(path, &format!("replay ({pods_file})"), &[compare::Run::of_replay(&label, &replay)])?;
        }
        let mut out = std::io::stdout().lock();
        match args.output {
            Output::Json => {
                serde_json::to_writer(&mut out, &report::replay_json(&replay))?;
                writeln!(out)?;
            }
            Output::Table => write!(out, "{}", report::replay_table(&replay))?,
        }
        Ok(())
    }

    /// Loads `config` and runs `replay` with it, a progress bar showing.
    fn with_progress<T>(
        &self,
        config: Option<&PathBuf>,
        replay: impl FnOnce(&Configuration, &mut (dyn FnMut(usize, usize) + Send)) -> Result<T, sim::SimError>,
    ) -> Result<T, Exit> {
        let (cfg, _) = self.load_config(config)?;
        let mut bar = progress_bar("pods");
        let result = replay(&cfg, &mut |d, t| bar.update(d, t));
        bar.finish();
        Ok(result?)
    }

    /// `replay --timed`: one run, or `--compare` side by side.
    fn replay_timed(
        &self,
        args: &ReplayArgs,
        nodes: &[sim::openb::TraceNode],
        pods: &[sim::openb::TracePod],
        pods_file: &str,
    ) -> Result<(), Exit> {
        if let Some(p) = pods.iter().find(|p| p.creation_time.is_none()) {
            return Err(bad_config(anyhow::anyhow!(
                "--timed: {pods_file}: pod {} has no creation_time (the column is needed, with a value on every line)",
                p.name
            )));
        }
        let run = |config: Option<&PathBuf>| {
            self.with_progress(config, |cfg, progress| {
                sim::timed::replay_timed(nodes, pods, cfg, &self.registry, &self.defaults, args.seed, progress)
            })
        };
        if let Some(configs) = &args.compare {
            let runs = configs
                .iter()
                .map(|c| Ok(compare::Run::of_timed(&c.display().to_string(), &run(Some(c))?)))
                .collect::<Result<Vec<_>, Exit>>()?;
            return comparison(&runs, args.output, None, "replay --timed --compare", &mut std::io::stdout().lock());
        }
        let replay = run(args.config.as_ref())?;
        if let Some(path) = &args.placements {
            std::fs::write(path, report::placements_csv(&replay.placements))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        let mut out = std::io::stdout().lock();
        match args.output {
            Output::Json => writeln!(out, "{}", report::timed_json(&replay))?,
            Output::Table => write!(out, "{}", report::timed_table(&replay))?,
        }
        Ok(())
    }

    fn run_live(&self, args: RunArgs) -> Result<(), Exit> {
        let (text, loaded) = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))
                    .map_err(bad_config)?;
                let loaded = build_config(&text, &self.registry, &self.defaults)
                    .with_context(|| format!("{}", path.display()))
                    .map_err(bad_config)?;
                (text, loaded)
            }
            None => {
                let config = Configuration::default();
                let profiles = build_profiles(&config, &self.registry, &self.defaults).map_err(bad_config)?;
                (String::new(), live::reload::Loaded { config, profiles, extenders: Vec::new() })
            }
        };
        let live::reload::Loaded { config: cfg, profiles, extenders } = loaded;
        let mut scheduler = engine::scheduler::Scheduler::new(&cfg, profiles, args.seed).map_err(bad_config)?;
        scheduler.set_extenders(extenders);
        let instance = std::env::var("HOSTNAME").unwrap_or_else(|_| "gpu-scheduler".into());
        let le = &cfg.leader_election;
        let leader_election =
            le.leader_elect.then(|| live::leader::Campaign::from_config(le, live::leader::identity()));
        let metrics = std::sync::Arc::new(live::metrics::Metrics::new());
        let explanations = args.enable_explain_endpoint.then(std::sync::Arc::default);
        let config_map = match &args.config_map {
            Some(s) => Some(
                s.split_once('/')
                    .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
                    .map(|(ns, name)| (ns.to_string(), name.to_string()))
                    .ok_or_else(|| bad_config(anyhow::anyhow!("--config-map {s:?}: expected NAMESPACE/NAME")))?,
            ),
            None => None,
        };
        let interval = config::go_duration::parse(&args.config_check_interval)
            .map_err(|e| bad_config(anyhow::anyhow!("--config-check-interval: {e}")))?;
        let reload = match &args.config {
            Some(path) if !interval.is_zero() => {
                let (load, shown) = (self.config_loader(), path.display().to_string());
                let loader: live::reload::Loader =
                    Arc::new(move |text: &str| load(text).map_err(|e| format!("{shown}: {e}")));
                Some(live::reload::ConfigSource { path: path.clone(), text, loader, interval, config_map })
            }
            _ => None,
        };
        let options = live::RunOptions {
            bind_concurrency: args.bind_concurrency,
            instance,
            leader_election,
            metrics: metrics.clone(),
            explanations: explanations.clone(),
            config: cfg.clone(),
            spot_dry_run: args.dry_run,
            reload,
        };
        let rt = runtime()?;
        rt.block_on(async {
            let addr = http::serve(args.http_address, metrics, explanations)
                .await
                .with_context(|| format!("serving HTTP on {}", args.http_address))?;
            tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
            let clients =
                live::Clients::connect(args.kubeconfig.as_deref(), &cfg.client_connection).await.map_err(bad_config)?;
            live::run(clients, scheduler, options, shutdown_signal()).await?;
            Ok(())
        })
    }
}

/// A configuration's text parsed, validated, and its profiles and
/// extenders built: what `run` starts with and what a reload applies.
fn build_config(text: &str, registry: &Registry, defaults: &[DefaultPlugin]) -> anyhow::Result<live::reload::Loaded> {
    let config = config::parse(text)?;
    let profiles = build_profiles(&config, registry, defaults)?;
    let extenders = extender::from_config(&config.extenders)?;
    Ok(live::reload::Loaded { config, profiles, extenders })
}

/// The configuration's name in reports.
fn config_label(config: Option<&PathBuf>) -> String {
    config.map_or_else(|| "default profile".to_string(), |c| c.display().to_string())
}

/// Writes the HTML report of `runs`.
fn write_report(path: &PathBuf, title: &str, runs: &[compare::Run]) -> Result<(), Exit> {
    std::fs::write(path, compare::html(title, runs)).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Prints a comparison (table or JSON) and writes its report if asked.
fn comparison(
    runs: &[compare::Run],
    output: Output,
    report: Option<&PathBuf>,
    title: &str,
    out: &mut dyn Write,
) -> Result<(), Exit> {
    if let Some(path) = report {
        write_report(path, title, runs)?;
    }
    match output {
        Output::Json => writeln!(out, "{}", compare::json(runs))?,
        Output::Table => write!(out, "{}", compare::table(runs))?,
    }
    Ok(())
}

/// A progress bar on stderr for runs longer than a second, when stderr is
/// a terminal.
struct Progress {
    label: &'static str,
    started: Instant,
    bar: Option<ProgressBar>,
    shown: bool,
}

fn progress_bar(label: &'static str) -> Progress {
    Progress { label, started: Instant::now(), bar: None, shown: std::io::stderr().is_terminal() }
}

impl Progress {
    fn update(&mut self, done: usize, total: usize) {
        if !self.shown || self.started.elapsed() < Duration::from_secs(1) {
            return;
        }
        let label = self.label;
        let b = self.bar.get_or_insert_with(|| {
            let b = ProgressBar::new(total as u64);
            if let Ok(style) = ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {label} {{per_sec}}"))
            {
                b.set_style(style);
            }
            b
        });
        b.set_position(done as u64);
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Exit> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?)
}

/// SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

fn snapshot(kubeconfig: Option<PathBuf>, output: Option<PathBuf>) -> Result<(), Exit> {
    let rt = runtime()?;
    rt.block_on(async {
        // Rate limits of the default configuration: a snapshot is a few lists.
        let clients = live::Clients::connect(kubeconfig.as_deref(), &config::ClientConnection::default())
            .await
            .map_err(bad_config)?;
        let mut buf = Vec::new();
        let counts = live::snapshot::write(&clients.main, &mut buf).await?;
        match &output {
            Some(path) => std::fs::write(path, &buf).with_context(|| format!("writing {}", path.display()))?,
            None => std::io::stdout().write_all(&buf).context("writing the snapshot")?,
        }
        eprintln!("snapshot: {} nodes, {} pods ({} pending)", counts.nodes, counts.pods, counts.pending);
        Ok(())
    })
}

/// Fetches `/debug/explain/NS/POD` from a running scheduler and prints it.
fn explain(pod: &str, address: &str, output: Output) -> Result<(), Exit> {
    let Some((ns, name)) = pod.split_once('/').filter(|(ns, name)| !ns.is_empty() && !name.is_empty()) else {
        return Err(bad_config(anyhow::anyhow!("{pod:?} is not NAMESPACE/NAME")));
    };
    let (status, body) = http_get(address, &format!("/debug/explain/{ns}/{name}")).with_context(|| {
        format!("asking the scheduler at {address} (is it running with --enable-explain-endpoint?)")
    })?;
    if status != 200 {
        return Err(Exit(1, anyhow::anyhow!("{address}: HTTP {status}: {}", body.trim())));
    }
    let e: engine::explain::Explanation = serde_json::from_str(&body)
        .with_context(|| format!("{address} answered something else than an explanation"))?;
    match output {
        Output::Json => println!("{body}"),
        Output::Table => print!("{}", report::explanation_table(&e)),
    }
    Ok(())
}

/// A plain HTTP/1.1 GET (the endpoint is ours and plain HTTP): status and body.
fn http_get(address: &str, path: &str) -> Result<(u16, String)> {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(address).with_context(|| format!("connecting to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").context("malformed HTTP response")?;
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).context("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}
