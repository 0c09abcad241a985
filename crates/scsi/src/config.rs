//! What a logical unit says about itself: identity strings, designators, block size.

/// Configuration of one logical unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LunConfig {
    /// Refuse every command that would change the medium (DATA PROTECT).
    pub read_only: bool,
    /// Logical block length in bytes: 512 (default) or 4096.
    pub block_size: u32,
    /// T10 VENDOR IDENTIFICATION, up to 8 ASCII characters (INQUIRY).
    pub vendor: String,
    /// PRODUCT IDENTIFICATION, up to 16 ASCII characters (INQUIRY).
    pub product: String,
    /// PRODUCT REVISION LEVEL, up to 4 ASCII characters (INQUIRY).
    pub revision: String,
    /// PRODUCT SERIAL NUMBER (VPD page 80h), ASCII.
    pub unit_serial: String,
    /// NAA IEEE Registered Extended designator (NAA 6h) of the logical unit (VPD page 83h).
    pub naa: [u8; 16],
    /// SCSI name string of the target port, "<target iqn>,t,0x0001" (VPD page 83h).
    pub target_port_name: String,
    /// RELATIVE TARGET PORT IDENTIFIER (VPD page 83h), nonzero.
    pub relative_port: u16,
    /// The LUN this unit answers on (REPORT LUNS when no target-level list exists).
    pub lun_number: u16,
    /// Where persistent reservations are kept when an initiator asks for
    /// APTPL (persist through power loss); None: APTPL is refused (PTPL_C=0).
    pub reservations_file: Option<std::path::PathBuf>,
}

impl Default for LunConfig {
    fn default() -> Self {
        Self {
            read_only: false,
            block_size: 512,
            vendor: "ISOE".to_owned(),
            product: "MEMORY".to_owned(),
            revision: "0001".to_owned(),
            unit_serial: String::new(),
            naa: [0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            target_port_name: String::new(),
            relative_port: 1,
            lun_number: 0,
            reservations_file: None,
        }
    }
}

/// A `LunConfig` the device server cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Only 512 and 4096 byte logical blocks are supported.
    #[error("block_size {0} is not supported: use 512 or 4096")]
    BlockSize(u32),
    /// SPC-5 7.7.6.6.5: an NAA IEEE Registered Extended designator starts with NAA 6h.
    #[error("naa must start with NAA type 6 (first byte 0x6_), got {0:#04x}")]
    NaaType(u8),
    /// SAM-5 4.7.7: flat space addressing reaches LUN 16383.
    #[error("lun_number {0} is above 16383")]
    LunNumber(u16),
    /// SPC-5 7.7.6.8: relative target port 0 is reserved.
    #[error("relative_port must not be 0")]
    RelativePort,
}

impl LunConfig {
    /// Checks what `LogicalUnit::new` relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.block_size != 512 && self.block_size != 4096 {
            return Err(ConfigError::BlockSize(self.block_size));
        }
        if self.naa[0] >> 4 != 6 {
            return Err(ConfigError::NaaType(self.naa[0]));
        }
        if self.lun_number > 0x3fff {
            return Err(ConfigError::LunNumber(self.lun_number));
        }
        if self.relative_port == 0 {
            return Err(ConfigError::RelativePort);
        }
        Ok(())
    }
}
