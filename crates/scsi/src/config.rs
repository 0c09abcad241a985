//! What a logical unit says about itself: identity strings, designators, block size.

/// Configuration of one logical unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LunConfig {
    /// Refuse every command that would change the medium (DATA PROTECT).
    pub read_only: bool,
    /// Logical block length in bytes: 512 (default) or 4096.
    pub block_size: u32,
    /// Physical block length reported in READ CAPACITY (16) (LOGICAL BLOCKS
    /// PER PHYSICAL BLOCK EXPONENT): a power of two from `block_size` to
    /// 64 KiB; None: the logical block length (exponent 0).
    pub physical_block_size: Option<u32>,
    /// Bytes per second a SANITIZE OVERWRITE may write over the medium, so
    /// that it leaves bandwidth and CPU to the other units on the same disk
    /// and cores; None: as fast as the store takes them.
    pub sanitize_bytes_per_s: Option<u64>,
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
    /// The iSCSI name of the target the unit belongs to. With the relative
    /// target port of each command's I_T nexus it makes the SCSI name
    /// string of the target port, `<target name>,t,0x<tag>` (VPD page 83h);
    /// empty: no such designator.
    pub target_name: String,
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
            physical_block_size: None,
            sanitize_bytes_per_s: None,
            vendor: "ISOE".to_owned(),
            product: "MEMORY".to_owned(),
            revision: "0001".to_owned(),
            unit_serial: String::new(),
            naa: [0x60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            target_name: String::new(),
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
    /// The physical block is a power of two from the logical block to 64 KiB.
    #[error("physical_block_size {physical} must be a power of two from the block size {logical} to 65536")]
    PhysicalBlockSize {
        /// The physical block size asked for.
        physical: u32,
        /// The logical block size.
        logical: u32,
    },
    /// A sanitize rate of zero would never finish.
    #[error("sanitize_bytes_per_s must not be 0")]
    SanitizeRate,
    /// SAM-5 4.7.7: flat space addressing reaches LUN 16383.
    #[error("lun_number {0} is above 16383")]
    LunNumber(u16),
}

impl LunConfig {
    /// Checks what `LogicalUnit::new` relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.block_size != 512 && self.block_size != 4096 {
            return Err(ConfigError::BlockSize(self.block_size));
        }
        if let Some(physical) = self.physical_block_size {
            if !physical.is_power_of_two() || physical < self.block_size || physical > 1 << 16 {
                return Err(ConfigError::PhysicalBlockSize {
                    physical,
                    logical: self.block_size,
                });
            }
        }
        if self.sanitize_bytes_per_s == Some(0) {
            return Err(ConfigError::SanitizeRate);
        }
        if self.naa[0] >> 4 != 6 {
            return Err(ConfigError::NaaType(self.naa[0]));
        }
        if self.lun_number > 0x3fff {
            return Err(ConfigError::LunNumber(self.lun_number));
        }
        Ok(())
    }

    /// The NAA designator in 32 lower-case hex digits: the serial number
    /// reported when none is configured.
    pub fn naa_hex(&self) -> String {
        self.naa.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT (SBC-4 5.21.2).
    pub fn logical_blocks_per_physical_block_exponent(&self) -> u8 {
        let physical = self.physical_block_size.unwrap_or(self.block_size);
        (physical / self.block_size).max(1).trailing_zeros() as u8
    }
}
