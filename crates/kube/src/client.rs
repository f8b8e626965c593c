//! API clients: from a kubeconfig file or the in-cluster service account,
//! with kube-scheduler's client-side rate limit (`clientConnection.qps`
//! and `burst`) as a token bucket in front of every request.
//!
//! Three clients, each with its own bucket: `main` (watches, bindings,
//! status patches; kube-rs's automatic retries off), `events`, and `lease`
//! (renewals never wait behind bindings). A response silent for
//! [`READ_TIMEOUT`] fails, so a half-open connection cannot hold a binding
//! for ever.

use std::future::Future;
use std::num::NonZeroU32;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use engine::config::{ClientConnection, MAX_BURST, MAX_QPS, MIN_QPS};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use tower::{Layer, Service};

use crate::KubeError;

/// How long a response may stall before its request fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(40);

/// The clients a live run uses. Each has its own rate limiter, as
/// kube-scheduler gives Events and leader election their own clients, so
/// a burst of Events never delays a binding, nor bindings a renewal.
#[derive(Clone)]
pub struct Clients {
    /// Watches, bindings and status patches. The client's automatic
    /// retries are off: a failed binding goes back to the scheduling queue
    /// instead of being retried blindly.
    pub main: Client,
    /// events.k8s.io Events.
    pub events: Client,
    /// The leader-election Lease: renewals never queue behind bindings.
    pub lease: Client,
}

impl Clients {
    /// Connects with `kubeconfig`, or with the in-cluster service account
    /// when there is none.
    pub async fn connect(kubeconfig: Option<&Path>, limits: &ClientConnection) -> Result<Clients, KubeError> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = Kubeconfig::read_from(path)
                    .map_err(|e| KubeError::Config(format!("kubeconfig {}: {e}", path.display())))?;
                Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| KubeError::Config(format!("kubeconfig {}: {e}", path.display())))?
            }
            None => Config::incluster()
                .map_err(|e| KubeError::Config(format!("no --kubeconfig given and not running in a cluster: {e}")))?,
        };
        let mut config = config;
        // A connection that goes silent (half-open: the peer or a middlebox
        // gone without a word) must not hold a binding or a status patch
        // for ever: a response that stalls this long fails, counted from
        // the request's last write, not from when the pooled connection
        // went idle. Watches end well before (`watch::WATCH_TIMEOUT_SECS`).
        config.read_timeout = Some(READ_TIMEOUT);
        config.reset_reader_on_write = true;
        let mut no_retry = config.clone();
        no_retry.default_retry = false;
        Ok(Clients {
            main: build(no_retry.clone(), limits)?,
            events: build(config, limits)?,
            lease: build(no_retry, limits)?,
        })
    }
}

fn build(config: Config, limits: &ClientConnection) -> Result<Client, KubeError> {
    let builder = ClientBuilder::try_from(config).map_err(|e| KubeError::Config(e.to_string()))?;
    Ok(builder.with_layer(&RateLimit::new(limits)).build())
}

/// A token bucket of `burst` tokens refilled at `qps` per second, like
/// client-go's. `qps: 0` means no limit.
#[derive(Clone)]
pub struct RateLimit {
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

impl RateLimit {
    pub fn new(limits: &ClientConnection) -> RateLimit {
        if !(limits.qps.is_finite() && limits.qps > 0.0) {
            return RateLimit { limiter: None };
        }
        // Validation keeps both in range; clamped again here because the
        // bucket's arithmetic (u64 nanoseconds: period, burst × period)
        // overflows past them, and this is public.
        let qps = f64::from(limits.qps).clamp(MIN_QPS, MAX_QPS);
        let period = Duration::try_from_secs_f64(1.0 / qps).unwrap_or(Duration::from_secs(1000));
        let burst = NonZeroU32::new(limits.burst.clamp(1, MAX_BURST)).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period).map(|q| q.allow_burst(burst));
        RateLimit { limiter: quota.map(|q| Arc::new(RateLimiter::direct(q))) }
    }
}

impl<S> Layer<S> for RateLimit {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited { inner, limiter: self.limiter.clone(), wait: None, permitted: false }
    }
}

type Wait = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service that takes a token before each request. The client buffers
/// requests in front of it, so waiting here holds back only this client.
pub struct RateLimited<S> {
    inner: S,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    wait: Option<Wait>,
    permitted: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(limiter) = &self.limiter
            && !self.permitted
        {
            let wait = self.wait.get_or_insert_with(|| {
                let limiter = limiter.clone();
                Box::pin(async move { limiter.until_ready().await })
            });
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.permitted = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qps_zero_or_invalid_means_no_limit() {
        for qps in [0.0, -1.0, f32::NAN] {
            assert!(RateLimit::new(&ClientConnection { qps, burst: 10 }).limiter.is_none(), "{qps}");
        }
        assert!(RateLimit::new(&ClientConnection { qps: 50.0, burst: 0 }).limiter.is_some());
    }

    /// The review's case: a tiny positive qps made 1/qps too long for a
    /// Duration (a panic); huge ones, too short for the bucket.
    #[test]
    fn extreme_limits_neither_panic_nor_lift_the_limit() {
        for qps in [1e-40, f32::MIN_POSITIVE, 1e-3, 1e6, 3e38, f32::MAX] {
            for burst in [0, 1, u32::MAX] {
                let limit = RateLimit::new(&ClientConnection { qps, burst });
                assert!(limit.limiter.is_some(), "qps {qps}, burst {burst}");
            }
        }
    }

    #[test]
    fn requests_beyond_the_burst_wait_for_a_token() {
        use futures::FutureExt;
        use tower::ServiceExt;
        // One token per 100 s: after the burst, the next request must wait.
        let limits = ClientConnection { qps: 0.01, burst: 3 };
        let mut svc = RateLimit::new(&limits).layer(tower::service_fn(|_: ()| async { Ok::<_, ()>(()) }));
        for i in 0..3 {
            let ready = svc.ready().now_or_never();
            assert!(matches!(ready, Some(Ok(_))), "request {i} of the burst waited");
            assert_eq!(svc.call(()).now_or_never(), Some(Ok(())));
        }
        assert!(svc.ready().now_or_never().is_none(), "the fourth request did not wait");
    }
}
