//! enableHTTPS and tlsConfig against a real HTTPS extender: certificates
//! made with openssl, the server a few lines of Python's standard library
//! (both are what the control-plane tests need already).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use engine::config::{ExtenderConfig, ExtenderTlsConfig};
use engine::extender::Extender;
use engine::node_info::NodeInfo;
use engine::testing::{node, pod};
use gpu_scheduler_extender::HttpExtender;

const SERVER: &str = r#"
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        args = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        names = args.get('NodeNames') or []
        body = json.dumps({'NodeNames': [n for n in names if n != 'no'], 'FailedNodes': {'no': 'says the TLS extender'}}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
srv = http.server.HTTPServer(('127.0.0.1', 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA and a server certificate for 127.0.0.1 signed by it.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "1",
            "-subj",
            "/CN=test-ca",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "1",
            "-extfile",
            "san.ext",
        ],
    );
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(dir: &Path) -> (Server, u16) {
    let mut child = Command::new("python3")
        .args(["-c", SERVER, "server.crt", "server.key"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.trim().parse().unwrap_or_else(|_| panic!("no port from the server: {line:?}"));
    (Server(child), port)
}

fn config(port: u16, tls: Option<ExtenderTlsConfig>) -> ExtenderConfig {
    ExtenderConfig {
        url_prefix: format!("https://127.0.0.1:{port}/ext"),
        filter_verb: "filter".into(),
        preempt_verb: String::new(),
        prioritize_verb: String::new(),
        weight: 0,
        bind_verb: String::new(),
        enable_https: true,
        tls_config: tls,
        http_timeout: Duration::from_secs(5),
        node_cache_capable: true,
        managed_resources: Vec::new(),
        ignorable: false,
    }
}

#[test]
fn https_with_the_configured_ca() {
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("extender-https");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    certificates(&dir);
    let (_server, port) = start(&dir);
    let infos: Vec<NodeInfo> = ["yes", "no"].iter().map(|n| node(n).info()).collect();
    let refs: Vec<&NodeInfo> = infos.iter().collect();
    let p = pod("p").build();
    let ca_file = dir.join("ca.crt").to_string_lossy().into_owned();
    let ca_data = base64::engine::general_purpose::STANDARD.encode(std::fs::read(dir.join("ca.crt")).unwrap());

    // The CA as a file, and inline as kube's base64 caData.
    for tls in [
        ExtenderTlsConfig { ca_file: ca_file.clone(), ..Default::default() },
        ExtenderTlsConfig { ca_data, ..Default::default() },
    ] {
        let ext = HttpExtender::new(0, &config(port, Some(tls))).unwrap();
        let r = ext.filter(&p, &refs).unwrap();
        assert_eq!(r.passed, ["yes"]);
        assert_eq!(r.failed, [("no".to_string(), "says the TLS extender".to_string())]);
    }
    // Without the CA the server is not trusted...
    let ext = HttpExtender::new(0, &config(port, None)).unwrap();
    let e = ext.filter(&p, &refs).unwrap_err();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    // ...unless verification is off.
    let insecure = ExtenderTlsConfig { insecure: true, ..Default::default() };
    let ext = HttpExtender::new(0, &config(port, Some(insecure))).unwrap();
    assert_eq!(ext.filter(&p, &refs).unwrap().passed, ["yes"]);
}
