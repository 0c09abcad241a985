//! Text Requests (RFC 7143 §11.10): SendTargets, continued both ways.

use super::*;

impl Connection {
    pub(super) fn text(
        &mut self,
        session: &Arc<Session>,
        t: &TextRequest,
        data: &[u8],
        bhs: &[u8; 48],
    ) -> Flow {
        if let Some(flow) = self.admit(session, t.immediate, t.cmd_sn, None) {
            return flow;
        }
        let continuing = self.text_out.as_ref().is_some_and(|p| {
            p.target_transfer_tag == t.target_transfer_tag && t.target_transfer_tag != RESERVED_TAG
        });
        if !continuing {
            self.text_out = None;
            if self.text_in.len() + data.len() > TEXT_REQUEST_BYTES_MAX {
                // RFC 7143 §11.17.1: the request is rejected and the
                // exchange is over; the connection goes on.
                tracing::warn!(
                    initiator = %escape_for_log(&session.initiator_name),
                    addr = %self.peer,
                    cid = self.cid,
                    "text request rejected: over {TEXT_REQUEST_BYTES_MAX} bytes ({} with this PDU)",
                    self.text_in.len() + data.len()
                );
                self.text_in.clear();
                self.reject(reject::RejectReason::ProtocolError, bhs);
                return Flow::Continue;
            }
            self.text_in.extend_from_slice(data);
            if t.continue_bit {
                // RFC 7143 §11.10.2: more text follows; answer with an empty response.
                self.queue_text_response(session, t, Vec::new(), true);
                return Flow::Continue;
            }
            let request = std::mem::take(&mut self.text_in);
            match discovery::answer_text(&self.server, session, &request, self.local) {
                Ok(answer) => self.queue_text_response(session, t, answer, false),
                // RFC 7143 §6.2 gives a text that is not pairs no answer
                // of keys; an empty Text Response would read as "nothing
                // to say", so the request is rejected instead, and the
                // task is over (§11.17.1).
                Err(why) => {
                    tracing::debug!(error = %why, "text request rejected");
                    self.reject(reject::RejectReason::ProtocolError, bhs);
                }
            }
        } else {
            self.send_text_chunk(session, t);
        }
        Flow::Continue
    }

    pub(super) fn queue_text_response(
        &mut self,
        session: &Session,
        t: &TextRequest,
        data: Vec<u8>,
        empty_continue: bool,
    ) {
        if empty_continue {
            let pdu = Pdu::TextResponse(TextResponse {
                final_bit: false,
                continue_bit: false,
                lun: t.lun,
                initiator_task_tag: t.initiator_task_tag,
                target_transfer_tag: self.next_target_transfer_tag(),
                stat_sn: self.take_stat_sn(),
                exp_cmd_sn: session.exp_cmd_sn(),
                max_cmd_sn: session.max_cmd_sn(),
            });
            let limits = self.send_limits;
            self.out.push(&pdu, &[], &limits);
            return;
        }
        self.text_out = Some(PendingText {
            target_transfer_tag: RESERVED_TAG,
            data,
            sent: 0,
        });
        self.send_text_chunk(session, t);
    }

    pub(super) fn send_text_chunk(&mut self, session: &Session, t: &TextRequest) {
        let Some(mut pending) = self.text_out.take() else {
            return;
        };
        let chunk = (pending.data.len() - pending.sent).min(self.max_send_segment as usize);
        let done = pending.sent + chunk == pending.data.len();
        let ttt = if done {
            RESERVED_TAG
        } else {
            self.next_target_transfer_tag()
        };
        let pdu = Pdu::TextResponse(TextResponse {
            final_bit: done,
            continue_bit: !done,
            lun: t.lun,
            initiator_task_tag: t.initiator_task_tag,
            target_transfer_tag: ttt,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn: session.exp_cmd_sn(),
            max_cmd_sn: session.max_cmd_sn(),
        });
        let limits = self.send_limits;
        self.out.push(
            &pdu,
            &pending.data[pending.sent..pending.sent + chunk],
            &limits,
        );
        pending.sent += chunk;
        if !done {
            pending.target_transfer_tag = ttt;
            self.text_out = Some(pending);
        }
    }
}
