//! Reading newline-delimited frames with a size bound.
//!
//! Tokio's `read_until` grows its buffer without limit; a broken or hostile peer must not be
//! able to make us allocate more than one frame's worth.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

pub struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(inner: R, max: usize) -> Self {
        LineReader { inner: BufReader::new(inner), max }
    }

    /// Reads the next line into `buf` (newline included). `Ok(false)` at a clean end of stream.
    pub async fn next_line(&mut self, buf: &mut Vec<u8>) -> io::Result<bool> {
        buf.clear();
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                return if buf.is_empty() {
                    Ok(false)
                } else {
                    Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended inside a frame"))
                };
            }
            let (take, done) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (available.len(), false),
            };
            // The newline itself does not count against the frame size.
            if buf.len() + take > self.max + 1 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a frame is longer than {} bytes", self.max),
                ));
            }
            buf.extend_from_slice(&available[..take]);
            self.inner.consume(take);
            if done {
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_lines_and_reports_clean_end() {
        let mut reader = LineReader::new(&b"one\ntwo\n"[..], 16);
        let mut buf = Vec::new();
        assert!(reader.next_line(&mut buf).await.unwrap());
        assert_eq!(buf, b"one\n");
        assert!(reader.next_line(&mut buf).await.unwrap());
        assert_eq!(buf, b"two\n");
        assert!(!reader.next_line(&mut buf).await.unwrap());
    }

    #[tokio::test]
    async fn refuses_a_line_over_the_bound() {
        let mut reader = LineReader::new(&b"0123456789\n"[..], 4);
        let mut buf = Vec::new();
        let err = reader.next_line(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn a_truncated_last_frame_is_an_error() {
        let mut reader = LineReader::new(&b"{\"half\""[..], 64);
        let mut buf = Vec::new();
        assert_eq!(reader.next_line(&mut buf).await.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
