//! A pod's GPU request, read once when the pod is converted from its
//! resources and annotations:
//!
//! - `nvidia.com/gpu: k` (or the openb form `alibabacloud.com/gpu-count: k`
//!   with `alibabacloud.com/gpu-milli: 1000`): k whole GPUs;
//! - `gpu-scheduler.io/gpu-milli: m` (or `alibabacloud.com/gpu-milli: m`,
//!   m < 1000) and/or `gpu-scheduler.io/gpu-memory-mib: M`: a share of one
//!   GPU, as HAMi and Alibaba's GPU sharing express it; `nvidia.com/gpu: 1`
//!   beside it is allowed (HAMi's form);
//! - `nvidia.com/mig-<g>g.<m>gb` or `nvidia.com/gpu.shared`: MIG instances
//!   or time-sliced replicas, extended resources whose sizes are known;
//! - `alibabacloud.com/gpu-card-model: A|B`: the GPU models accepted.
//!
//! A share's `nvidia.com/gpu` is taken out of the pod's requests: its GPU
//! is accounted per device, and counting it as a whole GPU would let eight
//! 10 % pods fill an 8-GPU node. A whole-GPU request given only by
//! annotations is put into the requests, so NodeResourcesFit counts it.
//! A bad value is a [`ConvertError`] naming the annotation.

use std::sync::Arc;

use super::{
    ANNOTATION_ALIBABA_GPU_COUNT, ANNOTATION_ALIBABA_GPU_MILLI, ANNOTATION_ALIBABA_GPU_MODEL,
    ANNOTATION_GPU_MEMORY_MIB, ANNOTATION_GPU_MILLI, GPU_RESOURCE, GPU_SHARED_RESOURCE, MIG_RESOURCE_PREFIX,
    MILLI_PER_GPU,
};
use crate::field::{ConvertError, invalid};
use crate::resources::Resources;
use crate::terms::Labels;

/// GPU models a pod accepts, lower case (as node facts name them).
pub type GpuModels = Arc<[Arc<str>]>;

/// What a pod asks of GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct GpuRequest {
    pub kind: GpuKind,
    /// None: any model.
    pub models: Option<GpuModels>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum GpuKind {
    #[default]
    None,
    /// Whole GPUs, each fully free.
    Whole { count: u32 },
    /// A share of one GPU: thousandths of its compute and/or MiB of its
    /// memory (0 when not asked).
    Share { milli: u32, memory_mib: u64 },
    /// MIG instances or time-sliced replicas: counted as extended resources
    /// by NodeResourcesFit; `memory_mib` per slice (0 when unknown).
    Slices { resource: Arc<str>, count: u32, memory_mib: u64 },
}

impl GpuRequest {
    pub fn whole(count: u32) -> Self {
        GpuRequest { kind: GpuKind::Whole { count }, models: None }
    }

    pub fn share(milli: u32, memory_mib: u64) -> Self {
        GpuRequest { kind: GpuKind::Share { milli, memory_mib }, models: None }
    }

    pub fn with_models(mut self, models: &[&str]) -> Self {
        self.models = Some(models.iter().map(|m| Arc::from(m.to_ascii_lowercase())).collect());
        self
    }

    /// Whether the pod needs any GPU (whole, share or slices).
    pub fn wants_gpu(&self) -> bool {
        self.kind != GpuKind::None
    }

    /// Whether the pod takes devices of the node's device model (whole
    /// GPUs or a share), as opposed to no GPU or MIG/time-sliced slices.
    pub fn wants_devices(&self) -> bool {
        matches!(self.kind, GpuKind::Whole { .. } | GpuKind::Share { .. })
    }

    /// GPU in thousandths, as the trace replay counts demand: 1000 per whole GPU.
    pub fn total_milli(&self) -> u64 {
        match self.kind {
            GpuKind::Whole { count } => u64::from(count) * u64::from(MILLI_PER_GPU),
            GpuKind::Share { milli, .. } => u64::from(milli),
            GpuKind::None | GpuKind::Slices { .. } => 0,
        }
    }

    /// Whether a node of `model` (None: unknown) is acceptable.
    #[inline]
    pub fn accepts_model(&self, model: Option<&str>) -> bool {
        accepts(self.models.as_deref(), model)
    }

    /// Reads the request from the pod's effective `requests` and its
    /// annotations, and makes `requests` agree with it (see the module docs).
    pub fn from_pod(requests: &mut Resources, annotations: &Labels) -> Result<GpuRequest, ConvertError> {
        let models = annotations.get(ANNOTATION_ALIBABA_GPU_MODEL).and_then(|v| parse_models(v));
        let nvidia = requests.scalar(GPU_RESOURCE);
        let milli = match annotation(annotations, &[ANNOTATION_GPU_MILLI, ANNOTATION_ALIBABA_GPU_MILLI]) {
            Some((key, v)) => Some((
                key,
                parse_int(key, v, 0, u64::from(MILLI_PER_GPU), "an integer from 0 to 1000 (thousandths of one GPU)")?,
            )),
            None => None,
        };
        let memory = match annotations.get(ANNOTATION_GPU_MEMORY_MIB) {
            Some(v) => parse_int(
                ANNOTATION_GPU_MEMORY_MIB,
                v,
                1,
                super::MAX_GPU_MEMORY_MIB,
                &format!("an integer from 1 to {} (MiB of GPU memory)", super::MAX_GPU_MEMORY_MIB),
            )?,
            None => 0,
        };
        let count = match annotations.get(ANNOTATION_ALIBABA_GPU_COUNT) {
            Some(v) => {
                let c = parse_int(ANNOTATION_ALIBABA_GPU_COUNT, v, 0, u64::from(u32::MAX), "a non-negative integer")?;
                if nvidia > 0 && c != nvidia as u64 {
                    return Err(invalid(
                        annotation_path(ANNOTATION_ALIBABA_GPU_COUNT),
                        format_args!("{v:?}"),
                        &format!("does not match the pod's {GPU_RESOURCE} request ({nvidia})"),
                    ));
                }
                c
            }
            None if nvidia > 0 => nvidia as u64,
            // A share or a 1000 alone: one GPU.
            None => u64::from(milli.is_some() || memory > 0),
        };
        let share_milli = milli.filter(|(_, m)| *m < u64::from(MILLI_PER_GPU) || memory > 0);
        let kind = if share_milli.is_some() || memory > 0 {
            // A share, of one GPU: an explicit count of 0 means no GPU.
            if annotations.get(ANNOTATION_ALIBABA_GPU_COUNT).is_some() && count == 0 {
                GpuKind::None
            } else if count > 1 {
                let (key, value) = match share_milli {
                    Some((key, _)) => (key, annotations.get(key).cloned().unwrap_or_default()),
                    None => (ANNOTATION_GPU_MEMORY_MIB, memory.to_string()),
                };
                return Err(invalid(
                    annotation_path(key),
                    format_args!("{value:?}"),
                    &format!("a GPU share is a share of one GPU, but {count} GPUs are requested"),
                ));
            } else {
                let milli = share_milli.map_or(0, |(_, m)| m as u32);
                if milli == 0 && memory == 0 {
                    GpuKind::None
                } else {
                    requests.set(GPU_RESOURCE, 0);
                    GpuKind::Share { milli, memory_mib: memory }
                }
            }
        } else if milli.is_some_and(|(_, m)| m == 0) {
            GpuKind::None
        } else if count > 0 {
            requests.set(GPU_RESOURCE, count as i64);
            GpuKind::Whole { count: count as u32 }
        } else {
            slices(requests)
        };
        Ok(GpuRequest { kind, models })
    }
}

#[inline]
fn accepts(models: Option<&[Arc<str>]>, model: Option<&str>) -> bool {
    match models {
        None => true,
        Some(list) => model.is_some_and(|m| list.iter().any(|x| &**x == m)),
    }
}

/// The first of `keys` the pod carries, with its value.
fn annotation<'a>(annotations: &'a Labels, keys: &[&'static str]) -> Option<(&'static str, &'a str)> {
    keys.iter().find_map(|k| annotations.get(*k).map(|v| (*k, v.as_str())))
}

fn annotation_path(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

fn parse_int(key: &str, v: &str, min: u64, max: u64, what: &str) -> Result<u64, ConvertError> {
    match v.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(invalid(annotation_path(key), format_args!("{v:?}"), &format!("must be {what}"))),
    }
}

/// `A|B` (or `A,B`), lower-cased; empty names ignored; None when none left.
fn parse_models(v: &str) -> Option<GpuModels> {
    let models: Vec<Arc<str>> = v
        .split(['|', ','])
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| Arc::from(m.to_ascii_lowercase()))
        .collect();
    (!models.is_empty()).then(|| models.into())
}

/// MIG instances or time-sliced replicas among the requests, if any (the
/// largest by memory when a pod asks for several kinds).
fn slices(requests: &Resources) -> GpuKind {
    let mut best = GpuKind::None;
    let mut best_memory = 0;
    for (name, count) in requests.scalars() {
        if *count <= 0 {
            continue;
        }
        let memory_mib = if let Some(profile) = name.strip_prefix(MIG_RESOURCE_PREFIX) {
            mig_memory_mib(profile)
        } else if &**name == GPU_SHARED_RESOURCE {
            0
        } else {
            continue;
        };
        if best == GpuKind::None || memory_mib > best_memory {
            best_memory = memory_mib;
            let count = u32::try_from(*count).unwrap_or(u32::MAX);
            best = GpuKind::Slices { resource: name.clone(), count, memory_mib };
        }
    }
    best
}

/// Memory of a MIG profile such as `1g.10gb` or `3g.40gb+me`, in MiB (0
/// when the name does not say, or says more than any GPU has).
pub fn mig_memory_mib(profile: &str) -> u64 {
    profile
        .split_once('.')
        .and_then(|(_, mem)| mem.split('+').next()?.strip_suffix("gb")?.parse::<u64>().ok())
        .and_then(|gb| gb.checked_mul(1024))
        .filter(|m| *m <= super::MAX_GPU_MEMORY_MIB)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(resources: &[(&str, i64)], annotations: &[(&str, &str)]) -> Result<(GpuRequest, i64), String> {
        let mut r = Resources::default();
        for (n, v) in resources {
            r.set(n, *v);
        }
        let a: Labels = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        GpuRequest::from_pod(&mut r, &a).map(|g| (g, r.scalar(GPU_RESOURCE))).map_err(|e| e.to_string())
    }

    fn slices_of(resource: &str, count: u32, memory_mib: u64) -> GpuRequest {
        GpuRequest { kind: GpuKind::Slices { resource: Arc::from(resource), count, memory_mib }, models: None }
    }

    #[test]
    fn requests_are_read_from_resources_and_annotations() {
        // (case, resources, annotations, request, nvidia.com/gpu left in the requests)
        type Case<'a> = (&'a str, Vec<(&'a str, i64)>, Vec<(&'a str, &'a str)>, GpuRequest, i64);
        let cases: Vec<Case> = vec![
            ("nothing", vec![], vec![], GpuRequest::default(), 0),
            ("whole GPUs", vec![(GPU_RESOURCE, 2)], vec![], GpuRequest::whole(2), 2),
            ("a share in milli", vec![], vec![(ANNOTATION_GPU_MILLI, "250")], GpuRequest::share(250, 0), 0),
            (
                "HAMi's form: one GPU and a share",
                vec![(GPU_RESOURCE, 1)],
                vec![(ANNOTATION_GPU_MILLI, "500"), (ANNOTATION_GPU_MEMORY_MIB, "4096")],
                GpuRequest::share(500, 4096),
                0,
            ),
            ("memory only", vec![], vec![(ANNOTATION_GPU_MEMORY_MIB, "8192")], GpuRequest::share(0, 8192), 0),
            ("1000 milli is a whole GPU", vec![], vec![(ANNOTATION_GPU_MILLI, "1000")], GpuRequest::whole(1), 1),
            (
                "openb share",
                vec![],
                vec![(ANNOTATION_ALIBABA_GPU_MILLI, "460"), (ANNOTATION_ALIBABA_GPU_COUNT, "1")],
                GpuRequest::share(460, 0),
                0,
            ),
            (
                "openb multi-GPU with models",
                vec![],
                vec![
                    (ANNOTATION_ALIBABA_GPU_MILLI, "1000"),
                    (ANNOTATION_ALIBABA_GPU_COUNT, "8"),
                    (ANNOTATION_ALIBABA_GPU_MODEL, "V100M16|V100M32"),
                ],
                GpuRequest::whole(8).with_models(&["v100m16", "v100m32"]),
                8,
            ),
            (
                "ours wins over openb's",
                vec![],
                vec![(ANNOTATION_GPU_MILLI, "300"), (ANNOTATION_ALIBABA_GPU_MILLI, "900")],
                GpuRequest::share(300, 0),
                0,
            ),
            (
                "count 0 is no GPU",
                vec![],
                vec![(ANNOTATION_ALIBABA_GPU_MILLI, "500"), (ANNOTATION_ALIBABA_GPU_COUNT, "0")],
                GpuRequest::default(),
                0,
            ),
            ("milli 0 is no GPU", vec![], vec![(ANNOTATION_ALIBABA_GPU_MILLI, "0")], GpuRequest::default(), 0),
            (
                "models without GPUs",
                vec![],
                vec![(ANNOTATION_ALIBABA_GPU_MODEL, " | T4 ")],
                GpuRequest::default().with_models(&["t4"]),
                0,
            ),
            ("empty model list", vec![], vec![(ANNOTATION_ALIBABA_GPU_MODEL, "|")], GpuRequest::default(), 0),
            ("MIG", vec![("nvidia.com/mig-3g.40gb", 1)], vec![], slices_of("nvidia.com/mig-3g.40gb", 1, 40 * 1024), 0),
            (
                "the largest MIG profile",
                vec![("nvidia.com/mig-1g.10gb+me", 2), ("nvidia.com/mig-2g.20gb", 1)],
                vec![],
                slices_of("nvidia.com/mig-2g.20gb", 1, 20 * 1024),
                0,
            ),
            ("time-sliced", vec![(GPU_SHARED_RESOURCE, 1)], vec![], slices_of(GPU_SHARED_RESOURCE, 1, 0), 0),
            (
                "whole GPUs win over slices",
                vec![(GPU_RESOURCE, 1), (GPU_SHARED_RESOURCE, 1)],
                vec![],
                GpuRequest::whole(1),
                1,
            ),
        ];
        for (name, resources, annotations, want, left) in cases {
            assert_eq!(parse(&resources, &annotations), Ok((want, left)), "{name}");
        }
    }

    #[test]
    fn bad_annotations_are_errors_naming_them() {
        // (case, resources, annotations, error)
        type Case<'a> = (&'a str, Vec<(&'a str, i64)>, Vec<(&'a str, &'a str)>, &'a str);
        let cases: &[Case] = &[
            (
                "milli not a number",
                vec![],
                vec![(ANNOTATION_GPU_MILLI, "half")],
                "metadata.annotations[gpu-scheduler.io/gpu-milli]: Invalid value: \"half\": must be an integer from 0 to 1000 (thousandths of one GPU)",
            ),
            (
                "milli too large",
                vec![],
                vec![(ANNOTATION_ALIBABA_GPU_MILLI, "1500")],
                "metadata.annotations[alibabacloud.com/gpu-milli]: Invalid value: \"1500\"",
            ),
            (
                "memory zero",
                vec![],
                vec![(ANNOTATION_GPU_MEMORY_MIB, "0")],
                "metadata.annotations[gpu-scheduler.io/gpu-memory-mib]: Invalid value: \"0\": must be an integer from 1 to 4294967296 (MiB of GPU memory)",
            ),
            (
                "count not a number",
                vec![],
                vec![(ANNOTATION_ALIBABA_GPU_COUNT, "two")],
                "metadata.annotations[alibabacloud.com/gpu-count]: Invalid value: \"two\": must be a non-negative integer",
            ),
            (
                "count against nvidia.com/gpu",
                vec![(GPU_RESOURCE, 1)],
                vec![(ANNOTATION_ALIBABA_GPU_COUNT, "2")],
                "metadata.annotations[alibabacloud.com/gpu-count]: Invalid value: \"2\": does not match the pod's nvidia.com/gpu request (1)",
            ),
            (
                "a share of two GPUs",
                vec![(GPU_RESOURCE, 2)],
                vec![(ANNOTATION_GPU_MILLI, "500")],
                "metadata.annotations[gpu-scheduler.io/gpu-milli]: Invalid value: \"500\": a GPU share is a share of one GPU, but 2 GPUs are requested",
            ),
            (
                "a memory share of two GPUs",
                vec![(GPU_RESOURCE, 2)],
                vec![(ANNOTATION_GPU_MEMORY_MIB, "1024")],
                "metadata.annotations[gpu-scheduler.io/gpu-memory-mib]: Invalid value: \"1024\": a GPU share",
            ),
        ];
        for (name, resources, annotations, want) in cases {
            let got = parse(resources, annotations).expect_err(name);
            assert!(got.starts_with(want), "{name}: {got}");
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(mig_memory_mib("1g.10gb"), 10 * 1024);
        assert_eq!(mig_memory_mib("1g.5gb+me"), 5 * 1024);
        assert_eq!(mig_memory_mib("weird"), 0);
        let r = GpuRequest::share(250, 0).with_models(&["T4"]);
        assert!(r.accepts_model(Some("t4")) && !r.accepts_model(Some("a100")) && !r.accepts_model(None));
        assert!(GpuRequest::whole(1).accepts_model(None));
        assert_eq!((GpuRequest::whole(2).total_milli(), GpuRequest::share(250, 0).total_milli()), (2000, 250));
        assert!(
            slices_of(GPU_SHARED_RESOURCE, 1, 0).wants_gpu() && !slices_of(GPU_SHARED_RESOURCE, 1, 0).wants_devices()
        );
    }
}

/// The GPUs a pod's DRA claims ask for, as a request (whole GPUs): what
/// DynamicResources writes in the cycle state for the GPU policies when
/// the pod asks for none the classic way. Read with the engine's
/// `CycleState::pod_gpu`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedGpus(pub GpuRequest);
