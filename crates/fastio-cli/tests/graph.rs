//! `fastio pipeline plan --format dot|json` as a user uses it: the volume
//! demo's graph rendered by Graphviz's `dot` (Debian's `graphviz`, which
//! `.ci/run` installs), the JSON read back, and a run's report drawn onto
//! the edges.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fastio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fastio"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn volume_demo() -> PathBuf {
    root().join("examples/pipelines/volume/pipeline.yaml")
}

/// Renders `dot_text` to SVG with Graphviz; None where `dot` is missing
/// (CI must have it).
fn render(dot_text: &str) -> Option<String> {
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Graphviz `dot` is required in CI (bash .ci/run installs it)"
        );
        return None;
    };
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), dot_text.as_bytes()).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "dot refused the graph:\n{dot_text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

fn plan(args: &[&str]) -> String {
    let out = fastio()
        .args(["pipeline", "plan"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_volume_demo_as_dot_renders_with_every_operator_and_entry() {
    let demo = volume_demo();
    let dot = plan(&[demo.to_str().unwrap(), "--format", "dot"]);
    assert!(
        dot.starts_with("digraph \"volume-demo\"") || dot.starts_with("digraph "),
        "{dot}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&plan(&[demo.to_str().unwrap(), "--format", "json"])).unwrap();
    let ops: Vec<&str> = json["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(ops.len(), 5, "{json:#}");
    let entries = json["entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    // Every entry's producer and consumers are operators, and the static
    // ones have their bytes.
    for e in entries {
        assert!(ops.contains(&e["producer"].as_str().unwrap()), "{e}");
        for c in e["consumers"].as_array().unwrap() {
            assert!(ops.contains(&c.as_str().unwrap()), "{e}");
        }
        assert_eq!(e["static"].as_bool().unwrap(), e["bytes"].is_u64(), "{e}");
    }
    let Some(svg) = render(&dot) else {
        return;
    };
    assert!(svg.contains("<svg"), "{svg}");
    for op in &ops {
        assert!(
            svg.contains(&format!(">{op}</text>")),
            "{op} missing in the SVG"
        );
    }
    for e in entries {
        let name = e["name"].as_str().unwrap();
        assert!(svg.contains(name), "{name} missing in the SVG");
    }
}

#[test]
fn a_run_report_draws_measured_bytes_and_times_onto_the_edges() {
    let dir = std::env::temp_dir().join(format!("fastio-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("p.yaml");
    std::fs::write(
        &yaml,
        "api-version: 0.5.0\nname: two\noperators:\n\
         - name: a\n  container: {image: sh, command: [sh, -c, 'true']}\n  output:\n  \
         - {name: v, type: array, element-type: float32, shape: [256, 256]}\n\
         - name: b\n  container: {image: sh, command: [sh, -c, 'true']}\n  input:\n  \
         - {from: a, name: v, type: array, element-type: float32, shape: [256, 256]}\n",
    )
    .unwrap();
    let run = fastio()
        .args(["run", yaml.to_str().unwrap(), "--report", "json"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let edge = &report["edges"][0];
    assert_eq!(edge["entry"], "a/v");
    assert_eq!(edge["bytes"], 256 * 256 * 4);
    let at = edge["published_after_seconds"].as_f64().unwrap();
    assert!(
        at > 0.0 && at < report["wall_seconds"].as_f64().unwrap() + 1e-9,
        "{report:#}"
    );
    let path = dir.join("run.json");
    std::fs::write(&path, &run.stdout).unwrap();
    let dot = plan(&[
        yaml.to_str().unwrap(),
        "--format",
        "dot",
        "--run",
        path.to_str().unwrap(),
    ]);
    assert!(dot.contains("run: 256.0 KiB, at "), "{dot}");
    if let Some(svg) = render(&dot) {
        assert!(svg.contains("run: 256.0 KiB"), "{svg}");
    }
    let bad = fastio()
        .args([
            "pipeline",
            "plan",
            yaml.to_str().unwrap(),
            "--format",
            "png",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--format \"png\""));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_placed_pipeline_draws_its_hosts_and_what_crosses() {
    let two = root().join("examples/pipelines/volume/two-hosts.yaml");
    let dot = plan(&[two.to_str().unwrap(), "--format", "dot"]);
    assert!(dot.contains("subgraph \"cluster_host_gpu\""), "{dot}");
    assert!(dot.contains("subgraph \"cluster_host_scanner\""), "{dot}");
    // Only crop -> infer crosses, and it is drawn so.
    assert_eq!(dot.matches("penwidth=2.5").count(), 1, "{dot}");
    assert!(dot.contains("crosses: scanner -> gpu"), "{dot}");
    if let Some(svg) = render(&dot) {
        assert!(svg.contains("host gpu") && svg.contains("host scanner"));
    }
    let json: serde_json::Value =
        serde_json::from_str(&plan(&[two.to_str().unwrap(), "--format", "json"])).unwrap();
    assert_eq!(json["hosts"], serde_json::json!(["gpu", "scanner"]));
    let host_of = |name: &str| {
        json["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .map(|o| o["host"].as_str().unwrap().to_owned())
    };
    assert_eq!(host_of("crop").as_deref(), Some("scanner"));
    assert_eq!(host_of("infer").as_deref(), Some("gpu"));
    let crossing: Vec<&serde_json::Value> = json["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["crosses_to"].is_null())
        .collect();
    assert_eq!(crossing.len(), 1);
    assert_eq!(crossing[0]["name"], "crop/cropped");
    assert_eq!(crossing[0]["crosses_to"], serde_json::json!(["gpu"]));
    let text = plan(&[two.to_str().unwrap()]);
    assert!(
        text.contains("crop/cropped  scanner -> gpu  dynamic"),
        "{text}"
    );
}
