//! A logged-in session and the commands every subcommand sends on it.

use super::login::{login_failure, session_config};
use super::{operational, Failure, LunArgs};
use isoe_initiator::cdb::{self, Capacity, Inquiry};
use isoe_initiator::{Command, Completion, Engine, IscsiUrl, Outcome, SessionConfig};
use std::time::{Duration, Instant};

/// How often a command is repeated after a UNIT ATTENTION (a fresh session
/// reports power-on and parameter changes once each).
const UNIT_ATTENTION_RETRIES: u32 = 4;
/// The largest REPORT LUNS answer we ask for: header + 16384 LUNs.
const REPORT_LUNS_BYTES_MAX: u32 = 8 + 8 * 16384;

/// A logged-in session; [`Session::close`] logs out.
pub(super) struct Session {
    engine: Engine,
    index: usize,
    target: String,
    /// How long one command may wait for its answer.
    timeout: Duration,
    next_token: u64,
}

impl Session {
    fn open(config: SessionConfig) -> Result<Session, Failure> {
        let target = config.target_name.clone();
        let chap = config.chap.clone();
        let timeout = config.timeout;
        let mut engine = Engine::new();
        let index = engine
            .login(config)
            .map_err(|e| login_failure(e, chap.as_ref()))?;
        Ok(Session {
            engine,
            index,
            target,
            timeout,
            next_token: 0,
        })
    }

    /// Submits `command` and waits for it up to the timeout (`Engine::execute`
    /// would wait for as long as the connection lives).
    fn execute_once(&mut self, command: Command, what: &str) -> Result<Completion, Failure> {
        let token = self.next_token;
        self.next_token += 1;
        self.engine.submit(self.index, command, token)?;
        let deadline = Instant::now() + self.timeout;
        let mut done = Vec::new();
        loop {
            if let Some(i) = done.iter().position(|c: &Completion| c.token == token) {
                return Ok(done.swap_remove(i));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(operational(format!(
                    "{what}: no answer from {} within {} s",
                    self.target,
                    self.timeout.as_secs()
                )));
            }
            self.engine.poll(&mut done, deadline - now)?;
        }
    }

    /// Runs `command` to a GOOD status, repeating it after a UNIT ATTENTION.
    /// `what` names it in errors ("READ CAPACITY (16) on LUN 1").
    pub(super) fn execute(
        &mut self,
        mut command: Command,
        what: &str,
    ) -> Result<Completion, Failure> {
        let mut attempts = 0;
        loop {
            let (lun, cdb, direction, attr) =
                (command.lun, command.cdb, command.direction, command.attr);
            let done = self.execute_once(command, what)?;
            match done.good() {
                Ok(_) => return Ok(done),
                Err(_) if is_unit_attention(&done) && attempts < UNIT_ATTENTION_RETRIES => {
                    attempts += 1;
                    command = Command {
                        lun,
                        cdb,
                        direction,
                        attr,
                        buffer: done.buffer,
                        external: None,
                        immediate: false,
                    };
                }
                Err(why) => {
                    let hint = sense_hint(&done).map_or(String::new(), |h| format!(" ({h})"));
                    return Err(operational(format!("{what} failed: {why}{hint}")));
                }
            }
        }
    }

    /// Reads up to `len` bytes; the data the target sent.
    pub(super) fn read_data(
        &mut self,
        lun: u16,
        cdb: &[u8],
        len: u32,
        what: &str,
    ) -> Result<Vec<u8>, Failure> {
        let done = self.execute(Command::read(lun, cdb, len), what)?;
        let got = match &done.outcome {
            Outcome::Scsi(s) => s.data_in_len as usize,
            _ => 0,
        };
        let mut data = done.buffer;
        data.truncate(got);
        Ok(data)
    }

    pub(super) fn capacity(&mut self, lun: u16) -> Result<Capacity, Failure> {
        let what = format!("READ CAPACITY (16) on LUN {lun}");
        let data = self.read_data(lun, &cdb::read_capacity16(), 32, &what)?;
        let cap = Capacity::parse(&data).ok_or_else(|| {
            operational(format!(
                "{what}: the answer is {} bytes, shorter than the 12 of its parameter data",
                data.len()
            ))
        })?;
        if cap.block_size_bytes == 0 {
            return Err(operational(format!(
                "{what}: the target reports a block size of 0 bytes"
            )));
        }
        Ok(cap)
    }

    pub(super) fn inquiry(&mut self, lun: u16) -> Result<Inquiry, Failure> {
        let what = format!("INQUIRY on LUN {lun}");
        let data = self.read_data(lun, &cdb::inquiry(None, 96), 96, &what)?;
        Inquiry::parse(&data).ok_or_else(|| {
            operational(format!(
                "{what}: the answer is {} bytes, shorter than the 36 of standard data",
                data.len()
            ))
        })
    }

    /// The unit serial number (SPC-4 7.8.17, VPD page 0x80), when the LUN lists that page.
    pub(super) fn serial(&mut self, lun: u16) -> Result<Option<String>, Failure> {
        let what = format!("INQUIRY VPD page 0x00 on LUN {lun}");
        let pages = self.read_data(lun, &cdb::inquiry(Some(0x00), 255), 255, &what)?;
        if !vpd_payload(&pages).is_some_and(|p| p.contains(&0x80)) {
            return Ok(None);
        }
        let what = format!("INQUIRY VPD page 0x80 on LUN {lun}");
        let page = self.read_data(lun, &cdb::inquiry(Some(0x80), 255), 255, &what)?;
        let serial = vpd_payload(&page).map(|p| {
            String::from_utf8_lossy(p)
                .trim_matches(|c: char| c == ' ' || c == '\0')
                .to_string()
        });
        Ok(serial.filter(|s| !s.is_empty()))
    }

    /// Logs out; a failure here is only worth a warning, the work is done.
    fn close(mut self, command: &str) {
        if let Err(e) = self.engine.logout(self.index) {
            eprintln!(
                "isoe {command}: warning: logout from {} failed: {e}",
                self.target
            );
        }
    }
}

fn is_unit_attention(done: &Completion) -> bool {
    matches!(&done.outcome, Outcome::Scsi(s) if s.sense_key().is_some_and(|(key, _, _)| key == 6))
}

/// The sense codes a user of these commands meets most, in words (SPC-4 Annex D).
fn sense_hint(done: &Completion) -> Option<&'static str> {
    let Outcome::Scsi(status) = &done.outcome else {
        return None;
    };
    match status.sense_key()? {
        (0x05, 0x25, 0x00) => Some(
            "logical unit not supported: the target has no such LUN; `isoe luns URL` lists them",
        ),
        (0x05, 0x21, 0x00) => Some("logical block address out of range"),
        (0x05, 0x20, 0x00) => {
            Some("invalid command operation code: the LUN does not support this command")
        }
        (0x07, 0x27, _) => Some("write protected"),
        (0x02, 0x04, _) => Some("logical unit not ready"),
        (0x03, _, _) => Some("medium error"),
        _ => None,
    }
}

/// A VPD page's payload (after its 4-byte header), cut to the page length.
fn vpd_payload(page: &[u8]) -> Option<&[u8]> {
    let len = usize::from(u16::from_be_bytes([*page.get(2)?, *page.get(3)?]));
    page.get(4..).map(|rest| &rest[..len.min(rest.len())])
}

/// Opens a session on `url`, runs `work`, and logs out whatever `work` returned.
pub(super) fn with_session<T>(
    command: &str,
    args: &LunArgs,
    url: &IscsiUrl,
    work: impl FnOnce(&mut Session) -> Result<T, Failure>,
) -> Result<T, Failure> {
    let config = session_config(url, &args.login, &args.digests)?;
    let mut session = Session::open(config)?;
    let result = work(&mut session);
    session.close(command);
    result
}

/// REPORT LUNS, asking again with room for the whole list when it did not fit.
pub(super) fn report_luns(s: &mut Session, lun: u16) -> Result<Vec<u16>, Failure> {
    let what = format!("REPORT LUNS on LUN {lun}");
    let mut allocation = 8 + 8 * 256;
    loop {
        let data = s.read_data(lun, &cdb::report_luns(allocation), allocation, &what)?;
        let list_bytes = data
            .get(0..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        let Some(list_bytes) = list_bytes else {
            return Err(operational(format!(
                "{what}: the answer is {} bytes, shorter than its 8-byte header",
                data.len()
            )));
        };
        let needed = list_bytes.saturating_add(8);
        if needed > allocation && allocation < REPORT_LUNS_BYTES_MAX {
            allocation = needed.min(REPORT_LUNS_BYTES_MAX);
            continue;
        }
        let mut luns = cdb::parse_report_luns(&data)
            .ok_or_else(|| operational(format!("{what}: malformed answer")))?;
        luns.sort_unstable();
        luns.dedup();
        return Ok(luns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vpd_payload_is_cut_to_the_page_length() {
        assert_eq!(
            vpd_payload(&[0, 0x80, 0, 3, b'a', b'b', b'c', 0xff]),
            Some(&b"abc"[..])
        );
        assert_eq!(vpd_payload(&[0, 0x80, 0, 9, b'a']), Some(&b"a"[..]));
        assert_eq!(vpd_payload(&[0, 0x80]), None);
    }
}
