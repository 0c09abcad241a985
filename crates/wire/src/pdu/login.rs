//! Login Request and Login Response (RFC 7143 §11.12, §11.13), with the
//! login stages and the status codes of a response.

use crate::bhs::Bhs;
use crate::fields::{Opcode, ParseError};

/// Login stages, the values of CSG and NSG (RFC 7143 §11.12.3).
pub mod stage {
    /// SecurityNegotiation.
    pub const SECURITY: u8 = 0;
    /// LoginOperationalNegotiation.
    pub const OPERATIONAL: u8 = 1;
    /// FullFeaturePhase.
    pub const FULL_FEATURE: u8 = 3;
}

/// Login status classes and details (RFC 7143 §11.13.5).
pub mod login_status {
    /// Class 0: the login goes on, or is complete.
    pub const SUCCESS: u8 = 0;
    /// Class 1: the target is elsewhere, as the data segment says.
    pub const REDIRECTION: u8 = 1;
    /// Class 2: the initiator erred; retrying will not help.
    pub const INITIATOR_ERROR: u8 = 2;
    /// Class 3: the target failed; retrying may help.
    pub const TARGET_ERROR: u8 = 3;
    /// Detail (class 2): initiator error, miscellaneous.
    pub const INITIATOR_ERROR_DETAIL: u8 = 0x00;
    /// Detail (class 2): authentication failure.
    pub const AUTHENTICATION_FAILURE: u8 = 0x01;
    /// Detail (class 2): authorization failure.
    pub const AUTHORIZATION_FAILURE: u8 = 0x02;
    /// Detail (class 2): target not found.
    pub const NOT_FOUND: u8 = 0x03;
    /// Detail (class 2): target removed.
    pub const TARGET_REMOVED: u8 = 0x04;
    /// Detail (class 2): unsupported version.
    pub const UNSUPPORTED_VERSION: u8 = 0x05;
    /// Detail (class 2): too many connections.
    pub const TOO_MANY_CONNECTIONS: u8 = 0x06;
    /// Detail (class 2): missing parameter.
    pub const MISSING_PARAMETER: u8 = 0x07;
    /// Detail (class 2): can't include in session.
    pub const CANT_INCLUDE_IN_SESSION: u8 = 0x08;
    /// Detail (class 2): session type not supported.
    pub const SESSION_TYPE_NOT_SUPPORTED: u8 = 0x09;
    /// Detail (class 2): session does not exist.
    pub const SESSION_DOES_NOT_EXIST: u8 = 0x0a;
    /// Detail (class 2): invalid request during login.
    pub const INVALID_DURING_LOGIN: u8 = 0x0b;
    /// Detail (class 3): target error, miscellaneous.
    pub const TARGET_ERROR_DETAIL: u8 = 0x00;
    /// Detail (class 3): service unavailable.
    pub const SERVICE_UNAVAILABLE: u8 = 0x01;
    /// Detail (class 3): out of resources.
    pub const OUT_OF_RESOURCES: u8 = 0x02;
}

/// CSG 2 is reserved (RFC 7143 §11.12.3): no stage has that number.
const RESERVED_STAGE: u8 = 2;

/// Login Request (RFC 7143 §11.12). The I bit is always set (no field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoginRequest {
    /// T: the initiator is ready for the stage NSG names (§11.12.1).
    pub transit: bool,
    /// C: the text goes on in the next Login Request (§11.12.2).
    pub continue_bit: bool,
    /// CSG: the current stage, one of [`stage`] (§11.12.3).
    pub csg: u8,
    /// NSG: the next stage, meaningful with `transit` (§11.12.3).
    pub nsg: u8,
    /// Version-max (§11.12.4).
    pub version_max: u8,
    /// Version-min (§11.12.4).
    pub version_min: u8,
    /// ISID: the initiator's half of the session identifier (§11.12.5).
    pub isid: [u8; 6],
    /// TSIH: 0 for a new session, else the session joined (§11.12.6).
    pub tsih: u16,
    /// Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// CID: the connection's identifier within the session (§11.12.7).
    pub cid: u16,
    /// CmdSN (§11.12.8).
    pub cmd_sn: u32,
    /// ExpStatSN (§11.12.9).
    pub exp_stat_sn: u32,
}

impl LoginRequest {
    /// The opcode a Login Request is sent with.
    pub const OPCODE: Opcode = Opcode::LoginRequest;

    /// Reads a Login Request's fields from its BHS; refuses the reserved
    /// CSG 2, from which no answer could be built.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> Result<LoginRequest, ParseError> {
        let csg = bhs.csg();
        if csg == RESERVED_STAGE {
            return Err(ParseError::InvalidField {
                field: "CSG",
                value: u32::from(csg),
            });
        }
        Ok(LoginRequest {
            transit: bhs.transit(),
            continue_bit: bhs.continue_bit(),
            csg,
            nsg: bhs.nsg(),
            version_max: bhs.version_max(),
            version_min: bhs.version_min(),
            isid: bhs.isid(),
            tsih: bhs.tsih(),
            initiator_task_tag: bhs.initiator_task_tag(),
            cid: bhs.cid(),
            cmd_sn: bhs.cmd_sn(),
            exp_stat_sn: bhs.exp_stat_sn(),
        })
    }

    /// Writes a Login Request's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        // RFC 7143 §11.12: the immediate bit is always 1 on a Login Request.
        bhs.set_immediate(true);
        bhs.set_transit(self.transit);
        bhs.set_continue_bit(self.continue_bit);
        bhs.set_csg(self.csg);
        bhs.set_nsg(self.nsg);
        bhs.set_version_max(self.version_max);
        bhs.set_version_min(self.version_min);
        bhs.set_isid(self.isid);
        bhs.set_tsih(self.tsih);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_cid(self.cid);
        bhs.set_cmd_sn(self.cmd_sn);
        bhs.set_exp_stat_sn(self.exp_stat_sn);
    }
}

/// Login Response (RFC 7143 §11.13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoginResponse {
    /// T: the target moves to the stage NSG names (§11.13.6).
    pub transit: bool,
    /// C: the text goes on in the next Login Response (§11.13.7).
    pub continue_bit: bool,
    /// CSG: the current stage, one of [`stage`].
    pub csg: u8,
    /// NSG: the next stage, meaningful with `transit`.
    pub nsg: u8,
    /// Version-max (§11.13.1).
    pub version_max: u8,
    /// Version-active (§11.13.2).
    pub version_active: u8,
    /// ISID, as the request gave it.
    pub isid: [u8; 6],
    /// TSIH: the session's, once the target has given one (§11.13.3).
    pub tsih: u16,
    /// The request's Initiator Task Tag.
    pub initiator_task_tag: u32,
    /// StatSN (§11.13.4).
    pub stat_sn: u32,
    /// ExpCmdSN.
    pub exp_cmd_sn: u32,
    /// MaxCmdSN.
    pub max_cmd_sn: u32,
    /// Status-Class, one of [`login_status`]'s classes (§11.13.5).
    pub status_class: u8,
    /// Status-Detail, within the class (§11.13.5).
    pub status_detail: u8,
}

impl LoginResponse {
    /// The opcode a Login Response is sent with.
    pub const OPCODE: Opcode = Opcode::LoginResponse;

    /// Reads a Login Response's fields from its BHS.
    #[inline]
    pub fn parse<T: AsRef<[u8]> + ?Sized>(bhs: &Bhs<&T>) -> LoginResponse {
        LoginResponse {
            transit: bhs.transit(),
            continue_bit: bhs.continue_bit(),
            csg: bhs.csg(),
            nsg: bhs.nsg(),
            version_max: bhs.version_max(),
            version_active: bhs.version_active(),
            isid: bhs.isid(),
            tsih: bhs.tsih(),
            initiator_task_tag: bhs.initiator_task_tag(),
            stat_sn: bhs.stat_sn(),
            exp_cmd_sn: bhs.exp_cmd_sn(),
            max_cmd_sn: bhs.max_cmd_sn(),
            status_class: bhs.status_class(),
            status_detail: bhs.status_detail(),
        }
    }

    /// Writes a Login Response's fields into a BHS of zeros.
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bhs: &mut Bhs<T>) {
        bhs.set_opcode(Self::OPCODE);
        bhs.set_transit(self.transit);
        bhs.set_continue_bit(self.continue_bit);
        bhs.set_csg(self.csg);
        bhs.set_nsg(self.nsg);
        bhs.set_version_max(self.version_max);
        bhs.set_version_active(self.version_active);
        bhs.set_isid(self.isid);
        bhs.set_tsih(self.tsih);
        bhs.set_initiator_task_tag(self.initiator_task_tag);
        bhs.set_stat_sn(self.stat_sn);
        bhs.set_exp_cmd_sn(self.exp_cmd_sn);
        bhs.set_max_cmd_sn(self.max_cmd_sn);
        bhs.set_status_class(self.status_class);
        bhs.set_status_detail(self.status_detail);
    }
}
