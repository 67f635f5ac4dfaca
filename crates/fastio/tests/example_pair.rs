//! Runs the `producer` / `consumer` example pair as real processes and
//! checks the mean the consumer computed over shared memory.

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p fastio` builds the examples",
        path.display()
    );
    path
}

#[test]
fn consumer_computes_the_mean_of_the_producers_volume() {
    let _ = example("consumer");
    let out = Command::new(example("producer")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let number = |prefix: &str| -> f64 {
        let line = stdout.lines().find(|l| l.starts_with(prefix)).unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let expected = number("producer:");
    let mean = number("consumer:");
    assert!(
        (mean - expected).abs() < 1e-4,
        "mean {mean}, expected {expected}"
    );
    assert!(stdout.contains("float32 [3, 224, 255, 127]"), "{stdout}");
}
