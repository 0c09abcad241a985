//! Logout Requests (RFC 7143 §11.14).

use super::*;

impl Connection {
    pub(super) fn logout(&mut self, session: &Arc<Session>, l: &LogoutRequest) -> Flow {
        if let Some(flow) = self.admit(session, l.immediate, l.cmd_sn, None) {
            return flow;
        }
        let mut flow = Flow::Continue;
        let response = match l.reason_code {
            logout::LogoutReason::CloseSession => {
                session.close(self.serial, &mut self.wake);
                // RFC 7143 11.15: the response says cleanup is done, so the
                // nexus (and a reservation it held) ends before it is sent.
                session.end_nexus();
                flow = Flow::Close;
                logout::LogoutResponseCode::Closed
            }
            logout::LogoutReason::CloseConnection if l.cid == self.cid => {
                flow = Flow::Close;
                logout::LogoutResponseCode::Closed
            }
            logout::LogoutReason::CloseConnection if session.has_cid(l.cid) => {
                session.close_cid(l.cid, self.serial, &mut self.wake);
                logout::LogoutResponseCode::Closed
            }
            logout::LogoutReason::CloseConnection => logout::LogoutResponseCode::CidNotFound,
            logout::LogoutReason::RemoveConnectionForRecovery => {
                logout::LogoutResponseCode::RecoveryUnsupported
            }
            _ => logout::LogoutResponseCode::CleanupFailed,
        };
        let pdu = Pdu::LogoutResponse(LogoutResponse {
            response,
            initiator_task_tag: l.initiator_task_tag,
            stat_sn: self.take_stat_sn(),
            exp_cmd_sn: session.exp_cmd_sn(),
            max_cmd_sn: session.max_cmd_sn(),
            time2wait: 0,
            time2retain: 0,
        });
        let limits = self.send_limits;
        self.out.push(&pdu, &[], &limits);
        tracing::info!(
            initiator = %escape_for_log(&session.initiator_name),
            addr = %self.peer,
            target = session.target.as_ref().map(|t| tracing::field::display(&t.name)),
            tsih = session.tsih,
            cid = self.cid,
            logout_cid = (l.reason_code != logout::LogoutReason::CloseSession && l.cid != self.cid)
                .then_some(l.cid),
            reason = l.reason_code.to_u8(),
            response = response.to_u8(),
            "logout to {}: {}",
            crate::log::logout_reason(l.reason_code),
            crate::log::logout_response(response)
        );
        if flow == Flow::Close {
            self.phase = Phase::Closed;
        }
        flow
    }
}
