//! Driver overhead per operator — spawn, attach to the context, read the
//! plan, build the entries, map the input, exit, reap — as a ratio to a
//! bare spawn and reap of the same binary, in the same run.

#![allow(missing_docs)]
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use fastio_pipeline::{Definition, LocalDriver, RunOptions};

const TESTOP: &str = env!("CARGO_BIN_EXE_fio-testop");
/// Operators per driver run (a chain, so they run one at a time).
const CHAIN: usize = 16;

fn chain() -> String {
    let mut y = String::from("api-version: 0.5.0\nname: overhead\noperators:\n");
    for i in 0..CHAIN {
        let input = if i == 0 {
            String::new()
        } else {
            format!(
                "  input: [{{from: op{}, name: v, type: array, element-type: u8, shape: [4096]}}]\n",
                i - 1
            )
        };
        y.push_str(&format!(
            "- name: op{i}\n  container: {{image: local, command: [{TESTOP}, attach]}}\n{input}  output: [{{name: v, type: array, element-type: u8, shape: [4096]}}]\n"
        ));
    }
    y
}

fn benches(c: &mut Criterion) {
    let def = Definition::parse("chain.yaml", &chain(), &[]).unwrap();
    let mut g = c.benchmark_group("driver/per_operator");
    g.bench_function("baseline_bare_spawn", |b| {
        b.iter(|| {
            let st = Command::new(TESTOP)
                .arg("noop")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .status()
                .unwrap();
            black_box(st.success())
        })
    });
    g.bench_function("driver_spawn_attach_entries_exit", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let driver = LocalDriver::new(def.pipeline.clone(), RunOptions::default());
                let t0 = Instant::now();
                let report = driver.run(|_| {}).unwrap();
                total += t0.elapsed();
                assert!(report.succeeded());
            }
            total / CHAIN as u32
        })
    });
    g.finish();
}

criterion_group! {
    name = group;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_millis(500));
    targets = benches
}
criterion_main!(group);
