//! The ublk kernel ABI: the structures and numbers of the kernel's
//! `include/uapi/linux/ublk_cmd.h`, written out by hand (`repr(C)`), as
//! Linux 6.12 has them. Later kernels append to [`UblkParams`]; the kernel
//! takes a shorter one (its `len` says how long) and leaves the rest unset.

#![allow(dead_code)] // the whole ABI is spelled out, not all of it used

/// `_IOC` of `<asm-generic/ioctl.h>`: direction, type, number, size.
const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    (dir << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;
const fn ior(nr: u8, size: usize) -> u32 {
    ioc(IOC_READ, b'u', nr, size)
}
const fn iowr(nr: u8, size: usize) -> u32 {
    ioc(IOC_READ | IOC_WRITE, b'u', nr, size)
}

const CTRL: usize = std::mem::size_of::<CtrlCmd>();
const IO: usize = std::mem::size_of::<IoCmd>();

// Control commands (on /dev/ublk-control, in an SQE128's 80-byte cmd).
pub const UBLK_U_CMD_GET_QUEUE_AFFINITY: u32 = ior(0x01, CTRL);
pub const UBLK_U_CMD_GET_DEV_INFO: u32 = ior(0x02, CTRL);
pub const UBLK_U_CMD_ADD_DEV: u32 = iowr(0x04, CTRL);
pub const UBLK_U_CMD_DEL_DEV: u32 = iowr(0x05, CTRL);
pub const UBLK_U_CMD_START_DEV: u32 = iowr(0x06, CTRL);
pub const UBLK_U_CMD_STOP_DEV: u32 = iowr(0x07, CTRL);
pub const UBLK_U_CMD_SET_PARAMS: u32 = iowr(0x08, CTRL);
pub const UBLK_U_CMD_GET_PARAMS: u32 = ior(0x09, CTRL);
pub const UBLK_U_CMD_START_USER_RECOVERY: u32 = iowr(0x10, CTRL);
pub const UBLK_U_CMD_END_USER_RECOVERY: u32 = iowr(0x11, CTRL);
pub const UBLK_U_CMD_GET_DEV_INFO2: u32 = ior(0x12, CTRL);
/// Since 6.5.
pub const UBLK_U_CMD_GET_FEATURES: u32 = ior(0x13, CTRL);
/// DEL_DEV without waiting for the device to be released (since 6.9).
pub const UBLK_U_CMD_DEL_DEV_ASYNC: u32 = ior(0x14, CTRL);

// I/O commands (on /dev/ublkcN, in a normal SQE's 16-byte cmd).
pub const UBLK_U_IO_FETCH_REQ: u32 = iowr(0x20, IO);
pub const UBLK_U_IO_COMMIT_AND_FETCH_REQ: u32 = iowr(0x21, IO);
pub const UBLK_U_IO_NEED_GET_DATA: u32 = iowr(0x22, IO);

/// A fetched request came (the CQE's res).
pub const UBLK_IO_RES_OK: i32 = 0;
pub const UBLK_IO_RES_NEED_GET_DATA: i32 = 1;
/// The device is going away: this tag will not be fetched again.
pub const UBLK_IO_RES_ABORT: i32 = -libc::ENODEV;

/// mmap offset of queue 0's descriptor array on /dev/ublkcN.
pub const UBLKSRV_CMD_BUF_OFFSET: i64 = 0;
/// With UBLK_F_USER_COPY, pread/pwrite on /dev/ublkcN at this offset plus
/// [`io_buf_pos`] reach a request's own pages.
pub const UBLKSRV_IO_BUF_OFFSET: u64 = 0x8000_0000;
/// Bits of the byte offset within one request, then of the tag, then of
/// the queue, in a user-copy position.
const UBLK_IO_BUF_BITS: u32 = 25;
const UBLK_TAG_BITS: u32 = 16;

/// The pread/pwrite position of byte `offset` of the request on `tag` of
/// queue `q_id` (user copy).
pub fn io_buf_pos(q_id: u16, tag: u16, offset: u32) -> u64 {
    UBLKSRV_IO_BUF_OFFSET
        + (u64::from(q_id) << (UBLK_IO_BUF_BITS + UBLK_TAG_BITS))
        + (u64::from(tag) << UBLK_IO_BUF_BITS)
        + u64::from(offset)
}

/// With UBLK_F_AUTO_BUF_REG, a FETCH or COMMIT_AND_FETCH carries in its
/// SQE's `addr` (not in the command) where the kernel registers the next
/// request's pages: an index into the ring's buffer table, and flags
/// (none: a failed registration fails the request).
pub fn auto_buf_reg_addr(index: u16) -> u64 {
    u64::from(index)
}
pub const UBLK_MAX_QUEUE_DEPTH: u16 = 4096;

// Device flags (ublksrv_ctrl_dev_info.flags; ADD_DEV returns what the
// kernel accepted).
pub const UBLK_F_SUPPORT_ZERO_COPY: u64 = 1 << 0;
pub const UBLK_F_URING_CMD_COMP_IN_TASK: u64 = 1 << 1;
pub const UBLK_F_NEED_GET_DATA: u64 = 1 << 2;
pub const UBLK_F_USER_RECOVERY: u64 = 1 << 3;
pub const UBLK_F_USER_RECOVERY_REISSUE: u64 = 1 << 4;
pub const UBLK_F_UNPRIVILEGED_DEV: u64 = 1 << 5;
pub const UBLK_F_CMD_IOCTL_ENCODE: u64 = 1 << 6;
pub const UBLK_F_USER_COPY: u64 = 1 << 7;
pub const UBLK_F_ZONED: u64 = 1 << 8;
// Later kernels only (6.13+); 6.12 clears them in ADD_DEV's answer.
pub const UBLK_F_USER_RECOVERY_FAIL_IO: u64 = 1 << 9;
pub const UBLK_F_UPDATE_SIZE: u64 = 1 << 10;
pub const UBLK_F_AUTO_BUF_REG: u64 = 1 << 11;
// 6.15 and 6.16: QUIESCE_DEV, an I/O served by any task of the queue, and
// zero-copy buffers registered from any task (6.18 sets the last two in
// ADD_DEV's answer of its own accord).
pub const UBLK_F_QUIESCE: u64 = 1 << 12;
pub const UBLK_F_PER_IO_DAEMON: u64 = 1 << 13;
pub const UBLK_F_BUF_REG_OFF_DAEMON: u64 = 1 << 14;

/// The flags' names, for `isoe attach --list` and logs.
pub const FLAG_NAMES: &[(u64, &str)] = &[
    (UBLK_F_SUPPORT_ZERO_COPY, "zero-copy"),
    (UBLK_F_URING_CMD_COMP_IN_TASK, "comp-in-task"),
    (UBLK_F_NEED_GET_DATA, "need-get-data"),
    (UBLK_F_USER_RECOVERY, "user-recovery"),
    (UBLK_F_USER_RECOVERY_REISSUE, "recovery-reissue"),
    (UBLK_F_UNPRIVILEGED_DEV, "unprivileged"),
    (UBLK_F_CMD_IOCTL_ENCODE, "ioctl-encode"),
    (UBLK_F_USER_COPY, "user-copy"),
    (UBLK_F_ZONED, "zoned"),
    (UBLK_F_USER_RECOVERY_FAIL_IO, "recovery-fail-io"),
    (UBLK_F_UPDATE_SIZE, "update-size"),
    (UBLK_F_AUTO_BUF_REG, "auto-buf-reg"),
    (UBLK_F_QUIESCE, "quiesce"),
    (UBLK_F_PER_IO_DAEMON, "per-io-daemon"),
    (UBLK_F_BUF_REG_OFF_DAEMON, "buf-reg-off-daemon"),
];

// Device states (ublksrv_ctrl_dev_info.state).
pub const UBLK_S_DEV_DEAD: u16 = 0;
pub const UBLK_S_DEV_LIVE: u16 = 1;
pub const UBLK_S_DEV_QUIESCED: u16 = 2;
/// 6.13+.
pub const UBLK_S_DEV_FAIL_IO: u16 = 3;

// Request operations (the low byte of ublksrv_io_desc.op_flags).
pub const UBLK_IO_OP_READ: u8 = 0;
pub const UBLK_IO_OP_WRITE: u8 = 1;
pub const UBLK_IO_OP_FLUSH: u8 = 2;
pub const UBLK_IO_OP_DISCARD: u8 = 3;
pub const UBLK_IO_OP_WRITE_SAME: u8 = 4;
pub const UBLK_IO_OP_WRITE_ZEROES: u8 = 5;

// Request flags (ublksrv_io_desc.op_flags, above the op byte).
pub const UBLK_IO_F_FAILFAST_DEV: u32 = 1 << 8;
pub const UBLK_IO_F_FAILFAST_TRANSPORT: u32 = 1 << 9;
pub const UBLK_IO_F_FAILFAST_DRIVER: u32 = 1 << 10;
pub const UBLK_IO_F_META: u32 = 1 << 11;
pub const UBLK_IO_F_FUA: u32 = 1 << 13;
pub const UBLK_IO_F_NOUNMAP: u32 = 1 << 15;
pub const UBLK_IO_F_SWAP: u32 = 1 << 16;

// ublk_param_basic.attrs.
pub const UBLK_ATTR_READ_ONLY: u32 = 1 << 0;
pub const UBLK_ATTR_ROTATIONAL: u32 = 1 << 1;
pub const UBLK_ATTR_VOLATILE_CACHE: u32 = 1 << 2;
pub const UBLK_ATTR_FUA: u32 = 1 << 3;

// ublk_params.types.
pub const UBLK_PARAM_TYPE_BASIC: u32 = 1 << 0;
pub const UBLK_PARAM_TYPE_DISCARD: u32 = 1 << 1;
pub const UBLK_PARAM_TYPE_DEVT: u32 = 1 << 2;
pub const UBLK_PARAM_TYPE_ZONED: u32 = 1 << 3;

/// `struct ublksrv_ctrl_cmd`: a control command's header, in the SQE.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CtrlCmd {
    pub dev_id: u32,
    /// u16::MAX when the command is not for one queue.
    pub queue_id: u16,
    /// Length of the buffer at `addr`.
    pub len: u16,
    pub addr: u64,
    pub data: [u64; 1],
    pub dev_path_len: u16,
    pub pad: u16,
    pub reserved: u32,
}

/// `struct ublksrv_ctrl_dev_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevInfo {
    pub nr_hw_queues: u16,
    pub queue_depth: u16,
    pub state: u16,
    pub pad0: u16,
    pub max_io_buf_bytes: u32,
    pub dev_id: u32,
    pub ublksrv_pid: i32,
    pub pad1: u32,
    pub flags: u64,
    /// For the server's own use; the kernel keeps it.
    pub ublksrv_flags: u64,
    pub owner_uid: u32,
    pub owner_gid: u32,
    pub reserved1: u64,
    pub reserved2: u64,
}

/// `struct ublksrv_io_desc`: one request, in the mmapped array, by tag.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoDesc {
    /// Operation in bits 0-7, flags above.
    pub op_flags: u32,
    pub nr_sectors: u32,
    pub start_sector: u64,
    pub addr: u64,
}

/// `struct ublksrv_io_cmd`: an I/O command, in the SQE.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCmd {
    pub q_id: u16,
    pub tag: u16,
    /// COMMIT_AND_FETCH_REQ: bytes done, or -errno.
    pub result: i32,
    /// The tag's buffer in our address space.
    pub addr: u64,
}

/// `struct ublk_param_basic`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamBasic {
    pub attrs: u32,
    pub logical_bs_shift: u8,
    pub physical_bs_shift: u8,
    pub io_opt_shift: u8,
    pub io_min_shift: u8,
    pub max_sectors: u32,
    pub chunk_sectors: u32,
    pub dev_sectors: u64,
    pub virt_boundary_mask: u64,
}

/// `struct ublk_param_discard`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamDiscard {
    /// Bytes.
    pub discard_alignment: u32,
    /// Bytes.
    pub discard_granularity: u32,
    pub max_discard_sectors: u32,
    pub max_write_zeroes_sectors: u32,
    pub max_discard_segments: u16,
    pub reserved0: u16,
}

/// `struct ublk_param_devt` (read-only: GET_PARAMS fills it).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamDevt {
    pub char_major: u32,
    pub char_minor: u32,
    pub disk_major: u32,
    pub disk_minor: u32,
}

/// `struct ublk_param_zoned`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamZoned {
    pub max_open_zones: u32,
    pub max_active_zones: u32,
    pub max_zone_append_sectors: u32,
    pub reserved: [u8; 20],
}

/// `struct ublk_params` as of Linux 6.12 (6.14 appends dma_align and
/// segment; a kernel reads no more than `len`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UblkParams {
    pub len: u32,
    pub types: u32,
    pub basic: ParamBasic,
    pub discard: ParamDiscard,
    pub devt: ParamDevt,
    pub zoned: ParamZoned,
}

// The kernel's sizes; a mistake here is a compile error.
const _: () = {
    use std::mem::size_of;
    assert!(size_of::<CtrlCmd>() == 32);
    assert!(size_of::<DevInfo>() == 64);
    assert!(size_of::<IoDesc>() == 24);
    assert!(size_of::<IoCmd>() == 16);
    assert!(size_of::<ParamBasic>() == 32);
    assert!(size_of::<ParamDiscard>() == 20);
    assert!(size_of::<ParamDevt>() == 16);
    assert!(size_of::<ParamZoned>() == 32);
    assert!(size_of::<UblkParams>() == 112);
};

/// What zero copy needs: the request's pages registered with the ring by
/// the kernel (6.16+), and reachable by pread/pwrite for the bytes that
/// are copied.
pub const ZERO_COPY_FLAGS: u64 = UBLK_F_SUPPORT_ZERO_COPY | UBLK_F_AUTO_BUF_REG | UBLK_F_USER_COPY;

impl CtrlCmd {
    /// The 80 bytes of an SQE128's command area: this header, then zeros.
    pub fn to_sqe_cmd(self) -> [u8; 80] {
        let mut out = [0u8; 80];
        out[0..4].copy_from_slice(&self.dev_id.to_ne_bytes());
        out[4..6].copy_from_slice(&self.queue_id.to_ne_bytes());
        out[6..8].copy_from_slice(&self.len.to_ne_bytes());
        out[8..16].copy_from_slice(&self.addr.to_ne_bytes());
        out[16..24].copy_from_slice(&self.data[0].to_ne_bytes());
        out[24..26].copy_from_slice(&self.dev_path_len.to_ne_bytes());
        out[26..28].copy_from_slice(&self.pad.to_ne_bytes());
        out[28..32].copy_from_slice(&self.reserved.to_ne_bytes());
        out
    }
}

impl IoCmd {
    /// The 16 bytes of a normal SQE's command area.
    pub fn to_sqe_cmd(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[0..2].copy_from_slice(&self.q_id.to_ne_bytes());
        out[2..4].copy_from_slice(&self.tag.to_ne_bytes());
        out[4..8].copy_from_slice(&self.result.to_ne_bytes());
        out[8..16].copy_from_slice(&self.addr.to_ne_bytes());
        out
    }
}

impl IoDesc {
    pub fn op(&self) -> u8 {
        (self.op_flags & 0xff) as u8
    }
}

/// Names of the set flags, comma-separated ("-" when none).
pub fn flag_names(flags: u64) -> String {
    let mut names: Vec<String> = FLAG_NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| (*name).to_string())
        .collect();
    let known = FLAG_NAMES.iter().fold(0, |acc, (bit, _)| acc | bit);
    if flags & !known != 0 {
        names.push(format!("{:#x}", flags & !known));
    }
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

/// A device state's name.
pub fn state_name(state: u16) -> &'static str {
    match state {
        UBLK_S_DEV_DEAD => "dead",
        UBLK_S_DEV_LIVE => "live",
        UBLK_S_DEV_QUIESCED => "quiesced",
        UBLK_S_DEV_FAIL_IO => "fail-io",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_match_the_kernel() {
        assert_eq!(size_of::<CtrlCmd>(), 32);
        assert_eq!(size_of::<DevInfo>(), 64);
        assert_eq!(size_of::<IoDesc>(), 24);
        assert_eq!(size_of::<IoCmd>(), 16);
        assert_eq!(size_of::<ParamBasic>(), 32);
        assert_eq!(size_of::<ParamDiscard>(), 20);
        assert_eq!(size_of::<ParamDevt>(), 16);
        assert_eq!(size_of::<ParamZoned>(), 32);
        assert_eq!(size_of::<UblkParams>(), 112);
    }

    #[test]
    fn field_offsets_match_the_kernel() {
        assert_eq!(offset_of!(CtrlCmd, queue_id), 4);
        assert_eq!(offset_of!(CtrlCmd, len), 6);
        assert_eq!(offset_of!(CtrlCmd, addr), 8);
        assert_eq!(offset_of!(CtrlCmd, data), 16);
        assert_eq!(offset_of!(CtrlCmd, dev_path_len), 24);
        assert_eq!(offset_of!(DevInfo, max_io_buf_bytes), 8);
        assert_eq!(offset_of!(DevInfo, dev_id), 12);
        assert_eq!(offset_of!(DevInfo, ublksrv_pid), 16);
        assert_eq!(offset_of!(DevInfo, flags), 24);
        assert_eq!(offset_of!(DevInfo, owner_uid), 40);
        assert_eq!(offset_of!(IoDesc, start_sector), 8);
        assert_eq!(offset_of!(IoDesc, addr), 16);
        assert_eq!(offset_of!(IoCmd, result), 4);
        assert_eq!(offset_of!(IoCmd, addr), 8);
        assert_eq!(offset_of!(ParamBasic, max_sectors), 8);
        assert_eq!(offset_of!(ParamBasic, dev_sectors), 16);
        assert_eq!(offset_of!(ParamBasic, virt_boundary_mask), 24);
        assert_eq!(offset_of!(ParamDiscard, max_discard_segments), 16);
        assert_eq!(offset_of!(UblkParams, basic), 8);
        assert_eq!(offset_of!(UblkParams, discard), 40);
        assert_eq!(offset_of!(UblkParams, devt), 60);
        assert_eq!(offset_of!(UblkParams, zoned), 76);
    }

    #[test]
    fn ioctl_encoded_opcodes() {
        // Values as the kernel's _IOR/_IOWR give them (x86-64, 'u').
        assert_eq!(UBLK_U_CMD_GET_QUEUE_AFFINITY, 0x8020_7501);
        assert_eq!(UBLK_U_CMD_GET_DEV_INFO, 0x8020_7502);
        assert_eq!(UBLK_U_CMD_ADD_DEV, 0xc020_7504);
        assert_eq!(UBLK_U_CMD_DEL_DEV, 0xc020_7505);
        assert_eq!(UBLK_U_CMD_START_DEV, 0xc020_7506);
        assert_eq!(UBLK_U_CMD_STOP_DEV, 0xc020_7507);
        assert_eq!(UBLK_U_CMD_SET_PARAMS, 0xc020_7508);
        assert_eq!(UBLK_U_CMD_GET_PARAMS, 0x8020_7509);
        assert_eq!(UBLK_U_CMD_START_USER_RECOVERY, 0xc020_7510);
        assert_eq!(UBLK_U_CMD_END_USER_RECOVERY, 0xc020_7511);
        assert_eq!(UBLK_U_CMD_GET_FEATURES, 0x8020_7513);
        assert_eq!(UBLK_U_CMD_DEL_DEV_ASYNC, 0x8020_7514);
        assert_eq!(UBLK_U_IO_FETCH_REQ, 0xc010_7520);
        assert_eq!(UBLK_U_IO_COMMIT_AND_FETCH_REQ, 0xc010_7521);
        assert_eq!(UBLK_U_IO_NEED_GET_DATA, 0xc010_7522);
    }

    #[test]
    fn sqe_command_bytes_are_the_struct_bytes() {
        let c = CtrlCmd {
            dev_id: 0x0102_0304,
            queue_id: u16::MAX,
            len: 64,
            addr: 0x1122_3344_5566_7788,
            data: [42],
            dev_path_len: 3,
            pad: 0,
            reserved: 0,
        };
        let bytes = c.to_sqe_cmd();
        // SAFETY: CtrlCmd is repr(C), 32 bytes with no padding (the
        // offsets test), so it may be viewed as bytes.
        let raw: [u8; 32] = unsafe { std::mem::transmute(c) };
        assert_eq!(&bytes[..32], &raw[..]);
        assert!(bytes[32..].iter().all(|&b| b == 0));

        let io = IoCmd {
            q_id: 0,
            tag: 7,
            result: -5,
            addr: 0xdead_beef,
        };
        // SAFETY: IoCmd is repr(C), 16 bytes with no padding.
        let raw: [u8; 16] = unsafe { std::mem::transmute(io) };
        assert_eq!(io.to_sqe_cmd(), raw);
    }

    #[test]
    fn names() {
        assert_eq!(flag_names(0), "-");
        assert_eq!(
            flag_names(UBLK_F_USER_RECOVERY | UBLK_F_CMD_IOCTL_ENCODE | (1 << 40)),
            "user-recovery,ioctl-encode,0x10000000000"
        );
        // What 6.18's GET_FEATURES answered in the test bed's VM.
        assert_eq!(
            flag_names(0x7fff),
            "zero-copy,comp-in-task,need-get-data,user-recovery,recovery-reissue,unprivileged,\
             ioctl-encode,user-copy,zoned,recovery-fail-io,update-size,auto-buf-reg,quiesce,\
             per-io-daemon,buf-reg-off-daemon"
        );
        assert_eq!(state_name(UBLK_S_DEV_QUIESCED), "quiesced");
    }
}
