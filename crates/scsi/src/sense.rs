//! Sense data: the reason a command ended in CHECK CONDITION (SPC-5 4.4).

/// Sense keys (SPC-5 4.4.8, table 51).
pub mod sense_key {
    /// No specific sense key information.
    pub const NO_SENSE: u8 = 0x00;
    /// The logical unit cannot be accessed now.
    pub const NOT_READY: u8 = 0x02;
    /// A flaw in the medium or an unrecovered error on it.
    pub const MEDIUM_ERROR: u8 = 0x03;
    /// A non-recoverable failure in the device server or below it.
    pub const HARDWARE_ERROR: u8 = 0x04;
    /// Something in the CDB or parameter data was wrong.
    pub const ILLEGAL_REQUEST: u8 = 0x05;
    /// The logical unit was reset or its state changed.
    pub const UNIT_ATTENTION: u8 = 0x06;
    /// The medium is write protected.
    pub const DATA_PROTECT: u8 = 0x07;
    /// An EXTENDED COPY failed at a copy source or destination (SPC-5 4.4.8).
    pub const COPY_ABORTED: u8 = 0x0a;
    /// The command was aborted.
    pub const ABORTED_COMMAND: u8 = 0x0b;
    /// Source data did not match the medium (VERIFY, COMPARE AND WRITE).
    pub const MISCOMPARE: u8 = 0x0e;
}

/// Where in the CDB or parameter list the offending field is
/// (SPC-5 4.4.2.2, the field pointer sense-key specific information).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldPointer {
    /// true: the error is in the CDB; false: in the parameter data.
    pub c_d: bool,
    /// Bit (7..0) of the most significant bit of the field, if it is not a whole byte.
    pub bit_pointer: Option<u8>,
    /// Byte offset of the field.
    pub byte: u16,
}

/// Sense data for one command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sense {
    /// Sense key (see [`sense_key`]).
    pub key: u8,
    /// Additional sense code.
    pub asc: u8,
    /// Additional sense code qualifier.
    pub ascq: u8,
    /// The INFORMATION field (an LBA or an offset), if meaningful.
    pub information: Option<u64>,
    /// The sense-key specific field pointer, if meaningful.
    pub field_pointer: Option<FieldPointer>,
}

/// Length of fixed format sense data as we build it (SPC-5 4.4.3).
pub const FIXED_SENSE_LEN: usize = 18;

impl Sense {
    /// Sense with only key, ASC and ASCQ.
    pub const fn new(key: u8, asc: u8, ascq: u8) -> Self {
        Self {
            key,
            asc,
            ascq,
            information: None,
            field_pointer: None,
        }
    }

    /// Fixed format sense data (SPC-5 4.4.3): response code 70h, 18 bytes.
    pub fn to_fixed(&self) -> [u8; FIXED_SENSE_LEN] {
        let mut data = [0u8; FIXED_SENSE_LEN];
        data[0] = 0x70;
        data[2] = self.key & 0x0f;
        // SPC-5 4.4.3: VALID says INFORMATION holds a value; it holds only 32 bits.
        if let Some(information) = self.information.and_then(|i| u32::try_from(i).ok()) {
            data[0] |= 0x80;
            data[3..7].copy_from_slice(&information.to_be_bytes());
        }
        data[7] = (FIXED_SENSE_LEN - 8) as u8;
        data[12] = self.asc;
        data[13] = self.ascq;
        if let Some(pointer) = self.field_pointer {
            data[15..18].copy_from_slice(&field_pointer_bytes(pointer));
        }
        data
    }

    /// Descriptor format sense data (SPC-5 4.4.2): response code 72h with an
    /// information descriptor and a sense-key specific descriptor when present.
    pub fn to_descriptor(&self) -> Vec<u8> {
        let mut data = vec![0x72, self.key & 0x0f, self.asc, self.ascq, 0, 0, 0, 0];
        if let Some(information) = self.information {
            // SPC-5 4.4.2.2: information descriptor, type 00h, VALID set.
            data.extend_from_slice(&[0x00, 0x0a, 0x80, 0x00]);
            data.extend_from_slice(&information.to_be_bytes());
        }
        if let Some(pointer) = self.field_pointer {
            // SPC-5 4.4.2.3: sense key specific descriptor, type 02h.
            data.extend_from_slice(&[0x02, 0x06, 0x00, 0x00]);
            data.extend_from_slice(&field_pointer_bytes(pointer));
            data.push(0);
        }
        data[7] = (data.len() - 8) as u8;
        data
    }

    /// NO SENSE: nothing to report (REQUEST SENSE with no pending sense).
    pub const fn no_sense() -> Self {
        Self::new(sense_key::NO_SENSE, 0x00, 0x00)
    }

    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE (20h/00h).
    pub fn invalid_opcode() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x20, 0x00).pointing(true, 0, None)
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h), pointing at `byte`
    /// and at `bit`, the most significant bit of the field.
    pub fn invalid_field_in_cdb(byte: u16, bit: u8) -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x24, 0x00).pointing(true, byte, Some(bit))
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h) for a whole-byte (or
    /// multi-byte) field starting at `byte`.
    pub fn invalid_field_in_cdb_byte(byte: u16) -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x24, 0x00).pointing(true, byte, None)
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST (26h/00h).
    pub fn invalid_field_in_parameter_list(byte: u16, bit: Option<u8>) -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x26, 0x00).pointing(false, byte, bit)
    }

    /// ILLEGAL REQUEST, PARAMETER LIST LENGTH ERROR (1Ah/00h).
    pub fn parameter_list_length_error() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x1a, 0x00)
    }

    /// ILLEGAL REQUEST, INVALID FIELD IN COMMAND INFORMATION UNIT (0Eh/03h):
    /// the transport delivered data the command cannot use.
    pub fn invalid_field_in_information_unit() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x0e, 0x03)
    }

    /// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE (21h/00h).
    pub const fn lba_out_of_range() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x21, 0x00)
    }

    /// ILLEGAL REQUEST, LOGICAL UNIT NOT SUPPORTED (25h/00h).
    pub const fn logical_unit_not_supported() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x25, 0x00)
    }

    /// ILLEGAL REQUEST, SAVING PARAMETERS NOT SUPPORTED (39h/00h).
    pub const fn saving_parameters_not_supported() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x39, 0x00)
    }

    /// DATA PROTECT, WRITE PROTECTED (27h/00h).
    pub const fn write_protected() -> Self {
        Self::new(sense_key::DATA_PROTECT, 0x27, 0x00)
    }

    /// DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (27h/07h): a
    /// thin-provisioned unit could not allocate room for a write (SBC-4 4.7.3.6).
    pub const fn space_allocation_failed_write_protect() -> Self {
        Self::new(sense_key::DATA_PROTECT, 0x27, 0x07)
    }

    /// NOT READY, MEDIUM NOT PRESENT (3Ah/00h).
    pub const fn not_ready_medium_not_present() -> Self {
        Self::new(sense_key::NOT_READY, 0x3a, 0x00)
    }

    /// NOT READY, LOGICAL UNIT NOT READY, OFFLINE (04h/12h): taken offline
    /// by the administrator.
    pub const fn not_ready_offline() -> Self {
        Self::new(sense_key::NOT_READY, 0x04, 0x12)
    }

    /// UNIT ATTENTION, REPORTED LUNS DATA HAS CHANGED (3Fh/0Eh).
    pub const fn reported_luns_data_changed() -> Self {
        Self::new(sense_key::UNIT_ATTENTION, 0x3f, 0x0e)
    }

    /// UNIT ATTENTION, CAPACITY DATA HAS CHANGED (06/2A/09, SBC-4 4.10):
    /// the number of blocks or their size changed.
    pub const fn capacity_data_changed() -> Self {
        Self::new(sense_key::UNIT_ATTENTION, 0x2a, 0x09)
    }

    /// UNIT ATTENTION, MODE PARAMETERS CHANGED (06/2A/01): what MODE SENSE
    /// reports changed (the write-protect bit, for one).
    pub const fn mode_parameters_changed() -> Self {
        Self::new(sense_key::UNIT_ATTENTION, 0x2a, 0x01)
    }

    /// UNIT ATTENTION, ASYMMETRIC ACCESS STATE CHANGED (06/2A/06, SPC-5
    /// 5.16.2.6): some target port group's ALUA state changed.
    pub const fn asymmetric_access_state_changed() -> Self {
        Self::new(sense_key::UNIT_ATTENTION, 0x2a, 0x06)
    }

    /// UNIT ATTENTION, INQUIRY DATA HAS CHANGED (06/3F/03): the identity
    /// INQUIRY reports changed.
    pub const fn inquiry_data_changed() -> Self {
        Self::new(sense_key::UNIT_ATTENTION, 0x3f, 0x03)
    }

    /// NOT READY, LOGICAL UNIT IS IN PROCESS OF BECOMING READY (04h/01h):
    /// initiators retry the command.
    pub const fn not_ready_becoming_ready() -> Self {
        Self::new(sense_key::NOT_READY, 0x04, 0x01)
    }

    /// NOT READY, LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED (04h/02h).
    pub const fn not_ready_initializing_command_required() -> Self {
        Self::new(sense_key::NOT_READY, 0x04, 0x02)
    }

    /// MISCOMPARE, MISCOMPARE DURING VERIFY OPERATION (1Dh/00h); `offset` is
    /// the Data-Out byte offset of the first difference (SBC-4 5.31).
    pub const fn miscompare(offset: u64) -> Self {
        let mut sense = Self::new(sense_key::MISCOMPARE, 0x1d, 0x00);
        sense.information = Some(offset);
        sense
    }

    /// MEDIUM ERROR, UNRECOVERED READ ERROR (11h/00h).
    pub const fn unrecovered_read_error() -> Self {
        Self::new(sense_key::MEDIUM_ERROR, 0x11, 0x00)
    }

    /// MEDIUM ERROR, WRITE ERROR (0Ch/00h).
    pub const fn write_error() -> Self {
        Self::new(sense_key::MEDIUM_ERROR, 0x0c, 0x00)
    }

    /// HARDWARE ERROR, INTERNAL TARGET FAILURE (44h/00h).
    pub const fn internal_target_failure() -> Self {
        Self::new(sense_key::HARDWARE_ERROR, 0x44, 0x00)
    }

    /// DATA PROTECT, LOGICAL UNIT SOFTWARE WRITE PROTECTED (27h/02h): the
    /// control mode page's SWP bit is set (SPC-5 7.5.10).
    pub const fn software_write_protected() -> Self {
        Self::new(sense_key::DATA_PROTECT, 0x27, 0x02)
    }

    /// NOT READY, LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS (04h/1Bh).
    pub const fn sanitize_in_progress() -> Self {
        Self::new(sense_key::NOT_READY, 0x04, 0x1b)
    }

    /// MEDIUM ERROR, SANITIZE COMMAND FAILED (31h/03h): a SANITIZE did not
    /// complete and the medium may not be read or written (SBC-4 4.11).
    pub const fn sanitize_command_failed() -> Self {
        Self::new(sense_key::MEDIUM_ERROR, 0x31, 0x03)
    }

    /// ILLEGAL REQUEST, OPERATION IN PROGRESS (00h/16h): an EXTENDED COPY
    /// with the same list identifier is still being processed.
    pub const fn operation_in_progress() -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x00, 0x16)
    }

    /// ILLEGAL REQUEST with an EXTENDED COPY parameter list ASC/ASCQ (26h/xx:
    /// too many or unsupported descriptors, inline data too long), pointing
    /// at `byte` of the parameter list.
    pub fn copy_parameter_error(ascq: u8, byte: u16) -> Self {
        Self::new(sense_key::ILLEGAL_REQUEST, 0x26, ascq).pointing(false, byte, None)
    }

    /// COPY ABORTED with `asc`/`ascq` (SPC-5 6.6.3); `byte` is the segment
    /// pointer (SD=0: an offset in the parameter list) of the offending field.
    pub fn copy_aborted(asc: u8, ascq: u8, byte: u16) -> Self {
        Self::new(sense_key::COPY_ABORTED, asc, ascq).pointing(false, byte, None)
    }

    fn pointing(mut self, c_d: bool, byte: u16, bit_pointer: Option<u8>) -> Self {
        self.field_pointer = Some(FieldPointer {
            c_d,
            bit_pointer,
            byte,
        });
        self
    }
}

/// The three bytes of field pointer sense-key specific information
/// (SPC-5 4.4.2.4.2): SKSV, C/D, BPV, bit pointer, field pointer.
fn field_pointer_bytes(pointer: FieldPointer) -> [u8; 3] {
    let mut first = 0x80;
    if pointer.c_d {
        first |= 0x40;
    }
    if let Some(bit) = pointer.bit_pointer {
        first |= 0x08 | (bit & 0x07);
    }
    let [high, low] = pointer.byte.to_be_bytes();
    [first, high, low]
}
