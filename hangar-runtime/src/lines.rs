//! Newline-delimited I/O: reading with a bound on line length, writing in batches.
//!
//! A peer can send anything; a line longer than the bound is skipped as it streams by, never
//! buffered whole, so a 10 MB line costs no more memory than a short one. Only its first
//! [`LONG_LINE_HEAD`] bytes are kept, for a caller that must tell what it was (the id of an
//! over-long JSON-RPC answer). Writers drain every
//! queued line before one flush, so a burst of messages goes out in few writes.

use std::io::IoSlice;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

/// The most a line buffer keeps between lines.
const RETAINED_CAPACITY: usize = 64 * 1024;

/// How much of an over-long line [`read_line`] keeps.
pub const LONG_LINE_HEAD: usize = 1024;

/// One line read by [`read_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line is in the buffer, without its newline.
    Complete,
    /// The line was longer than the bound and was skipped; its length in bytes. The buffer
    /// holds its first bytes (at most [`LONG_LINE_HEAD`], or the bound if that is smaller).
    TooLong(usize),
    /// End of input (a last line without a newline is returned as `Complete` first).
    Eof,
}

/// Reads one line into `buf` (cleared first), skipping it if it exceeds `max` bytes (then `buf`
/// keeps only the line's head).
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    // A buffer that grew for one long line is given back rather than kept per connection.
    if buf.capacity() > RETAINED_CAPACITY {
        *buf = Vec::new();
    }
    buf.clear();
    let mut skipped: Option<usize> = None;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match skipped {
                Some(len) => Line::TooLong(len),
                None if buf.is_empty() => Line::Eof,
                None => Line::Complete,
            });
        }
        let (chunk, found_newline) = match memchr(available) {
            Some(at) => (&available[..at], true),
            None => (available, false),
        };
        let used = chunk.len() + usize::from(found_newline);
        match &mut skipped {
            Some(len) => *len += chunk.len(),
            None if buf.len() + chunk.len() > max => {
                skipped = Some(buf.len() + chunk.len());
                let head = LONG_LINE_HEAD.min(max);
                let from_chunk = head.saturating_sub(buf.len()).min(chunk.len());
                buf.truncate(head);
                buf.extend_from_slice(&chunk[..from_chunk]);
            }
            None => buf.extend_from_slice(chunk),
        }
        reader.consume(used);
        if found_newline {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(match skipped {
                Some(len) => Line::TooLong(len),
                None => Line::Complete,
            });
        }
    }
}

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

/// A queue of encoded lines to write.
pub trait LineQueue {
    /// The next line, waiting for one; `None` once the queue is closed and empty.
    fn next(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send;
    /// A line already queued, without waiting.
    fn ready(&mut self) -> Option<Vec<u8>>;
}

impl LineQueue for mpsc::Receiver<Vec<u8>> {
    fn next(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send {
        self.recv()
    }
    fn ready(&mut self) -> Option<Vec<u8>> {
        self.try_recv().ok()
    }
}

impl LineQueue for mpsc::UnboundedReceiver<Vec<u8>> {
    fn next(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send {
        self.recv()
    }
    fn ready(&mut self) -> Option<Vec<u8>> {
        self.try_recv().ok()
    }
}

/// Writes every line from `queue` until it closes (then shuts the writer down) or a write fails.
/// Flushes only when the queue is momentarily empty. For the few busy connections (the control
/// socket): an 8 KiB buffer each.
pub async fn write_batched<W: AsyncWrite + Unpin, Q: LineQueue>(writer: W, mut queue: Q) -> std::io::Result<()> {
    let mut writer = BufWriter::new(writer);
    while let Some(line) = queue.next().await {
        writer.write_all(&line).await?;
        while let Some(line) = queue.ready() {
            writer.write_all(&line).await?;
        }
        writer.flush().await?;
    }
    writer.shutdown().await
}

/// [`write_batched`] without a buffer, for a writer per upstream (its stdin): the lines queued
/// at once (up to [`MAX_BATCH`]) go out in one vectored write from their own buffers, and a
/// writer at rest holds no memory (an 8 KiB `BufWriter` per running upstream was 8 MiB with a
/// thousand).
pub async fn write_unbuffered<W: AsyncWrite + Unpin, Q: LineQueue>(mut writer: W, mut queue: Q) -> std::io::Result<()> {
    let mut batch: Vec<Vec<u8>> = Vec::new();
    while let Some(line) = queue.next().await {
        batch.push(line);
        while batch.len() < MAX_BATCH
            && let Some(line) = queue.ready()
        {
            batch.push(line);
        }
        write_all_vectored(&mut writer, &batch).await?;
        batch.clear();
        writer.flush().await?;
    }
    writer.shutdown().await
}

/// The most lines [`write_unbuffered`] writes at once (well under any system's `IOV_MAX`).
const MAX_BATCH: usize = 64;

/// Writes all of `lines`, in as few vectored writes as the writer takes.
async fn write_all_vectored<W: AsyncWrite + Unpin>(writer: &mut W, lines: &[Vec<u8>]) -> std::io::Result<()> {
    if let [line] = lines {
        return writer.write_all(line).await;
    }
    let mut slices: Vec<IoSlice<'_>> = lines.iter().map(|line| IoSlice::new(line)).collect();
    let mut left = &mut slices[..];
    while !left.is_empty() {
        let written = writer.write_vectored(left).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut left, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn lines(input: &[u8], max: usize, capacity: usize) -> Vec<(Line, Vec<u8>)> {
        let mut reader = BufReader::with_capacity(capacity, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let line = read_line(&mut reader, &mut buf, max).await.unwrap();
            if line == Line::Eof {
                return out;
            }
            out.push((line, buf.clone()));
        }
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_a_last_one_without_newline() {
        let got = lines(b"a\r\nbc\n\nlast", 10, 2).await;
        let texts: Vec<_> = got.iter().map(|(l, b)| (l, String::from_utf8_lossy(b).into_owned())).collect();
        assert_eq!(
            texts,
            [
                (&Line::Complete, "a".into()),
                (&Line::Complete, "bc".into()),
                (&Line::Complete, String::new()),
                (&Line::Complete, "last".into())
            ]
        );
    }

    #[tokio::test]
    async fn writes_every_queued_line_then_shuts_down() {
        let (tx, rx) = mpsc::unbounded_channel();
        for line in ["a\n", "bb\n", "ccc\n"] {
            tx.send(line.as_bytes().to_vec()).unwrap();
        }
        drop(tx);
        let mut out = Vec::new();
        write_batched(&mut out, rx).await.unwrap();
        assert_eq!(out, b"a\nbb\nccc\n");
    }

    /// Records each write it is given, taking at most `most` bytes of each.
    struct Writes {
        writes: Vec<Vec<u8>>,
        most: usize,
    }

    impl AsyncWrite for Writes {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(buf)])
        }
        fn poll_write_vectored(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let mut taken: Vec<u8> = bufs.iter().flat_map(|buf| buf.iter().copied()).collect();
            taken.truncate(self.most);
            let len = taken.len();
            self.writes.push(taken);
            std::task::Poll::Ready(Ok(len))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_writer_that_takes_a_little_at_a_time_still_gets_every_byte_in_order() {
        let (tx, rx) = mpsc::unbounded_channel();
        for line in ["a\n", "bb\n", "ccc\n", "dddd\n"] {
            tx.send(line.as_bytes().to_vec()).unwrap();
        }
        drop(tx);
        let mut writes = Writes { writes: Vec::new(), most: 3 };
        write_unbuffered(&mut writes, rx).await.unwrap();
        assert_eq!(writes.writes.concat(), b"a\nbb\nccc\ndddd\n");
        assert!(writes.writes.iter().all(|w| w.len() <= 3 && !w.is_empty()), "{:?}", writes.writes);
    }

    #[tokio::test]
    async fn lines_queued_together_go_out_in_one_write_and_a_later_one_in_its_own() {
        let (tx, rx) = mpsc::unbounded_channel();
        for line in ["a\n", "bb\n", "ccc\n"] {
            tx.send(line.as_bytes().to_vec()).unwrap();
        }
        let mut writes = Writes { writes: Vec::new(), most: usize::MAX };
        let writer = write_unbuffered(&mut writes, rx);
        let later = async {
            tokio::task::yield_now().await;
            tx.send(b"d\n".to_vec()).unwrap();
            drop(tx);
        };
        let (written, ()) = tokio::join!(writer, later);
        written.unwrap();
        assert_eq!(writes.writes, [b"a\nbb\nccc\n".to_vec(), b"d\n".to_vec()]);
    }

    #[tokio::test]
    async fn skips_an_over_long_line_and_goes_on() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        let got = lines(&input, 10, 7).await;
        assert_eq!(got[0], (Line::TooLong(100), vec![b'x'; 10]), "only the head is kept");
        assert_eq!(got[1], (Line::Complete, b"ok".to_vec()));
        let unterminated = lines(&[b'y'; 50], 10, 8).await;
        assert_eq!(unterminated, [(Line::TooLong(50), vec![b'y'; 10])]);
    }

    #[tokio::test]
    async fn keeps_the_head_of_a_long_line_whatever_the_chunking() {
        let mut input: Vec<u8> = (0..5000u32).map(|i| b'a' + (i % 26) as u8).collect();
        input.extend_from_slice(b"\nok\n");
        for capacity in [3, 700, 1024, 4096, 8192] {
            let got = lines(&input, 2000, capacity).await;
            assert_eq!(got[0], (Line::TooLong(5000), input[..LONG_LINE_HEAD].to_vec()), "capacity {capacity}");
            assert_eq!(got[1], (Line::Complete, b"ok".to_vec()));
        }
    }

    #[tokio::test]
    async fn a_buffer_grown_by_a_long_line_is_given_back_before_the_next() {
        let mut input = vec![b'x'; 200 * 1024];
        input.extend_from_slice(b"\nok\n");
        let mut reader = BufReader::with_capacity(4096, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut reader, &mut buf, 1 << 20).await.unwrap(), Line::Complete);
        assert!(buf.capacity() >= 200 * 1024);
        assert_eq!(read_line(&mut reader, &mut buf, 1 << 20).await.unwrap(), Line::Complete);
        assert_eq!(buf, b"ok");
        assert!(buf.capacity() <= RETAINED_CAPACITY, "kept {} bytes", buf.capacity());
    }
}
