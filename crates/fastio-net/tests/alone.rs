//! A host alone in its run (`fastio run --host main` on a definition
//! whose placement has one host): it has no one to wait for, so it joins
//! at once and ends at once.

#![cfg(feature = "zenoh")]

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use fastio::{Context, ContextOptions};
use fastio_net::{NetOptions, ZenohLink};
use fastio_pipeline::{Definition, Ended, HostLink};

#[test]
fn a_host_alone_in_its_run_joins_and_ends_at_once() {
    let yaml = "api-version: 0.5.0
name: alone
operators:
- name: ping
  container: {command: [none]}
  output:
  - {name: v, type: array, element-type: uint8, shape: [16]}
- name: pong
  container: {command: [none]}
  input:
  - {from: ping, name: v, type: array, element-type: uint8, shape: [16]}
";
    let def = Definition::parse("alone.yaml", yaml, &[]).expect("definition");
    let pipeline = &def.pipeline;
    assert_eq!(pipeline.placement.hosts, vec!["main".to_owned()]);
    let ctx =
        Context::new(&ContextOptions::new().capacity(1 << 20).anonymous(true)).expect("context");
    // Any free port: no other host connects.
    let mut opts = NetOptions::new("main");
    opts.listen = vec!["tcp/127.0.0.1:0".to_owned()];
    opts.join_timeout = Duration::from_secs(30);
    let mut link = ZenohLink::new(pipeline, opts).expect("link");
    let t = Instant::now();
    link.start(&ctx).expect("a host alone joins");
    let joined = t.elapsed();
    assert!(
        joined < Duration::from_secs(5),
        "joining took {joined:?}: a host alone waited for someone"
    );
    for op in 0..2 {
        link.operator_started(op);
        link.operator_finished(&ctx, op, Ended::Succeeded);
    }
    let t = Instant::now();
    let failure = link.finish(None, &AtomicBool::new(false));
    assert!(failure.is_none(), "{failure:?}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "ending took {:?}",
        t.elapsed()
    );
}
