//! Builders for pods in tests: terse, and explicit about what a test sets.
//! The engine's `testing` adds nodes and their NodeInfo.

use std::sync::Arc;

use crate::model::{HostPort, Pod, TaintEffect, Toleration, TolerationOp};

/// A pod in namespace `default` with uid = name and no requests.
pub fn pod(name: &str) -> PodBuilder {
    PodBuilder(Pod {
        uid: name.into(),
        namespace: "default".into(),
        name: name.into(),
        scheduler_name: "gpu-scheduler".into(),
        non_zero_milli_cpu: crate::resources::DEFAULT_MILLI_CPU_REQUEST,
        non_zero_memory: crate::resources::DEFAULT_MEMORY_REQUEST,
        ..Default::default()
    })
}

pub struct PodBuilder(pub Pod);

impl PodBuilder {
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.namespace = ns.into();
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.annotations.insert(k.into(), v.into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(k.into(), v.into());
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    /// Requests cpu (milli) and memory (bytes); the non-zero values follow.
    pub fn req(mut self, milli_cpu: i64, memory: i64) -> Self {
        self.0.requests.milli_cpu = milli_cpu;
        self.0.requests.memory = memory;
        let (c, m) = crate::resources::non_zero_defaults(milli_cpu, memory);
        self.0.non_zero_milli_cpu = c;
        self.0.non_zero_memory = m;
        self
    }
    /// Requests an extended resource; GPU resources (`nvidia.com/gpu`,
    /// MIG, time-sliced) set the GPU request as conversion would.
    pub fn resource(mut self, name: &str, v: i64) -> Self {
        self.0.requests.set(name, v);
        if let Ok(gpu) = crate::gpu::GpuRequest::from_pod(&mut self.0.requests, &self.0.annotations) {
            self.0.gpu = gpu;
        }
        self
    }
    pub fn node(mut self, node: &str) -> Self {
        self.0.node_name = Some(node.into());
        self
    }
    pub fn host_port(mut self, port: i32, protocol: &str, host_ip: &str) -> Self {
        self.0.host_ports.push(HostPort { protocol: protocol.into(), host_ip: host_ip.into(), port });
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.0.node_selector.insert(k.into(), v.into());
        self
    }
    pub fn toleration(mut self, key: &str, op: TolerationOp, value: &str, effect: Option<TaintEffect>) -> Self {
        self.0.tolerations.push(Toleration { key: key.into(), op, value: value.into(), effect });
        self
    }
    /// Direct access for fields without a builder method.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }
    pub fn build(self) -> Pod {
        self.0
    }
    pub fn arc(self) -> Arc<Pod> {
        Arc::new(self.0)
    }
}

/// Extreme values for the tests of every parser of outside numbers (issue
/// "hostile numbers"): the property tests draw from them, the config and
/// annotation sweep (`crates/cli/tests/hostile_numbers.rs`) tries each, and
/// `fuzz/seeds` holds them, so that a value past a type's range is found by
/// the tests, not by a user.
pub mod extremes {
    /// Numbers as a YAML or annotation author may write them: ±0, negative,
    /// NaN, ±inf, 2^31, 2^32, 2^63, 2^64, 1e308, 1e-320 (subnormal), huge
    /// exponents, and the spellings of each that parsers disagree on.
    pub const NUMBERS: &[&str] = &[
        "0",
        "-0",
        "-0.0",
        "-1",
        "0.5",
        "1e-9",
        "1e-320",
        "-1e-320",
        ".nan",
        "NaN",
        ".inf",
        "-.inf",
        "inf",
        "-Infinity",
        "2147483647",
        "2147483648",
        "4294967296",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1e308",
        "-1e308",
        "1.7976931348623157e308",
        "1e999",
        "-1e999",
        "1e-999",
        "0x7fffffffffffffff",
        "1_000",
    ];

    /// Go durations: zero and negative, each unit suffix at 1, 2^63 and 2^64
    /// and beyond, Go's longest duration and one past it, fractions finer
    /// than a nanosecond, and spellings that are not durations at all.
    pub const DURATIONS: &[&str] = &[
        "0",
        "-0",
        "0s",
        "-0s",
        "-1s",
        "-1ns",
        "+1s",
        "0.1ns",
        "0.000000000000000000000000000001h",
        ".5s",
        "5.s",
        "1.5h",
        "1h1m1s1ms1us1ns",
        "1ns",
        "1us",
        "1µs",
        "1μs",
        "1ms",
        "1s",
        "1m",
        "1h",
        "9223372036854775807ns",
        "9223372036854775808ns",
        "9223372036854775807us",
        "9223372036854775807µs",
        "9223372036854775807ms",
        "9223372036854775807s",
        "9223372036854775807m",
        "9223372036854775807h",
        "18446744073709551616ns",
        "18446744073709551616us",
        "18446744073709551616ms",
        "18446744073709551616s",
        "18446744073709551616m",
        "18446744073709551616h",
        "100000000000000000000h",
        "99999999999999999999999999999999999999999999999999h",
        "2562047h47m16.854775807s",
        "2562047h47m16.854775808s",
        "2562048h",
        "9223372036s",
        "9223372037s",
        "2147483647s",
        "2147483648s",
        "1e308s",
        "1e-320s",
        "NaNs",
        "infh",
        "1d",
        "s",
        "",
    ];

    /// RFC 3339 times at and past the ends of what the parsers and the
    /// engine's milliseconds hold, and dates that do not exist.
    pub const TIMESTAMPS: &[&str] = &[
        "0001-01-01T00:00:00Z",
        "1969-12-31T23:59:59.999Z",
        "1970-01-01T00:00:00Z",
        "2262-04-11T23:47:16.854775808Z",
        "9999-12-31T23:59:59.999999999Z",
        "10000-01-01T00:00:00Z",
        "-009999-01-01T00:00:00Z",
        "+009999-12-31T23:59:59Z",
        "2026-01-01T00:00:00+23:59",
        "2026-01-01T00:00:00-23:59",
        "2026-01-01T00:00:00+99:99",
        "2026-02-30T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:00:60Z",
        "2026-01-01T00:00:00.00000000000000000001Z",
    ];

    /// Every list above, for a value that may hold any of them.
    pub fn all() -> impl Iterator<Item = &'static str> {
        NUMBERS.iter().chain(DURATIONS).chain(TIMESTAMPS).copied()
    }
}
