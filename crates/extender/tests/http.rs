//! The HTTP extender client against a small real extender server: the
//! wire format both ways, node objects or names, failures, timeouts, and
//! managedResources.

mod support;

use std::time::Duration;

use engine::config::{ExtenderConfig, ExtenderManagedResource};
use engine::extender::Extender;
use engine::node_info::NodeInfo;
use engine::testing::{node, pod};
use gpu_scheduler_extender::HttpExtender;

fn config(url: &str) -> ExtenderConfig {
    ExtenderConfig {
        url_prefix: url.to_string(),
        filter_verb: "filter".into(),
        preempt_verb: String::new(),
        prioritize_verb: "prioritize".into(),
        weight: 2,
        bind_verb: "bind".into(),
        enable_https: false,
        tls_config: None,
        http_timeout: Duration::from_secs(5),
        node_cache_capable: false,
        managed_resources: Vec::new(),
        ignorable: false,
    }
}

fn nodes() -> Vec<NodeInfo> {
    ["good-1", "bad-1", "best-1", "doomed-1"].iter().map(|n| node(n).label("zone", "a").info()).collect()
}

#[test]
fn filter_with_whole_nodes_and_with_names() {
    let server = support::start();
    let infos = nodes();
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    for cache_capable in [false, true] {
        let ext =
            HttpExtender::new(0, &ExtenderConfig { node_cache_capable: cache_capable, ..config(&server.url) }).unwrap();
        let p = pod("p").label("app", "web").build();
        let r = ext.filter(&p, &refs).unwrap();
        assert_eq!(r.passed, ["good-1", "best-1"], "cache capable {cache_capable}");
        assert_eq!(r.failed, [("bad-1".to_string(), "bad node, says the extender".to_string())]);
        assert_eq!(r.failed_and_unresolvable, [("doomed-1".to_string(), "doomed, says the extender".to_string())]);
        let sent = server.seen.lock().unwrap().filter.clone().unwrap();
        // kube's ExtenderArgs field names, capitalised as Go encodes them.
        assert_eq!(sent["Pod"]["metadata"]["name"], "p");
        assert_eq!(sent["Pod"]["metadata"]["labels"]["app"], "web");
        if cache_capable {
            assert!(sent["Nodes"].is_null(), "{sent}");
            assert_eq!(sent["NodeNames"].as_array().unwrap().len(), 4);
        } else {
            assert!(sent["NodeNames"].is_null(), "{sent}");
            assert_eq!(sent["Nodes"]["kind"], "NodeList");
            assert_eq!(sent["Nodes"]["items"][0]["metadata"]["labels"]["zone"], "a");
        }
    }
}

#[test]
fn prioritize_and_bind() {
    let server = support::start();
    let infos = nodes();
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let ext = HttpExtender::new(0, &config(&server.url)).unwrap();
    let p = pod("p").namespace("ns").build();
    let scores = ext.prioritize(&p, &refs).unwrap();
    assert!(scores.contains(&("best-1".to_string(), 10)) && scores.contains(&("good-1".to_string(), 1)), "{scores:?}");
    ext.bind(&p, "good-1").unwrap();
    let sent = server.seen.lock().unwrap().bind.clone().unwrap();
    assert_eq!(sent, serde_json::json!({"PodName": "p", "PodNamespace": "ns", "PodUID": p.uid, "Node": "good-1"}));
    let e = ext.bind(&p, "nobind-1").unwrap_err();
    assert!(e.to_string().contains("cannot bind there"), "{e}");
}

#[test]
fn failures_are_errors_that_say_what() {
    let server = support::start();
    let infos = nodes();
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let ext = HttpExtender::new(0, &ExtenderConfig { http_timeout: Duration::from_millis(500), ..config(&server.url) })
        .unwrap();
    for (mode, want) in [
        ("error", "the extender says no"),
        ("500", "HTTP 500: internal trouble"),
        ("garbage", "not JSON"),
        ("slow", "filter: "),
    ] {
        let p = pod("p").label("mode", mode).build();
        let e = ext.filter(&p, &refs).unwrap_err();
        assert!(e.to_string().contains(want), "{mode}: {e}");
        assert!(e.to_string().starts_with(&format!("extender {}", server.url)), "{e}");
    }
    // Nobody listening.
    let gone = HttpExtender::new(0, &config("http://127.0.0.1:9")).unwrap();
    assert!(gone.filter(&pod("p").build(), &refs).is_err());
}

#[test]
fn managed_resources_select_the_pods_sent() {
    let ext = HttpExtender::new(
        0,
        &ExtenderConfig {
            managed_resources: vec![ExtenderManagedResource {
                name: "example.com/fpga".into(),
                ignored_by_scheduler: false,
            }],
            ..config("http://127.0.0.1:9")
        },
    )
    .unwrap();
    assert!(ext.is_interested(&pod("p").resource("example.com/fpga", 1).build()));
    assert!(!ext.is_interested(&pod("p").resource("nvidia.com/gpu", 1).build()));
    assert!(!ext.is_interested(&pod("p").build()));
    let all = HttpExtender::new(0, &config("http://127.0.0.1:9")).unwrap();
    assert!(all.is_interested(&pod("p").build()));
}

#[test]
fn bad_tls_material_names_the_field() {
    let mut c = config("https://127.0.0.1:9");
    c.enable_https = true;
    c.tls_config = Some(engine::config::ExtenderTlsConfig { ca_data: "not base64!".into(), ..Default::default() });
    let Err(e) = HttpExtender::new(3, &c) else { panic!("accepted") };
    assert!(e.to_string().starts_with("extenders[3].tlsConfig.caData: not base64"), "{e}");
    c.tls_config =
        Some(engine::config::ExtenderTlsConfig { cert_file: "/nonexistent.pem".into(), ..Default::default() });
    let Err(e) = HttpExtender::new(0, &c) else { panic!("accepted") };
    assert!(e.to_string().contains("tlsConfig.certFile: /nonexistent.pem"), "{e}");
}
