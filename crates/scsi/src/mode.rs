//! The mode pages a unit has, the caching (SBC-4 6.5.5), control (SPC-5
//! 7.5.10) and informational exceptions control (SPC-5 7.5.14) pages, and
//! the current values of what MODE SELECT (`mode_select`) can change: the
//! control page's SWP bit; no page can be saved. MODE SENSE builds the
//! pages (`mode_sense`).

use std::sync::atomic::{AtomicBool, Ordering};

/// Caching mode page code.
pub const CACHING_PAGE: u8 = 0x08;
/// Control mode page code.
pub const CONTROL_PAGE: u8 = 0x0a;
/// Informational exceptions control mode page code.
pub const INFORMATIONAL_EXCEPTIONS_PAGE: u8 = 0x1c;
/// Page code asking for every page.
pub const ALL_PAGES: u8 = 0x3f;
/// Subpage code asking for every subpage.
pub const ALL_SUBPAGES: u8 = 0xff;

/// Pages returned for ALL_PAGES, in ascending order.
pub(crate) const PAGES: [u8; 3] = [CACHING_PAGE, CONTROL_PAGE, INFORMATIONAL_EXCEPTIONS_PAGE];

/// Byte 4 of the control mode page: SWP, software write protect (SPC-5 7.5.10).
pub(crate) const CONTROL_SWP_BYTE: usize = 4;
/// The SWP bit in [`CONTROL_SWP_BYTE`].
pub(crate) const CONTROL_SWP_BIT: u8 = 0x08;

/// Current values of the changeable mode parameters (SPC-5 7.5), one set per
/// logical unit shared by every I_T nexus (the control page's TST=000b).
/// Not saved: a restart brings back the defaults.
#[derive(Debug, Default)]
pub(crate) struct ModeState {
    /// Control mode page SWP: the medium is write protected by software.
    software_write_protect: AtomicBool,
}

impl ModeState {
    /// Whether SWP is set.
    pub(crate) fn software_write_protect(&self) -> bool {
        self.software_write_protect.load(Ordering::Acquire)
    }

    /// Sets SWP; true if the value changed.
    pub(crate) fn set_software_write_protect(&self, on: bool) -> bool {
        self.software_write_protect.swap(on, Ordering::AcqRel) != on
    }
}

/// The pages MODE SENSE returns and MODE SELECT accepts, ascending.
pub(crate) fn is_supported_page(page: u8) -> bool {
    PAGES.contains(&page)
}
