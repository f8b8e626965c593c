//! A small real extender: an HTTP server speaking kube-scheduler's
//! extender protocol, started on a free port for a test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The last request of each kind, for the test to look at (only the
/// last: a benchmark sends thousands).
#[derive(Default)]
pub struct Seen {
    pub filter: Option<Value>,
    pub prioritize: Option<Value>,
    pub bind: Option<Value>,
}

/// The pod's `mode` label picks a misbehaviour: `error` (an Error in the
/// answer), `500`, `slow` (answers after 2 s), `garbage` (not JSON).
fn misbehave(args: &Value) -> Option<Response> {
    match args["Pod"]["metadata"]["labels"]["mode"].as_str() {
        Some("error") => Some(Json(json!({"Error": "the extender says no"})).into_response()),
        Some("500") => Some((StatusCode::INTERNAL_SERVER_ERROR, "internal trouble").into_response()),
        Some("garbage") => Some("<html>".into_response()),
        Some("slow") => {
            std::thread::sleep(Duration::from_secs(2));
            None
        }
        _ => None,
    }
}

/// Node names in the args, whichever way they came.
pub fn names(args: &Value) -> Vec<String> {
    if let Some(names) = args["NodeNames"].as_array() {
        return names.iter().filter_map(|n| n.as_str().map(String::from)).collect();
    }
    args["Nodes"]["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|n| n["metadata"]["name"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

async fn filter(State(seen): State<Arc<Mutex<Seen>>>, Json(args): Json<Value>) -> Response {
    seen.lock().unwrap().filter = Some(args.clone());
    if let Some(r) = misbehave(&args) {
        return r;
    }
    // Nodes named *bad* fail, *doomed* fail for good; answered as kube's
    // Go types encode them (capitalised), in the shape that was sent.
    let all = names(&args);
    let keep: Vec<&String> = all.iter().filter(|n| !n.contains("bad") && !n.contains("doomed")).collect();
    let failed: serde_json::Map<String, Value> =
        all.iter().filter(|n| n.contains("bad")).map(|n| (n.clone(), json!("bad node, says the extender"))).collect();
    let doomed: serde_json::Map<String, Value> =
        all.iter().filter(|n| n.contains("doomed")).map(|n| (n.clone(), json!("doomed, says the extender"))).collect();
    let mut answer = json!({"FailedNodes": failed, "FailedAndUnresolvableNodes": doomed, "Error": ""});
    if args["NodeNames"].is_array() {
        answer["NodeNames"] = json!(keep);
    } else {
        let items: Vec<Value> = args["Nodes"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| keep.iter().any(|k| n["metadata"]["name"] == k.as_str()))
            .cloned()
            .collect();
        answer["Nodes"] = json!({"items": items});
    }
    Json(answer).into_response()
}

async fn prioritize(State(seen): State<Arc<Mutex<Seen>>>, Json(args): Json<Value>) -> Response {
    seen.lock().unwrap().prioritize = Some(args.clone());
    if let Some(r) = misbehave(&args) {
        return r;
    }
    // Lower-case keys, as many extenders not written in Go answer.
    let list: Vec<Value> = names(&args)
        .into_iter()
        .map(|n| json!({"host": n, "score": if n.contains("best") { 10 } else { 1 }}))
        .collect();
    Json(json!(list)).into_response()
}

async fn bind(State(seen): State<Arc<Mutex<Seen>>>, Json(args): Json<Value>) -> Response {
    seen.lock().unwrap().bind = Some(args.clone());
    let error = if args["Node"].as_str().is_some_and(|n| n.contains("nobind")) { "cannot bind there" } else { "" };
    Json(json!({"Error": error})).into_response()
}

pub struct Server {
    pub url: String,
    pub seen: Arc<Mutex<Seen>>,
    _runtime: tokio::runtime::Runtime,
}

/// Starts the extender at `http://127.0.0.1:PORT/ext`.
pub fn start() -> Server {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = Router::new()
        .route("/ext/filter", post(filter))
        .route("/ext/prioritize", post(prioritize))
        .route("/ext/bind", post(bind))
        .with_state(seen.clone());
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, app).await });
    Server { url: format!("http://{addr}/ext"), seen, _runtime: runtime }
}
