//! API clients of the harness: kube's own (HTTP/1.1, a connection per
//! request in flight), or one that speaks HTTP/2 when the API server
//! offers it (many streams on one connection, as client-go does).

use std::path::Path;

use anyhow::Result;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::{Client, Config};
use tower::BoxError;
use tower::ServiceBuilder;

async fn config(kubeconfig: &Path) -> Result<Config> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    Ok(Config::from_custom_kubeconfig(kc, &Default::default()).await?)
}

/// kube's default client.
pub async fn http1(kubeconfig: &Path) -> Result<Client> {
    Ok(Client::try_from(config(kubeconfig).await?)?)
}

/// A client that negotiates HTTP/2 (ALPN) and falls back to HTTP/1.1.
pub async fn http2(kubeconfig: &Path) -> Result<Client> {
    let config = config(kubeconfig).await?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http()
        .enable_all_versions()
        .build();
    let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .map_err(BoxError::from)
        .service(hyper);
    Ok(Client::new(service, config.default_namespace))
}

/// The HTTP version `client` speaks with the API server, from one request.
pub async fn version(client: &Client) -> Result<String> {
    let req = http::Request::get("/version").body(Vec::new())?;
    let res = client.send(req.map(kube::client::Body::from)).await?;
    Ok(format!("{:?}", res.version()))
}
