//! The errors of recording and reading.

use std::path::PathBuf;

/// What went wrong, with the file and the place in it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening, reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The MCAP library refused a record or a write.
    #[error("{path}: MCAP: {source}")]
    Mcap {
        /// The file.
        path: PathBuf,
        /// The library's error.
        source: mcap::McapError,
    },
    /// A record or message that is not what our layout says (a size that
    /// does not add up, a header that is not ours, an unknown channel).
    #[error("{path}: {what}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        what: String,
    },
    /// One of MCAP's own CRCs (of the data section, or of the summary)
    /// does not match the bytes read: the file changed after it was
    /// written.
    #[error("{path}: {}", crc_text(section, *stored, *computed))]
    Crc {
        /// The file.
        path: PathBuf,
        /// `data section` or `summary`.
        section: &'static str,
        /// The CRC the file holds.
        stored: u32,
        /// The CRC of the bytes read.
        computed: u32,
    },
    /// The file ends inside a record: a recorder stopped before closing
    /// it. Every message before is readable.
    #[error(
        "{path}: cut off after {messages} complete messages (byte {offset}): {reason}; \
         the recorder stopped before closing the file"
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Complete messages before the cut.
        messages: u64,
        /// Bytes read up to the last complete record.
        offset: u64,
        /// What the reader met.
        reason: String,
    },
    /// No channel of that name (the names there are listed).
    #[error("{path}: no channel {name:?} (channels: {known})")]
    NoChannel {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The channels the file has.
        known: String,
    },
}

/// What [`Error::Crc`] says after the file's name.
pub(crate) fn crc_text(section: &str, stored: u32, computed: u32) -> String {
    format!(
        "the MCAP {section}'s CRC does not match (stored {stored:08x}, computed {computed:08x}): \
         its bytes changed after it was written"
    )
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
