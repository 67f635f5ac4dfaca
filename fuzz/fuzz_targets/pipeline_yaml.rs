//! Arbitrary text as a pipeline definition (and as `--param` values):
//! parsing and validation must return a definition or diagnostics, never
//! panic, and stay within the parser's budgets (bounded time and memory).

#![no_main]
#![forbid(unsafe_code)]

use fastio_pipeline::Definition;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line, if it looks like `k=v`, is also given as a parameter.
    let params: Vec<(String, String)> = text
        .lines()
        .next()
        .and_then(|l| l.split_once('='))
        .map(|(k, v)| vec![(k.to_owned(), v.to_owned())])
        .unwrap_or_default();
    match Definition::parse("fuzz.yaml", text, &params) {
        Ok(def) => {
            // Every entry of a valid definition has a producer in range.
            for e in &def.pipeline.plan.entries {
                assert!(e.producer < def.pipeline.operators.len());
            }
        }
        Err(diags) => assert!(!diags.is_empty()),
    }
});
