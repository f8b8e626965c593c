//! What the end-to-end harnesses share: the control plane they run on
//! (`cluster`), its API clients (`client`) and the schedulers under test as
//! processes (`process`). Two harnesses use them: `e2e-bench`
//! (`src/bench/`, throughput on scheduler_perf's cases and a mixed GPU
//! cluster) and `live-replay` (`src/live/`, Alibaba's openb trace on KWOK
//! nodes, with pods that arrive, run and finish).

pub mod client;
pub mod cluster;
pub mod live;
pub mod process;
