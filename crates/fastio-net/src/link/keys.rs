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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{MESSAGE_BYTES, SMALLEST_TCP_BATCH};
    use fastio_pipeline::MAX_NAME_LEN;

    #[test]
    fn the_longest_key_and_a_full_message_fit_in_the_smallest_tcp_batch() {
        // A pipeline, operator, output and host of the longest names.
        let name = "n".repeat(MAX_NAME_LEN);
        let id = "r".repeat(63);
        assert!(valid_run_id(&id));
        assert!(!valid_run_id(&"r".repeat(64)));
        let host = "h".repeat(63);
        let prefix = run_prefix(&name, &id);
        let keys = [
            format!("{prefix}/stream/{name}/{name}/{host}"),
            format!("{prefix}/credit/{name}/{name}/{host}"),
            format!("{prefix}/entry/{host}/{host}"),
            format!("{prefix}/status/{host}"),
        ];
        let longest = keys.iter().map(String::len).max().unwrap_or(0);
        assert_eq!(longest, 909);
        // Zenoh's framing of a put with an attachment: a few dozen bytes
        // (header, lengths, the attachment's extension); 64 allowed.
        assert!(
            MESSAGE_BYTES + longest + 64 <= SMALLEST_TCP_BATCH,
            "{MESSAGE_BYTES} + {longest} + 64 > {SMALLEST_TCP_BATCH}"
        );
    }
}
