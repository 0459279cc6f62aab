//! Server-sent events (the `text/event-stream` answers of an HTTP upstream), read as they
//! stream in and within a bound.
//!
//! Lines end with CRLF, LF or a lone CR, and a blank line ends an event (WHATWG HTML, "Parsing an
//! event stream"); only `data` fields matter here. Each byte is looked at once, however the
//! stream is cut into chunks. An event over the limit is never buffered: it is skipped as it
//! streams by and reported once it ends, and the events after it are still read.

/// What the reader hands on.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent {
    /// An event's `data` lines, joined with `\n`. Events without data are not handed on.
    Data(Vec<u8>),
    /// An event over the limit, skipped unread: its size in bytes, line endings included.
    Skipped { bytes: usize },
}

pub struct SseReader {
    limit: usize,
    /// The unfinished line's content (empty while skipping).
    line: Vec<u8>,
    /// Bytes the unfinished line has had, even those not kept: zero means a blank line.
    line_bytes: usize,
    /// The current event's `data` lines so far.
    data: Vec<u8>,
    has_data: bool,
    /// Bytes of the current event so far, line endings included.
    event_bytes: usize,
    skipping: bool,
    /// The last byte was a CR: an LF right after it belongs to the same line ending.
    after_cr: bool,
}

impl SseReader {
    /// A reader that skips any event over `limit` bytes.
    pub fn new(limit: usize) -> Self {
        SseReader {
            limit,
            line: Vec::new(),
            line_bytes: 0,
            data: Vec::new(),
            has_data: false,
            event_bytes: 0,
            skipping: false,
            after_cr: false,
        }
    }

    /// Reads the next chunk of the stream; gives the events it completed, in order.
    pub fn feed(&mut self, mut chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        loop {
            if self.after_cr {
                match chunk.first() {
                    None => break,
                    Some(b'\n') => {
                        chunk = &chunk[1..];
                        // Part of this event, unless the CR ended it.
                        if self.event_bytes > 0 {
                            self.count(1);
                        }
                    }
                    Some(_) => {}
                }
                self.after_cr = false;
            }
            let Some(at) = chunk.iter().position(|b| matches!(b, b'\n' | b'\r')) else {
                self.take(chunk);
                break;
            };
            self.take(&chunk[..at]);
            self.after_cr = chunk[at] == b'\r';
            self.count(1);
            self.end_line(&mut events);
            chunk = &chunk[at + 1..];
        }
        events
    }

    /// The bytes of the over-long event being skipped, if one is.
    pub fn skipping(&self) -> Option<usize> {
        self.skipping.then_some(self.event_bytes)
    }

    fn take(&mut self, bytes: &[u8]) {
        self.line_bytes += bytes.len();
        self.count(bytes.len());
        if !self.skipping {
            self.line.extend_from_slice(bytes);
        }
    }

    fn count(&mut self, bytes: usize) {
        self.event_bytes += bytes;
        if self.event_bytes > self.limit && !self.skipping {
            self.skipping = true;
            self.line = Vec::new();
            self.data = Vec::new();
            self.has_data = false;
        }
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        if self.line_bytes == 0 {
            if self.skipping {
                events.push(SseEvent::Skipped { bytes: self.event_bytes });
            } else if self.has_data {
                events.push(SseEvent::Data(std::mem::take(&mut self.data)));
            }
            self.data.clear();
            self.has_data = false;
            self.event_bytes = 0;
            self.skipping = false;
            return;
        }
        self.line_bytes = 0;
        if self.skipping {
            return;
        }
        // `name: value` (one space after the colon dropped), or a bare `name`; `:` starts a comment.
        let (name, value) = match self.line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &self.line[colon + 1..];
                (&self.line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&self.line[..], &b""[..]),
        };
        if name == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        self.line.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(text: &str) -> SseEvent {
        SseEvent::Data(text.as_bytes().to_vec())
    }

    /// The events of `stream` fed in two chunks cut at every byte position, each the same.
    fn split_everywhere(stream: &[u8], limit: usize) -> Vec<SseEvent> {
        let whole = SseReader::new(limit).feed(stream);
        for cut in 0..=stream.len() {
            let mut reader = SseReader::new(limit);
            let mut events = reader.feed(&stream[..cut]);
            events.extend(reader.feed(&stream[cut..]));
            assert_eq!(events, whole, "cut at byte {cut}");
        }
        let mut reader = SseReader::new(limit);
        let bytewise: Vec<SseEvent> = stream.iter().flat_map(|b| reader.feed(&[*b])).collect();
        assert_eq!(bytewise, whole, "one byte at a time");
        whole
    }

    #[test]
    fn lf_crlf_and_lone_cr_each_end_lines_and_events() {
        let expected = [data("{\"a\":\n1}"), data("{}")];
        for ending in ["\n", "\r\n", "\r"] {
            let stream =
                format!("event: message{0}data: {{\"a\":{0}data:1}}{0}{0}: a comment{0}data: {{}}{0}{0}", ending);
            assert_eq!(split_everywhere(stream.as_bytes(), 1024), expected, "{ending:?}");
        }
        // Mixed in one stream, as a careless server might.
        let mixed = b"data: {\"a\":\r\ndata:1}\n\rdata: {}\r\r";
        assert_eq!(split_everywhere(mixed, 1024), expected);
    }

    #[test]
    fn events_without_data_and_unfinished_events_give_nothing() {
        assert!(split_everywhere(b"\n\n: ping\n\nevent: x\nid: 3\n\n", 1024).is_empty());
        assert!(split_everywhere(b"data: {}\n", 1024).is_empty(), "an unfinished event waits for more");
        assert_eq!(split_everywhere(b"data\ndata\n\n", 1024), [data("\n")], "a bare `data` is an empty line of data");
    }

    #[test]
    fn an_over_long_event_is_skipped_as_it_streams_and_the_next_is_read() {
        for ending in ["\n", "\r\n", "\r"] {
            let long = format!("data: {}{ending}data: {}{ending}{ending}", "x".repeat(50), "x".repeat(50));
            let stream = format!("data: 1{ending}{ending}{long}data: 2{ending}{ending}");
            let events = split_everywhere(stream.as_bytes(), 64);
            // Counted up to the blank line's CR or LF: a CRLF's LF after it is not waited for.
            let bytes = long.len() - usize::from(ending == "\r\n");
            assert_eq!(events, [data("1"), SseEvent::Skipped { bytes }, data("2")], "{ending:?}");
        }

        // Nothing of it is kept while it streams, and the reader says how much went by.
        let mut reader = SseReader::new(64);
        assert!(reader.feed(format!("data: {}", "y".repeat(1000)).as_bytes()).is_empty());
        assert_eq!(reader.skipping(), Some(1006));
        assert!(reader.line.is_empty() && reader.data.is_empty());
        assert_eq!(reader.feed(b"\n\ndata: 3\n\n"), [SseEvent::Skipped { bytes: 1008 }, data("3")]);
        assert_eq!(reader.skipping(), None);
    }

    #[test]
    fn an_event_at_the_limit_is_read() {
        let event = b"data: 12345\n\n";
        assert_eq!(SseReader::new(event.len()).feed(event), [data("12345")]);
        assert_eq!(SseReader::new(event.len() - 1).feed(event), [SseEvent::Skipped { bytes: event.len() }]);
    }
}
