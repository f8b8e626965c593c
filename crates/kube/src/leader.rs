//! Leader election on a `coordination.k8s.io/v1` Lease, with
//! kube-scheduler's (client-go's) semantics: a candidate takes the Lease
//! when it has no holder, or when its record has not changed for the
//! holder's `leaseDurationSeconds` as measured on the candidate's own
//! clock (so clock skew between replicas does not matter); the leader
//! renews every `retryPeriod` and steps down when it could not renew for
//! `renewDeadline`; a leader that stops releases the Lease so another
//! replica takes over at its next try. Writes carry the resourceVersion
//! read: of two candidates, one write wins and the other gets a conflict.

use std::time::{Duration, Instant};

use engine::config::LeaderElection;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// How this replica campaigns.
#[derive(Debug, Clone)]
pub struct Campaign {
    pub name: String,
    pub namespace: String,
    /// Unique per replica: the pod name and a random suffix, as
    /// kube-scheduler uses the host name and a UUID.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Campaign {
    pub fn from_config(cfg: &LeaderElection, identity: String) -> Campaign {
        Campaign {
            name: cfg.resource_name.clone(),
            namespace: cfg.resource_namespace.clone(),
            identity,
            lease_duration: cfg.lease_duration,
            renew_deadline: cfg.renew_deadline,
            retry_period: cfg.retry_period,
        }
    }
}

/// The last Lease record seen and when it was first seen as it is.
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

pub struct Elector {
    api: Api<Lease>,
    campaign: Campaign,
    observed: Option<Observed>,
}

impl Elector {
    pub fn new(client: Client, campaign: Campaign) -> Elector {
        Elector { api: Api::namespaced(client, &campaign.namespace), campaign, observed: None }
    }

    /// Campaigns until `stop` turns true, publishing whether this replica
    /// leads on `leading`. Releases the Lease on the way out if it held it.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut stop: watch::Receiver<bool>) {
        let c = self.campaign.clone();
        info!(lease = %format!("{}/{}", c.namespace, c.name), identity = %c.identity, "campaigning for leadership");
        loop {
            // Follower: try every retry period (jittered, as client-go
            // does, so candidates do not march in step).
            loop {
                if *stop.borrow() {
                    return;
                }
                match self.try_acquire_or_renew().await {
                    Ok(true) => break,
                    Ok(false) => {}
                    Err(e) => warn!("leader election: {e}"),
                }
                let wait = jitter(c.retry_period, self.campaign.identity.len());
                if tokio::time::timeout(wait, stop.changed()).await.is_ok_and(|r| r.is_err()) {
                    return; // the sender is gone: nobody to lead for
                }
            }
            info!(identity = %c.identity, "became leader");
            let _ = leading.send(true);
            // Leader: renew every retry period; give up after the renew
            // deadline without a successful renewal.
            let mut last_renewal = Instant::now();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(c.retry_period) => {}
                    r = stop.changed() => {
                        if r.is_err() || *stop.borrow() {
                            let _ = leading.send(false);
                            self.release().await;
                            return;
                        }
                    }
                }
                let left = c.renew_deadline.saturating_sub(last_renewal.elapsed());
                match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                    Ok(Ok(true)) => last_renewal = Instant::now(),
                    Ok(Ok(false)) => {
                        warn!("lost the lease to another replica");
                        break;
                    }
                    Ok(Err(e)) => warn!("renewing the lease: {e}"),
                    Err(_) => {}
                }
                if last_renewal.elapsed() >= c.renew_deadline {
                    warn!("could not renew the lease within {:?}", c.renew_deadline);
                    break;
                }
            }
            let _ = leading.send(false);
            info!(identity = %c.identity, "stopped leading");
        }
    }

    /// One attempt: create the Lease, renew it, or take it over if it is
    /// free or expired. Ok(false) when another replica holds it.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let c = &self.campaign;
        let now = MicroTime(jiff::Timestamp::now());
        let secs = i32::try_from(c.lease_duration.as_secs()).unwrap_or(i32::MAX).max(1);
        let Some(mut lease) = self.api.get_opt(&c.name).await? else {
            let spec = LeaseSpec {
                holder_identity: Some(c.identity.clone()),
                lease_duration_seconds: Some(secs),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            };
            let lease = Lease {
                metadata: ObjectMeta { name: Some(c.name.clone()), ..Default::default() },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observed = Some(Observed { spec, at: Instant::now() });
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false), // another replica created it first
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed { spec: spec.clone(), at: Instant::now() });
        }
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == c.identity;
        if !ours && !holder.is_empty() {
            let held_for = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
            let seen = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
            if seen.elapsed() < held_for {
                return Ok(false);
            }
            debug!(%holder, "the lease expired; taking it over");
        }
        let mut next = spec.clone();
        next.holder_identity = Some(c.identity.clone());
        next.lease_duration_seconds = Some(secs);
        next.renew_time = Some(now.clone());
        if !ours {
            next.acquire_time = Some(now);
            // Another program's Lease may hold any count: never wrap.
            next.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        lease.spec = Some(next.clone());
        match self.api.replace(&c.name, &PostParams::default(), &lease).await {
            Ok(_) => {
                self.observed = Some(Observed { spec: next, at: Instant::now() });
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up: no holder, one-second duration, so the next
    /// candidate takes it at once.
    async fn release(&mut self) {
        let c = &self.campaign;
        let Ok(Some(mut lease)) = self.api.get_opt(&c.name).await else { return };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(c.identity.as_str()) {
            return;
        }
        let now = MicroTime(jiff::Timestamp::now());
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now.clone());
        spec.acquire_time = Some(now);
        lease.spec = Some(spec);
        match self.api.replace(&c.name, &PostParams::default(), &lease).await {
            Ok(_) => info!(identity = %c.identity, "released the lease"),
            Err(e) => warn!("releasing the lease: {e}"),
        }
    }
}

/// The retry period stretched by up to 20 %, varied per replica.
fn jitter(period: Duration, seed: usize) -> Duration {
    let nanos = jiff::Timestamp::now().subsec_nanosecond().unsigned_abs() as usize;
    let fraction = ((nanos ^ seed.wrapping_mul(2_654_435_761)) % 1000) as f64 / 1000.0;
    // A fifth of any Duration fits one; the sum saturates (no panic at any period).
    period.saturating_add(period.mul_f64(0.2 * fraction))
}

/// A replica identity: `HOSTNAME` (the pod name in a cluster) and a
/// random suffix, so two processes on one host never share it.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "gpu-scheduler".into());
    let nanos = jiff::Timestamp::now().as_nanosecond();
    let suffix = (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32);
    format!("{host}_{suffix:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_a_fifth_of_the_period() {
        for seed in 0..50 {
            let j = jitter(Duration::from_secs(2), seed);
            assert!(j >= Duration::from_secs(2) && j <= Duration::from_millis(2400), "{j:?}");
        }
        for period in [engine::bounds::MAX_DURATION, Duration::MAX] {
            assert!(jitter(period, 7) >= period);
        }
    }

    #[test]
    fn identities_differ_between_calls() {
        let a = identity();
        std::thread::sleep(Duration::from_millis(1));
        assert_ne!(a, identity());
    }
}
