//! The keys of a run: its prefix and what a run id may be.

/// The key prefix of a run: `fastio/<pipeline>/<run id>`, the pipeline's
/// name folded to lower case with every character other than `a-z 0-9 _ -`
/// as `_`.
pub fn run_prefix(pipeline: &str, run_id: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("fastio/{}/{}", clean(pipeline), clean(run_id))
}

/// Whether `s` can be a run id: 1 to 63 characters of `a-z 0-9 _ -`.
pub fn valid_run_id(s: &str) -> bool {
    fastio_pipeline::placement::valid_host_name(s)
}
