//! NOP-Out (RFC 7143 §11.18): pings from the initiator and answers to ours.

use super::*;

impl Connection {
    pub(super) fn nop_out(
        &mut self,
        session: &Arc<Session>,
        n: &NopOut,
        data: &[u8],
        _now: Instant,
    ) -> Flow {
        if n.initiator_task_tag == RESERVED_TAG {
            // RFC 7143 §11.18: the answer to our NOP-In ping (or an unsolicited ack); no response.
            if self
                .ping
                .as_ref()
                .is_some_and(|p| p.target_transfer_tag == n.target_transfer_tag)
            {
                self.ping = None;
            }
            return Flow::Continue;
        }
        if let Some(flow) = self.admit(session, n.immediate, n.cmd_sn, None) {
            return flow;
        }
        let (exp_cmd_sn, max_cmd_sn) = (session.exp_cmd_sn(), session.max_cmd_sn());
        let pdu = Pdu::NopIn(NopIn {
            lun: n.lun,
            initiator_task_tag: n.initiator_task_tag,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn,
            max_cmd_sn,
        });
        let limits = self.send_limits;
        // RFC 7143 §11.19: a ping's data is echoed back, but no data
        // segment goes out longer than the initiator's
        // MaxRecvDataSegmentLength (§13.12): a longer ping's echo is cut.
        let echo = &data[..data.len().min(self.max_send_segment as usize)];
        self.out.push(&pdu, echo, &limits);
        Flow::Continue
    }
}
