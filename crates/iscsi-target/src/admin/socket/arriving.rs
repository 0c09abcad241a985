//! A client whose request is still coming: its bytes are read as they come,
//! without waiting (the accepting thread reads every such client), and the
//! request must be whole by a deadline set at its connection, which a byte
//! now and then does not extend.

use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// The longest request line taken.
pub const REQUEST_MAX_BYTES: usize = 1 << 20;

/// What has come of a request so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// More is to come.
    Coming,
    /// The request line, without its newline.
    Whole(Vec<u8>),
    /// The client closed without sending anything.
    Gone,
    /// The request cannot be one: what to answer.
    Broken(String),
}

/// A connected client, its request not yet whole.
#[derive(Debug)]
pub struct Arriving {
    stream: UnixStream,
    line: Vec<u8>,
    deadline: Instant,
}

impl Arriving {
    /// `stream`, connected at `now`, with `wait` for its whole request;
    /// it is made non-blocking.
    pub fn new(stream: UnixStream, now: Instant, wait: Duration) -> std::io::Result<Arriving> {
        stream.set_nonblocking(true)?;
        Ok(Arriving {
            stream,
            line: Vec::new(),
            deadline: now + wait,
        })
    }

    /// When the request must be whole.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The client's stream.
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// The client's stream, to answer it.
    pub fn into_stream(self) -> UnixStream {
        self.stream
    }

    /// Reads what has come, without waiting.
    pub fn read(&mut self) -> Progress {
        let mut chunk = [0u8; 4096];
        loop {
            let n = match (&self.stream).read(&mut chunk) {
                Ok(0) if self.line.is_empty() => return Progress::Gone,
                Ok(0) => {
                    return Progress::Broken(
                        "a request is one JSON object on one line, ended by a newline".into(),
                    )
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Coming,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Progress::Broken(format!("reading the request failed: {e}")),
            };
            let start = self.line.len();
            self.line.extend_from_slice(&chunk[..n]);
            if let Some(end) = self.line[start..].iter().position(|&b| b == b'\n') {
                self.line.truncate(start + end);
                return Progress::Whole(std::mem::take(&mut self.line));
            }
            if self.line.len() > REQUEST_MAX_BYTES {
                return Progress::Broken(
                    "a request is one JSON object on one line of at most 1 MiB".into(),
                );
            }
            debug_assert!(self.line.len() <= REQUEST_MAX_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn arriving() -> (Arriving, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let now = Instant::now();
        let a = Arriving::new(ours, now, Duration::from_secs(10)).unwrap();
        assert_eq!(a.deadline(), now + Duration::from_secs(10));
        (a, theirs)
    }

    #[test]
    fn a_request_is_whole_at_its_newline_however_its_bytes_come() {
        let (mut a, mut client) = arriving();
        assert_eq!(a.read(), Progress::Coming, "nothing yet, and no wait");
        client.write_all(b"{\"op\":").unwrap();
        assert_eq!(a.read(), Progress::Coming);
        client.write_all(b" \"list\"}\nmore").unwrap();
        assert_eq!(a.read(), Progress::Whole(b"{\"op\": \"list\"}".to_vec()));
    }

    #[test]
    fn a_client_that_closes_is_gone_or_broken() {
        let (mut a, client) = arriving();
        drop(client);
        assert_eq!(a.read(), Progress::Gone);
        let (mut a, mut client) = arriving();
        client.write_all(b"{\"op\"").unwrap();
        drop(client);
        assert!(matches!(a.read(), Progress::Broken(why) if why.contains("ended by a newline")));
    }

    #[test]
    fn a_line_over_the_bound_is_refused() {
        let (mut a, client) = arriving();
        let writer = std::thread::spawn(move || {
            let _ = (&client).write_all(&vec![b' '; REQUEST_MAX_BYTES + 8192]);
            client
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let progress = loop {
            match a.read() {
                Progress::Coming => {
                    assert!(Instant::now() < deadline, "never refused");
                    std::thread::sleep(Duration::from_millis(1));
                }
                other => break other,
            }
        };
        assert!(matches!(progress, Progress::Broken(why) if why.contains("at most 1 MiB")));
        drop(a);
        drop(writer.join().unwrap());
    }
}
