//! The `gpu-scheduler` binary.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use engine::config::{self, Configuration};
use engine::profile::build_profiles;
use indicatif::{ProgressBar, ProgressStyle};
use sim::{Manifests, SimOptions, report};

mod http;

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
    #[arg(long, value_name = "NS/POD")]
    explain: Option<String>,
    /// Manifests: multi-document YAML of Nodes, Pods, Namespaces,
    /// PriorityClasses, Deployments, ReplicaSets, StatefulSets and Jobs.
    #[arg(required = true)]
    files: Vec<PathBuf>,
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A long-running scheduler logs what it does; one-shot commands only
    // their warnings. RUST_LOG overrides both.
    let default_filter = match cli.command {
        Command::Run(_) => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter.into()),
        )
        .init();
    let result = match cli.command {
        Command::Simulate(args) => simulate(args),
        Command::CheckConfig { file } => check_config(&file),
        Command::Run(args) => run(args),
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

/// Loads and fully validates a configuration, plugins and their args included.
fn load_config(path: &PathBuf) -> Result<Configuration, Exit> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display())).map_err(bad_config)?;
    let cfg = config::parse(&text).with_context(|| format!("{}", path.display())).map_err(bad_config)?;
    build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins())
        .with_context(|| format!("{}", path.display()))
        .map_err(bad_config)?;
    Ok(cfg)
}

fn check_config(path: &PathBuf) -> Result<(), Exit> {
    let cfg = load_config(path)?;
    let names: Vec<&str> = cfg.profiles.iter().map(|p| p.scheduler_name.as_str()).collect();
    println!("{}: valid ({} profile(s): {})", path.display(), names.len(), names.join(", "));
    Ok(())
}

fn simulate(args: SimulateArgs) -> Result<(), Exit> {
    let cfg = match &args.config {
        Some(p) => load_config(p)?,
        None => Configuration::default(),
    };
    let now = match &args.now {
        Some(t) => t
            .parse::<jiff::Timestamp>()
            .with_context(|| format!("--now {t:?} is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)"))
            .map_err(bad_config)?,
        None => jiff::Timestamp::now(),
    };
    let mut manifests = Manifests::default();
    for f in &args.files {
        manifests.add_file(&f.to_string_lossy())?;
    }
    for (source, what) in &manifests.ignored {
        tracing::debug!("{source}: {what} does not affect scheduling; ignored");
    }

    // A progress bar on stderr for long runs on a terminal; never for JSON.
    let show_progress = matches!(args.output, Output::Table) && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut progress = |done: usize, total: usize| {
        if !show_progress || started.elapsed() < Duration::from_secs(1) {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let b = ProgressBar::new(total as u64);
            if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} pods {per_sec}") {
                b.set_style(style);
            }
            b
        });
        b.set_position(done as u64);
    };
    let opts = SimOptions { seed: args.seed, now, explain: args.explain.clone() };
    let result =
        sim::simulate(&manifests, &cfg, &plugins::registry(), &plugins::default_plugins(), &opts, &mut progress);
    if let Some(b) = bar.take() {
        b.finish_and_clear();
    }
    let simulation = result?;
    for w in &simulation.warnings {
        eprintln!("warning: {w}");
    }

    let explanation = match &args.explain {
        Some(pod) => Some(simulation.explanation().ok_or_else(|| {
            bad_config(anyhow::anyhow!(
                "--explain {pod}: no pending pod of ours with that NAMESPACE/NAME was scheduled"
            ))
        })?),
        None => None,
    };
    let mut out = std::io::stdout().lock();
    match args.output {
        Output::Json => {
            serde_json::to_writer(&mut out, &report::to_json(&simulation, explanation.as_ref()))?;
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

fn runtime() -> Result<tokio::runtime::Runtime, Exit> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?)
}

fn run(args: RunArgs) -> Result<(), Exit> {
    let cfg = match &args.config {
        Some(p) => load_config(p)?,
        None => Configuration::default(),
    };
    let profiles = build_profiles(&cfg, &plugins::registry(), &plugins::default_plugins()).map_err(bad_config)?;
    let scheduler = engine::scheduler::Scheduler::new(&cfg, profiles, args.seed).map_err(bad_config)?;
    let instance = std::env::var("HOSTNAME").unwrap_or_else(|_| "gpu-scheduler".into());
    let le = &cfg.leader_election;
    let leader_election = le.leader_elect.then(|| live::leader::Campaign::from_config(le, live::leader::identity()));
    let metrics = std::sync::Arc::new(live::metrics::Metrics::new());
    let explanations = args.enable_explain_endpoint.then(std::sync::Arc::default);
    let options = live::RunOptions {
        bind_concurrency: args.bind_concurrency,
        instance,
        leader_election,
        metrics: metrics.clone(),
        explanations: explanations.clone(),
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
