//! Byte sources the parser reads from, with one rule: no allocation is
//! sized from a file field before that size is checked against the bytes
//! that remain — or, where that is unknown (a pipe), the buffer grows only
//! as bytes actually arrive.

use std::io::{self, Read, Seek};

use crate::error::Error;

/// First chunk when reading a field of unknown-length input.
const FIRST_CHUNK: u64 = 64 * 1024;
/// Largest chunk when reading a field of unknown-length input.
const MAX_CHUNK: u64 = 64 * 1024 * 1024;

/// What a parser reads from.
pub(crate) trait Input {
    /// What a data section turns into (a range, an owned buffer, nothing).
    type Data;
    /// Bytes consumed so far.
    fn offset(&self) -> u64;
    /// Bytes left, when the total length is known.
    fn remaining(&self) -> Option<u64>;
    /// Reads `buf.len()` bytes; returns how many there were (fewer at the end).
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Error>;
    /// Reads `len` bytes into a new buffer, or returns how many were left.
    fn bytes(&mut self, len: u64) -> Result<Result<Vec<u8>, u64>, Error>;
    /// Consumes a data section of `len` bytes, or returns how many were left.
    fn data(&mut self, len: u64) -> Result<Result<Self::Data, u64>, Error>;
    /// Bytes after the current position (for streams: 0 or 1, "at least
    /// one"). The last call made on an input.
    fn trailing(&mut self) -> Result<u64, Error>;
}

/// An in-memory buffer; data sections are byte ranges of it.
pub(crate) struct SliceInput<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> SliceInput<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> SliceInput<'a> {
        SliceInput { buf, pos: 0 }
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], u64> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match usize::try_from(len) {
            Ok(n) if n <= rest.len() => {
                self.pos += n;
                Ok(&rest[..n])
            }
            _ => Err(rest.len() as u64),
        }
    }
}

impl Input for SliceInput<'_> {
    /// Start offset of the data in the buffer.
    type Data = usize;

    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> Option<u64> {
        Some(self.buf.len().saturating_sub(self.pos) as u64)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let n = buf.len().min(rest.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }

    fn bytes(&mut self, len: u64) -> Result<Result<Vec<u8>, u64>, Error> {
        Ok(self.take(len).map(<[u8]>::to_vec))
    }

    fn data(&mut self, len: u64) -> Result<Result<usize, u64>, Error> {
        let start = self.pos;
        Ok(self.take(len).map(|_| start))
    }

    fn trailing(&mut self) -> Result<u64, Error> {
        Ok(self.remaining().unwrap_or(0))
    }
}

/// Reads up to `len` bytes. With `known`, `len` has been checked against
/// the remaining length and is allocated at once; otherwise the buffer
/// grows in chunks as bytes arrive, so a lying size field on a short
/// stream costs at most about twice the bytes really read.
fn read_bounded<R: Read>(r: &mut R, len: u64, known: bool) -> io::Result<Vec<u8>> {
    if known {
        let mut v = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        Read::take(&mut *r, len).read_to_end(&mut v)?;
        return Ok(v);
    }
    let mut v = Vec::new();
    let mut chunk = FIRST_CHUNK;
    loop {
        let want = (len - v.len() as u64).min(chunk);
        if want == 0 {
            return Ok(v);
        }
        v.reserve_exact(usize::try_from(want).unwrap_or(usize::MAX));
        let got = Read::take(&mut *r, want).read_to_end(&mut v)? as u64;
        if got < want {
            return Ok(v);
        }
        chunk = (chunk * 2).min(MAX_CHUNK);
    }
}

/// Any `Read`, with or without a known total length; data sections become
/// owned buffers.
pub(crate) struct ReaderInput<R> {
    r: R,
    pos: u64,
    len: Option<u64>,
}

impl<R: Read> ReaderInput<R> {
    /// `len`: the total length when known (a file's size).
    pub(crate) fn new(r: R, len: Option<u64>) -> ReaderInput<R> {
        ReaderInput { r, pos: 0, len }
    }

    fn read_len(&mut self, len: u64) -> Result<Result<Vec<u8>, u64>, Error> {
        if let Some(rem) = self.remaining()
            && len > rem
        {
            return Ok(Err(rem));
        }
        let v = read_bounded(&mut self.r, len, self.len.is_some()).map_err(|source| Error::Io {
            offset: self.pos,
            source,
        })?;
        self.pos += v.len() as u64;
        if (v.len() as u64) < len {
            Ok(Err(v.len() as u64))
        } else {
            Ok(Ok(v))
        }
    }
}

impl<R: Read> Input for ReaderInput<R> {
    type Data = Vec<u8>;

    fn offset(&self) -> u64 {
        self.pos
    }

    fn remaining(&self) -> Option<u64> {
        self.len.map(|l| l.saturating_sub(self.pos))
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let mut n = 0;
        while n < buf.len() {
            match self.r.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        offset: self.pos + n as u64,
                        source,
                    });
                }
            }
        }
        self.pos += n as u64;
        Ok(n)
    }

    fn bytes(&mut self, len: u64) -> Result<Result<Vec<u8>, u64>, Error> {
        self.read_len(len)
    }

    fn data(&mut self, len: u64) -> Result<Result<Vec<u8>, u64>, Error> {
        self.read_len(len)
    }

    fn trailing(&mut self) -> Result<u64, Error> {
        if let Some(rem) = self.remaining() {
            return Ok(rem);
        }
        // A stream cannot be peeked: this consumes the byte, which is fine
        // because it is the last question asked of the input.
        let mut one = [0u8; 1];
        Ok(self.fill(&mut one)? as u64)
    }
}

/// A seekable file of known length: data sections are skipped, not read
/// (for the index).
pub(crate) struct SeekInput<R> {
    inner: ReaderInput<R>,
}

impl<R: Read + Seek> SeekInput<R> {
    pub(crate) fn new(r: R, len: u64) -> SeekInput<R> {
        SeekInput {
            inner: ReaderInput::new(r, Some(len)),
        }
    }
}

impl<R: Read + Seek> Input for SeekInput<R> {
    type Data = ();

    fn offset(&self) -> u64 {
        self.inner.offset()
    }

    fn remaining(&self) -> Option<u64> {
        self.inner.remaining()
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        self.inner.fill(buf)
    }

    fn bytes(&mut self, len: u64) -> Result<Result<Vec<u8>, u64>, Error> {
        self.inner.bytes(len)
    }

    fn data(&mut self, len: u64) -> Result<Result<(), u64>, Error> {
        let rem = self.remaining().unwrap_or(0);
        if len > rem {
            return Ok(Err(rem));
        }
        let step = i64::try_from(len).map_err(|_| Error::Io {
            offset: self.inner.pos,
            source: io::Error::new(io::ErrorKind::InvalidInput, "seek too far"),
        })?;
        self.inner
            .r
            .seek(io::SeekFrom::Current(step))
            .map_err(|source| Error::Io {
                offset: self.inner.pos,
                source,
            })?;
        self.inner.pos += len;
        Ok(Ok(()))
    }

    fn trailing(&mut self) -> Result<u64, Error> {
        self.inner.trailing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream that yields `n` bytes, a few at a time.
    struct Dribble {
        left: usize,
        step: usize,
    }

    impl Read for Dribble {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.left).min(self.step);
            buf[..n].fill(0xab);
            self.left -= n;
            Ok(n)
        }
    }

    #[test]
    fn huge_length_on_a_short_stream_allocates_only_what_arrives() {
        let mut r = Dribble {
            left: 1000,
            step: 7,
        };
        let v = read_bounded(&mut r, u64::MAX / 2, false).unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.capacity() <= FIRST_CHUNK as usize, "{}", v.capacity());
    }

    #[test]
    fn bounded_read_of_exact_length_across_chunks() {
        let n = (FIRST_CHUNK * 3 + 5) as usize;
        let mut r = Dribble {
            left: n + 10,
            step: 4093,
        };
        let v = read_bounded(&mut r, n as u64, false).unwrap();
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&b| b == 0xab));
        assert_eq!(r.left, 10);
    }

    #[test]
    fn reader_input_reports_short_reads_and_trailing() {
        let mut inp = ReaderInput::new(&[1u8, 2, 3][..], None);
        let mut b = [0u8; 2];
        assert_eq!(inp.fill(&mut b).unwrap(), 2);
        assert_eq!(inp.offset(), 2);
        assert_eq!(inp.data(5).unwrap(), Err(1));
        assert_eq!(inp.trailing().unwrap(), 0);
        let mut inp = ReaderInput::new(&[1u8, 2, 3][..], None);
        assert_eq!(inp.fill(&mut b).unwrap(), 2);
        assert_eq!(inp.trailing().unwrap(), 1);
    }

    #[test]
    fn known_length_rejects_before_reading() {
        let mut inp = ReaderInput::new(&[0u8; 4][..], Some(4));
        assert_eq!(inp.bytes(5).unwrap(), Err(4));
        assert_eq!(inp.offset(), 0);
        assert_eq!(inp.bytes(4).unwrap(), Ok(vec![0; 4]));
    }

    #[test]
    fn slice_input_ranges() {
        let buf = [0u8, 1, 2, 3, 4];
        let mut inp = SliceInput::new(&buf);
        assert_eq!(inp.data(2).unwrap(), Ok(0));
        assert_eq!(inp.data(2).unwrap(), Ok(2));
        assert_eq!(inp.data(u64::MAX).unwrap(), Err(1));
        assert_eq!(inp.trailing().unwrap(), 1);
    }

    #[test]
    fn seek_input_skips_data() {
        let mut inp = SeekInput::new(io::Cursor::new(vec![0u8; 10]), 10);
        assert_eq!(inp.data(8).unwrap(), Ok(()));
        assert_eq!(inp.offset(), 8);
        assert_eq!(inp.data(3).unwrap(), Err(2));
        assert_eq!(inp.trailing().unwrap(), 2);
    }
}
