//! The structured-parameters allocator, as kube's stable one
//! (`dynamic-resource-allocation/structured`): for one node, devices for
//! every request of every claim, or nothing.
//!
//! Pools are the newest generation of each (driver, pool) the node
//! reaches; an incomplete pool (not all its slices seen) gives no devices,
//! and fails a request for all devices. The search is exhaustive and
//! depth-first over claims, requests (the first `firstAvailable`
//! alternative that works), and devices in pool and slice order, so the
//! first complete solution wins, as in kube. A device is taken when it is
//! free (not allocated to any claim; admin access takes none), matches the
//! class's and the request's selectors, is reachable from the node, has no
//! untolerated NoSchedule/NoExecute taint, and keeps the claim's
//! `matchAttribute` constraints.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use framework::dra::{
    ALLOCATION_RESULTS_MAX, AllocatedDevice, Allocation, AllocationConfig, AllocationMode, Attribute, ConfigSource,
    Device, DeviceClass, DeviceId, DeviceRequest, DraObjects, ExactRequest, NodeScope, ResourceClaim, Slice,
};
use framework::model::{Node, NodeSelector, NodeSelectorTerm, Requirement, SelectorOp, TaintEffect};

use super::cel::{DeviceCel, SelectorError};

/// A device the node can reach.
#[derive(Clone, Copy)]
struct Candidate<'a> {
    slice: &'a Slice,
    device: &'a Device,
}

impl Candidate<'_> {
    fn id(&self) -> DeviceId {
        DeviceId {
            driver: self.slice.driver.clone(),
            pool: self.slice.pool.clone(),
            device: Arc::from(&*self.device.name),
        }
    }

    fn scope(&self) -> Option<&NodeScope> {
        self.slice.scope.as_ref().or(self.device.scope.as_ref())
    }
}

/// A pool as the node sees it.
struct Pool<'a> {
    name: String,
    incomplete: bool,
    invalid: bool,
    slices: Vec<&'a Slice>,
}

/// One request, or one alternative of a `firstAvailable` request.
struct Want<'a> {
    /// `req` or `req/sub`.
    name: String,
    base: &'a str,
    sub: Option<&'a str>,
    exact: &'a ExactRequest,
    class: Arc<DeviceClass>,
    count: usize,
    /// For `All`: the devices, chosen up front.
    all: Vec<Candidate<'a>>,
}

/// A request's alternatives (one unless `firstAvailable`).
struct RequestWants<'a> {
    alternatives: Vec<Want<'a>>,
    chosen: usize,
}

/// `matchAttribute`'s state during the search.
struct MatchState<'a> {
    requests: &'a [String],
    attribute: &'a str,
    first: Option<Attribute>,
    count: usize,
}

impl MatchState<'_> {
    fn applies(&self, base: &str, sub: Option<&str>) -> bool {
        self.requests.is_empty()
            || self.requests.iter().any(|r| r == base || sub.is_some_and(|s| *r == format!("{base}/{s}")))
    }

    fn add(&mut self, base: &str, sub: Option<&str>, c: &Candidate<'_>) -> bool {
        if !self.applies(base, sub) {
            return true;
        }
        let Some(a) = c.device.attribute(&c.slice.driver, self.attribute) else { return false };
        match &self.first {
            None => self.first = Some(a.clone()),
            Some(f) if f == a => {}
            Some(_) => return false,
        }
        self.count += 1;
        true
    }

    fn remove(&mut self, base: &str, sub: Option<&str>) {
        if self.applies(base, sub) {
            self.count -= 1;
            if self.count == 0 {
                self.first = None;
            }
        }
    }
}

struct Chosen<'a> {
    want_name: String,
    candidate: Candidate<'a>,
    admin_access: bool,
    exact: &'a ExactRequest,
}

/// Why allocation stopped before trying every way.
enum Stop {
    /// The claims or classes are wrong (kube's error status).
    Fatal(String),
    /// Too many devices for one claim: a cheaper alternative may work.
    TooMany,
}

pub struct Allocator<'a> {
    objects: &'a DraObjects,
    cel: &'a DeviceCel,
    /// Devices allocated to claims, before this search.
    in_use: &'a HashSet<DeviceId>,
}

impl<'a> Allocator<'a> {
    pub fn new(objects: &'a DraObjects, cel: &'a DeviceCel, in_use: &'a HashSet<DeviceId>) -> Self {
        Allocator { objects, cel, in_use }
    }

    /// Allocations for `claims` on `node`, in their order; `Ok(None)` when
    /// they do not all fit; `Err` when the claims or classes are wrong.
    pub fn allocate(&self, node: &Node, claims: &[Arc<ResourceClaim>]) -> Result<Option<Vec<Allocation>>, String> {
        let pools = self.pools(node);
        let mut search = Search {
            objects: self.objects,
            cel: self.cel,
            generation: self.objects.devices_generation(),
            node,
            in_use: self.in_use,
            claims,
            pools: &pools,
            requests: Vec::new(),
            constraints: Vec::new(),
            taken: HashSet::new(),
            results: claims.iter().map(|_| Vec::new()).collect(),
        };
        for claim in claims {
            let mut wants = Vec::new();
            let mut min_devices = 0usize;
            for r in &claim.requests {
                let rw = search.request_wants(claim, r)?;
                min_devices += rw.alternatives.iter().map(|w| w.count).min().unwrap_or(0);
                wants.push(rw);
            }
            if min_devices > ALLOCATION_RESULTS_MAX {
                return Err(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX}",
                    claim.key()
                ));
            }
            search.requests.push(wants);
            search.constraints.push(
                claim
                    .constraints
                    .iter()
                    .map(|c| MatchState { requests: &c.requests, attribute: &c.match_attribute, first: None, count: 0 })
                    .collect(),
            );
        }
        match search.one(0, 0, 0, 0, false) {
            Ok(true) => {}
            Ok(false) | Err(Stop::TooMany) => return Ok(None),
            Err(Stop::Fatal(e)) => return Err(e),
        }
        Ok(Some(claims.iter().enumerate().map(|(i, c)| search.result(i, c)).collect()))
    }

    /// The pools `node` reaches, sorted by driver and pool.
    fn pools(&self, node: &Node) -> Vec<Pool<'a>> {
        let mut by_pool: BTreeMap<(Arc<str>, Arc<str>), Vec<&'a Slice>> = BTreeMap::new();
        for s in self.objects.slices_for(node) {
            by_pool.entry((s.driver.clone(), s.pool.clone())).or_default().push(s);
        }
        by_pool
            .into_iter()
            .map(|((driver, pool), slices)| {
                let newest = slices.iter().map(|s| s.generation).max().unwrap_or(0);
                let slices: Vec<&Slice> = slices.into_iter().filter(|s| s.generation == newest).collect();
                let expected = slices.iter().map(|s| s.slice_count).max().unwrap_or(0);
                let mut names = HashSet::new();
                let invalid = slices.iter().flat_map(|s| s.devices.iter()).any(|d| !names.insert(d.name.as_str()));
                Pool {
                    name: format!("{driver}/{pool}"),
                    incomplete: i64::try_from(slices.len()).unwrap_or(i64::MAX) < expected,
                    invalid,
                    slices,
                }
            })
            .collect()
    }
}

struct Search<'s, 'a> {
    objects: &'a DraObjects,
    cel: &'s DeviceCel,
    generation: u64,
    node: &'s Node,
    in_use: &'s HashSet<DeviceId>,
    claims: &'a [Arc<ResourceClaim>],
    pools: &'s [Pool<'a>],
    requests: Vec<Vec<RequestWants<'a>>>,
    constraints: Vec<Vec<MatchState<'a>>>,
    /// Devices this search took, with the claim that took them.
    taken: HashSet<(DeviceId, usize)>,
    results: Vec<Vec<Chosen<'a>>>,
}

impl<'s, 'a> Search<'s, 'a> {
    fn request_wants(&self, claim: &'a ResourceClaim, r: &'a DeviceRequest) -> Result<RequestWants<'a>, String> {
        let mut alternatives = Vec::new();
        if let Some(exact) = &r.exactly {
            alternatives.push(self.want(claim, r.name.clone(), &r.name, None, exact)?);
        }
        for (sub, exact) in &r.first_available {
            alternatives.push(self.want(claim, format!("{}/{sub}", r.name), &r.name, Some(sub), exact)?);
        }
        Ok(RequestWants { alternatives, chosen: 0 })
    }

    fn want(
        &self,
        claim: &'a ResourceClaim,
        name: String,
        base: &'a str,
        sub: Option<&'a str>,
        exact: &'a ExactRequest,
    ) -> Result<Want<'a>, String> {
        let class = self.objects.class(&exact.class).cloned().ok_or_else(|| {
                format!(
                    "claim {}, request {name}: could not retrieve device class {}: deviceclass.resource.k8s.io \"{}\" not found",
                    claim.key(),
                    exact.class,
                    exact.class
                )
            })?;
        let mut want = Want { name, base, sub, exact, class, count: 0, all: Vec::new() };
        match exact.mode {
            AllocationMode::ExactCount(n) => want.count = n as usize,
            AllocationMode::All => {
                for pool in self.pools {
                    if pool.incomplete {
                        return Err(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {} is currently being updated",
                            claim.key(),
                            want.name,
                            pool.name
                        ));
                    }
                    if pool.invalid {
                        return Err(format!(
                            "claim {}, request {}: asks for all devices, but resource pool {} is currently invalid",
                            claim.key(),
                            want.name,
                            pool.name
                        ));
                    }
                    for slice in &pool.slices {
                        for device in &slice.devices {
                            let c = Candidate { slice, device };
                            if self.selectable(claim, &want, &c)? {
                                want.all.push(c);
                            }
                        }
                    }
                }
                want.count = want.all.len();
            }
        }
        Ok(want)
    }

    /// Whether the device matches the class's and the request's selectors
    /// and is reachable from the node.
    fn selectable(&self, claim: &ResourceClaim, want: &Want<'_>, c: &Candidate<'_>) -> Result<bool, String> {
        if c.device.has_binding_conditions || c.slice.unsupported {
            return Ok(false);
        }
        let id = c.id();
        for (i, expr) in want.class.selectors.iter().enumerate() {
            match self.cel.matches(expr, &id, c.device, self.generation) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(SelectorError::Compile(e)) => {
                    return Err(format!("class {}: selector #{i}: CEL compile error: {e}", want.class.name));
                }
                Err(SelectorError::Runtime(e)) => {
                    return Err(format!("class {}: selector #{i}: CEL runtime error: {e}", want.class.name));
                }
            }
        }
        for (i, expr) in want.exact.selectors.iter().enumerate() {
            match self.cel.matches(expr, &id, c.device, self.generation) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(SelectorError::Compile(e)) => {
                    return Err(format!("claim {}: selector #{i}: CEL compile error: {e}", claim.key()));
                }
                Err(SelectorError::Runtime(e)) => {
                    return Err(format!("claim {}: selector #{i}: CEL runtime error: {e}", claim.key()));
                }
            }
        }
        if c.slice.scope.is_none() && !c.device.scope.as_ref().is_some_and(|s| s.matches(self.node)) {
            return Ok(false);
        }
        Ok(true)
    }

    fn in_use(&self, id: &DeviceId, claim: usize, admin: bool) -> bool {
        if admin {
            self.taken.contains(&(id.clone(), claim))
        } else {
            self.in_use.contains(id) || self.taken.iter().any(|(d, _)| d == id)
        }
    }

    /// Tries to take `c` for the want; the undo is [`Search::release`].
    fn take(&mut self, claim: usize, request: usize, alt: usize, c: Candidate<'a>, must: bool) -> Result<bool, Stop> {
        let want = &self.requests[claim][request].alternatives[alt];
        let (admin, base, sub, exact) = (want.exact.admin_access, want.base, want.sub, want.exact);
        let id = c.id();
        if self.in_use(&id, claim, admin) || c.device.consumes_counters {
            return Ok(false);
        }
        let tainted = c.device.taints.iter().any(|t| {
            matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
                && !exact.tolerations.iter().any(|tol| tol.tolerates(t))
        });
        if tainted {
            return Ok(false);
        }
        let constraints = &mut self.constraints[claim];
        for i in 0..constraints.len() {
            if !constraints[i].add(base, sub, &c) {
                for done in constraints[..i].iter_mut() {
                    done.remove(base, sub);
                }
                if must {
                    return Err(Stop::Fatal(format!(
                        "claim {}, request {}: cannot add device {id} because a claim constraint would not be satisfied",
                        self.claims[claim].key(),
                        want_name(sub, base)
                    )));
                }
                return Ok(false);
            }
        }
        self.taken.insert((id, claim));
        let want_name = self.requests[claim][request].alternatives[alt].name.clone();
        self.results[claim].push(Chosen { want_name, candidate: c, admin_access: admin, exact });
        Ok(true)
    }

    fn release(&mut self, claim: usize) {
        if let Some(ch) = self.results[claim].pop() {
            let (base, sub) = split_name(&ch.want_name);
            for m in self.constraints[claim].iter_mut() {
                m.remove(base, sub);
            }
            self.taken.remove(&(ch.candidate.id(), claim));
        }
    }

    /// kube's `allocateOne`: the device `d` of alternative `alt` of
    /// request `r` of claim `c`, then the rest.
    fn one(&mut self, c: usize, r: usize, alt: usize, d: usize, fixed: bool) -> Result<bool, Stop> {
        if c >= self.claims.len() {
            return Ok(true);
        }
        if r >= self.requests[c].len() {
            return match self.one(c + 1, 0, 0, 0, false) {
                Err(Stop::TooMany) => Ok(false),
                other => other,
            };
        }
        if !fixed && self.is_sub(c, r) {
            let alternatives = self.requests[c][r].alternatives.len();
            let mut all_too_many = true;
            for a in 0..alternatives {
                match self.one(c, r, a, 0, true) {
                    Err(Stop::TooMany) => continue,
                    Err(e) => return Err(e),
                    Ok(true) => {
                        self.requests[c][r].chosen = a;
                        return Ok(true);
                    }
                    Ok(false) => all_too_many = false,
                }
            }
            return if all_too_many { Err(Stop::TooMany) } else { Ok(false) };
        }
        let want = &self.requests[c][r].alternatives[alt];
        let all = matches!(want.exact.mode, AllocationMode::All);
        if all && want.all.is_empty() {
            return Ok(false);
        }
        if d >= want.count {
            return self.one(c, r + 1, 0, 0, false);
        }
        if self.results[c].len() + want.count - d > ALLOCATION_RESULTS_MAX {
            return Err(Stop::TooMany);
        }
        if all {
            let cand = want.all[d];
            if !self.take(c, r, alt, cand, true)? {
                return Ok(false);
            }
            let done = self.one(c, r, alt, d + 1, fixed);
            if !matches!(done, Ok(true)) {
                self.release(c);
            }
            return done;
        }
        let claim = self.claims[c].clone();
        for pool in self.pools {
            if pool.incomplete || pool.invalid {
                continue;
            }
            for slice in &pool.slices {
                for device in &slice.devices {
                    let cand = Candidate { slice, device };
                    let want = &self.requests[c][r].alternatives[alt];
                    if self.in_use(&cand.id(), c, want.exact.admin_access) {
                        continue;
                    }
                    if !self.selectable(&claim, want, &cand).map_err(Stop::Fatal)? {
                        continue;
                    }
                    if !self.take(c, r, alt, cand, false)? {
                        continue;
                    }
                    match self.one(c, r, alt, d + 1, fixed) {
                        Ok(true) => return Ok(true),
                        Ok(false) => self.release(c),
                        Err(e) => {
                            self.release(c);
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(false)
    }

    fn is_sub(&self, c: usize, r: usize) -> bool {
        self.requests[c][r].alternatives.first().is_some_and(|w| w.sub.is_some())
    }

    /// The allocation of claim `i`: devices, configurations, node selector.
    fn result(&self, i: usize, claim: &ResourceClaim) -> Allocation {
        let devices: Vec<AllocatedDevice> = self.results[i]
            .iter()
            .map(|ch| AllocatedDevice {
                request: ch.want_name.clone(),
                id: ch.candidate.id(),
                admin_access: ch.admin_access,
                tolerations: ch.exact.tolerations.clone(),
            })
            .collect();
        let mut config: Vec<AllocationConfig> = Vec::new();
        let mut class_configs: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        let chosen: Vec<&Want<'_>> = self.requests[i].iter().filter_map(|rw| rw.alternatives.get(rw.chosen)).collect();
        for want in &chosen {
            if let Some(&(start, end)) = class_configs.get(want.class.name.as_str()) {
                for c in &mut config[start..end] {
                    c.requests.push(want.name.clone());
                }
                continue;
            }
            let start = config.len();
            for c in &want.class.config {
                config.push(AllocationConfig {
                    source: ConfigSource::Class,
                    requests: vec![want.name.clone()],
                    config: c.clone(),
                });
            }
            class_configs.insert(&want.class.name, (start, config.len()));
        }
        for (requests, c) in &claim.config {
            let applies =
                requests.is_empty() || chosen.iter().any(|w| requests.iter().any(|r| *r == w.base || *r == w.name));
            if applies {
                config.push(AllocationConfig {
                    source: ConfigSource::Claim,
                    requests: requests.clone(),
                    config: c.clone(),
                });
            }
        }
        Allocation { devices, config, node_selector: node_selector(self.results[i].iter().map(|ch| ch.candidate)) }
    }
}

fn want_name(sub: Option<&str>, base: &str) -> String {
    match sub {
        Some(s) => format!("{base}/{s}"),
        None => base.to_string(),
    }
}

fn split_name(name: &str) -> (&str, Option<&str>) {
    match name.split_once('/') {
        Some((b, s)) => (b, Some(s)),
        None => (name, None),
    }
}

/// Where the devices are reachable from: the node of a node-local device,
/// else the requirements of the node selectors, else everywhere (None).
fn node_selector<'a>(devices: impl Iterator<Item = Candidate<'a>>) -> Option<NodeSelector> {
    let mut term = NodeSelectorTerm::default();
    for c in devices {
        match c.scope() {
            Some(NodeScope::Node(n)) => {
                return Some(NodeSelector {
                    terms: vec![NodeSelectorTerm {
                        match_expressions: Vec::new(),
                        match_fields: vec![Requirement {
                            key: "metadata.name".into(),
                            op: SelectorOp::In,
                            values: vec![n.clone()],
                        }],
                    }],
                });
            }
            Some(NodeScope::Selector(s)) => {
                if let Some(t) = s.terms.first() {
                    for r in &t.match_fields {
                        if !term.match_fields.contains(r) {
                            term.match_fields.push(r.clone());
                        }
                    }
                    for r in &t.match_expressions {
                        if !term.match_expressions.contains(r) {
                            term.match_expressions.push(r.clone());
                        }
                    }
                }
            }
            Some(NodeScope::All) | None => {}
        }
    }
    (!term.match_fields.is_empty() || !term.match_expressions.is_empty()).then(|| NodeSelector { terms: vec![term] })
}
