//! Byte vectors from real captures: libiscsi's tools against tgt.
//!
//! How they were captured (Debian 12: tgt 1.0.85, libiscsi-bin 1.19.0, tshark 4.0.17,
//! on loopback):
//!
//! ```text
//! scripts/tgt-peer start 3261 64
//! tshark -i lo -f 'tcp port 3261' -w plain.pcap &
//! iscsi-ls -s iscsi://127.0.0.1:3261/
//! iscsi-inq iscsi://127.0.0.1:3261/iqn.2026-11.test:tgt/1
//! iscsi-readcapacity16 iscsi://127.0.0.1:3261/iqn.2026-11.test:tgt/1
//! # then, for the header-digest captures (hd.pcap, rw.pcap):
//! tgtadm -C 32767 --lld iscsi --mode target --op update --tid 1 --name HeaderDigest --value CRC32C,None
//! iscsi-ls -s 'iscsi://127.0.0.1:3261/?header_digest=crc32c'
//! iscsi-test-cu --dataloss --test=ALL.Write10.Simple iscsi://127.0.0.1:3261/iqn.2026-11.test:tgt/1
//! #   ... and ALL.iSCSITMF.LUNResetSimpleAsync, ALL.iSCSITMF.AbortTaskSimpleAsync,
//! #   iSCSI.iSCSIResiduals.Read10Residuals, iSCSI.iSCSIdatasn.iSCSIDataSnInvalid
//! ```
//!
//! Each TCP stream was reassembled from `tshark -T fields -e tcp.stream -e
//! tcp.srcport -e tcp.payload` and cut into PDUs by their BHS lengths (with a
//! 4-byte header digest after the final Login Response where HeaderDigest=CRC32C
//! was negotiated). libiscsi never offers DataDigest=CRC32C, so no vector has a
//! data digest; the header digests are real, and they are what pins down the
//! digest byte order (least significant byte first).
//!
//! Every vector must decode to exactly one frame, give the typed fields
//! asserted below, and re-encode to the same bytes.

use isoe_wire::digest;
use isoe_wire::frame::{decode, encode, Decoded, FrameLimits};
use isoe_wire::pdu::*;
use isoe_wire::Pdu;

/// iscsi-ls: discovery session Login Request (plain.pcap, stream 0, initiator PDU 0, 444 bytes).
const LOGIN_REQUEST_DISCOVERY: &str = "\
    438700000000018b80b5cbd400000000763e2423000000000a4f94f500000001\
    00000000000000000000000000000000496e69746961746f724e616d653d6971\
    6e2e323030372d31302e636f6d2e6769746875623a7361686c626572673a6c69\
    6269736373693a69736373692d6c730053657373696f6e547970653d44697363\
    6f76657279004865616465724469676573743d4e6f6e65004461746144696765\
    73743d4e6f6e6500496e697469616c5232543d4e6f00496d6d65646961746544\
    6174613d596573004d617842757273744c656e6774683d323632313434004669\
    72737442757273744c656e6774683d3236323134340044656661756c7454696d\
    6532576169743d320044656661756c7454696d653252657461696e3d30004d61\
    784f75747374616e64696e675232543d31004572726f725265636f766572794c\
    6576656c3d300049464d61726b65723d4e6f004f464d61726b65723d4e6f004d\
    6178436f6e6e656374696f6e733d31004d617852656376446174615365676d65\
    6e744c656e6774683d3236323134340044617461504455496e4f726465723d59\
    6573004461746153657175656e6365496e4f726465723d5965730000";

/// iscsi-ls: discovery session Login Response (plain.pcap, stream 0, target PDU 0, 348 bytes).
const LOGIN_RESPONSE_DISCOVERY: &str = "\
    238700000000012c80b5cbd400000100763e242300000000000000000a4f94f5\
    0a4f94f6000000000000000000000000546172676574506f7274616c47726f75\
    705461673d31004865616465724469676573743d4e6f6e650044617461446967\
    6573743d4e6f6e6500496e697469616c5232543d59657300496d6d6564696174\
    65446174613d596573004d617842757273744c656e6774683d32363231343400\
    466972737442757273744c656e6774683d36353533360044656661756c745469\
    6d6532576169743d320044656661756c7454696d653252657461696e3d30004d\
    61784f75747374616e64696e675232543d31004572726f725265636f76657279\
    4c6576656c3d300049464d61726b65723d4e6f004f464d61726b65723d4e6f00\
    4d6178436f6e6e656374696f6e733d310044617461504455496e4f726465723d\
    596573004461746153657175656e6365496e4f726465723d59657300";

/// iscsi-ls: Text Request SendTargets=All (plain.pcap, stream 0, initiator PDU 1, 64 bytes).
const TEXT_REQUEST_SEND_TARGETS: &str = "\
    44800000000000100000000000000000763e2424ffffffff0a4f94f500000001\
    0000000000000000000000000000000053656e64546172676574733d416c6c00";

/// iscsi-ls: Text Response listing the target (plain.pcap, stream 0, target PDU 1, 112 bytes).
const TEXT_RESPONSE_SEND_TARGETS: &str = "\
    248000000000003f0000000000000000763e2424ffffffff000000010a4f94f5\
    0a4f94f60000000000000000000000005461726765744e616d653d69716e2e32\
    3032362d31312e746573743a74677400546172676574416464726573733d3132\
    372e302e302e313a333236312c310000";

/// iscsi-ls: Logout Request closing the discovery session (plain.pcap, stream 0, initiator PDU 2, 48 bytes).
const LOGOUT_REQUEST: &str = "\
    46800000000000000000000000000000763e2425000000000a4f94f500000002\
    00000000000000000000000000000000";

/// iscsi-ls: Logout Response (plain.pcap, stream 0, target PDU 2, 48 bytes).
const LOGOUT_RESPONSE: &str = "\
    26800000000000000000000000000000763e242500000000000000020a4f94f5\
    0a4f94f6000000000000000000000000";

/// iscsi-inq: normal session Login Request (plain.pcap, stream 2, initiator PDU 0, 480 bytes).
const LOGIN_REQUEST_NORMAL: &str = "\
    43870000000001b080c4b0cc000000002ececa9000000000587868ce00000001\
    00000000000000000000000000000000496e69746961746f724e616d653d6971\
    6e2e323030372d31302e636f6d2e6769746875623a7361686c626572673a6c69\
    6269736373693a69736373692d696e71005461726765744e616d653d69716e2e\
    323032362d31312e746573743a7467740053657373696f6e547970653d4e6f72\
    6d616c004865616465724469676573743d4e6f6e652c43524333324300446174\
    614469676573743d4e6f6e6500496e697469616c5232543d4e6f00496d6d6564\
    69617465446174613d596573004d617842757273744c656e6774683d32363231\
    343400466972737442757273744c656e6774683d323632313434004465666175\
    6c7454696d6532576169743d320044656661756c7454696d653252657461696e\
    3d30004d61784f75747374616e64696e675232543d31004572726f725265636f\
    766572794c6576656c3d300049464d61726b65723d4e6f004f464d61726b6572\
    3d4e6f004d6178436f6e6e656374696f6e733d31004d61785265637644617461\
    5365676d656e744c656e6774683d3236323134340044617461504455496e4f72\
    6465723d596573004461746153657175656e6365496e4f726465723d59657300";

/// iscsi-inq: TEST UNIT READY (plain.pcap, stream 2, initiator PDU 1, 48 bytes).
const TEST_UNIT_READY: &str = "\
    018100000000000000010000000000002ececa9100000000587868ce00000001\
    00000000000000000000000000000000";

/// iscsi-inq: CHECK CONDITION, UNIT ATTENTION power on/reset (plain.pcap, stream 2, target PDU 1, 68 bytes).
const RESPONSE_UNIT_ATTENTION: &str = "\
    218000020000001400000000000000002ececa910000000000000001587868cf\
    5878694f0000000000000000000000000012700006000000000a000000002900\
    00000000";

/// iscsi-inq: GOOD (plain.pcap, stream 2, target PDU 2, 48 bytes).
const RESPONSE_GOOD: &str = "\
    218000000000000000000000000000002ececa920000000000000002587868d0\
    58786950000000000000000000000000";

/// iscsi-inq: INQUIRY, allocation length 64 (plain.pcap, stream 2, initiator PDU 3, 48 bytes).
const INQUIRY_64: &str = "\
    01c100000000000000010000000000002ececa9300000040587868d000000003\
    12000000400000000000000000000000";

/// iscsi-inq: INQUIRY data with status (S bit) (plain.pcap, stream 2, target PDU 3, 112 bytes).
const DATA_IN_INQUIRY_64: &str = "\
    258100000000004000000000000000002ececa93ffffffff00000003587868d1\
    58786951000000000000000000000000000005123d0000024945542020202020\
    5649525455414c2d4449534b2020202030303031000000000000000000000000\
    0000000000000000000004c009600300";

/// iscsi-inq: INQUIRY, allocation length 66 (plain.pcap, stream 2, initiator PDU 4, 48 bytes).
const INQUIRY_66: &str = "\
    01c100000000000000010000000000002ececa9400000042587868d100000004\
    12000000420000000000000000000000";

/// iscsi-inq: INQUIRY data of 66 bytes: 2 bytes of padding (plain.pcap, stream 2, target PDU 4, 116 bytes).
const DATA_IN_INQUIRY_66: &str = "\
    258100000000004200000000000000002ececa94ffffffff00000004587868d2\
    58786952000000000000000000000000000005123d0000024945542020202020\
    5649525455414c2d4449534b2020202030303031000000000000000000000000\
    0000000000000000000004c00960030000000000";

/// iscsi-readcapacity16: SERVICE ACTION IN(16) READ CAPACITY(16) (plain.pcap, stream 3, initiator PDU 3, 48 bytes).
const READ_CAPACITY_16: &str = "\
    01c1000000000000000100000000000006ba515e0000002022cc32f500000003\
    9e100000000000000000000000200000";

/// iscsi-readcapacity16: READ CAPACITY(16) data (plain.pcap, stream 3, target PDU 3, 80 bytes).
const DATA_IN_READ_CAPACITY_16: &str = "\
    2581000000000020000000000000000006ba515effffffff0000000322cc32f6\
    22cc3376000000000000000000000000000000000001ffff0000020000030000\
    00000000000000000000000000000000";

/// iscsi-test-cu: Login Response accepting HeaderDigest=CRC32C (rw.pcap, stream 1, target PDU 0, 352 bytes).
const HD_LOGIN_RESPONSE: &str = "\
    238700000000012e80393ce000001300049fdbdb00000000000000007b1ee78b\
    7b1ee78c000000000000000000000000546172676574506f7274616c47726f75\
    705461673d31004865616465724469676573743d435243333243004461746144\
    69676573743d4e6f6e6500496e697469616c5232543d59657300496d6d656469\
    617465446174613d596573004d617842757273744c656e6774683d3236323134\
    3400466972737442757273744c656e6774683d36353533360044656661756c74\
    54696d6532576169743d320044656661756c7454696d653252657461696e3d30\
    004d61784f75747374616e64696e675232543d31004572726f725265636f7665\
    72794c6576656c3d300049464d61726b65723d4e6f004f464d61726b65723d4e\
    6f004d6178436f6e6e656374696f6e733d310044617461504455496e4f726465\
    723d596573004461746153657175656e6365496e4f726465723d596573000000";

/// iscsi-test-cu Write10.Simple: WRITE(10) of one block as immediate data (rw.pcap, stream 1, initiator PDU 3, 564 bytes, header digest).
const HD_WRITE_10_IMMEDIATE: &str = "\
    01a10000000002000001000000000000049fdbde000002007b1ee78d00000003\
    2a0000000000000001000000000000008d0e6836a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6";

/// iscsi-test-cu: GOOD (rw.pcap, stream 1, target PDU 2, 52 bytes, header digest).
const HD_RESPONSE_GOOD: &str = "\
    21800000000000000000000000000000049fdbdd00000000000000027b1ee78d\
    7b1ee80d000000000000000000000000eb372a05";

/// iscsi-test-cu Write10.Simple: R2T past FirstBurstLength (rw.pcap, stream 1, target PDU 19, 52 bytes, header digest).
const HD_R2T: &str = "\
    31800000000000000001000000000000049fdbee408c7837000000137b1ee79e\
    7b1ee81e00000000000020000000020018311ea5";

/// iscsi-test-cu Write10.Simple: Data-Out answering that R2T (rw.pcap, stream 1, initiator PDU 20, 564 bytes, header digest).
const HD_DATA_OUT_FINAL: &str = "\
    05800000000002000001000000000000049fdbee408c78370000000000000014\
    00000000000000000000200000000000cc5cdb60a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6";

/// iscsi-test-cu DataSnInvalid: Data-Out without F (rw.pcap, stream 9, initiator PDU 4, 564 bytes, header digest).
const HD_DATA_OUT_NOT_FINAL: &str = "\
    050000000000020000010000000000001086f8e930f776370000000000000004\
    00000000000000000000000000000000db84643ea6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6\
    a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6";

/// iscsi-test-cu LUNResetSimpleAsync: LOGICAL UNIT RESET (rw.pcap, stream 3, initiator PDU 4, 52 bytes, header digest).
const HD_TMF_LUN_RESET: &str = "\
    428500000000000000010000000000004c6e301cffffffff3906745000000003\
    00000000000000000000000000000000f32da5ab";

/// iscsi-test-cu AbortTaskSimpleAsync: ABORT TASK (rw.pcap, stream 5, initiator PDU 4, 52 bytes, header digest).
const HD_TMF_ABORT_TASK: &str = "\
    42810000000000000001000000000000431cdf13431cdf1272fcc45900000003\
    72fcc458000000000000000000000000627f41cd";

/// iscsi-test-cu AbortTaskSimpleAsync: "task does not exist" (rw.pcap, stream 5, target PDU 4, 52 bytes, header digest).
const HD_TMF_RESPONSE_NO_TASK: &str = "\
    22800100000000000000000000000000431cdf13000000000000000472fcc459\
    72fcc4d9000000000000000000000000fe202e2e";

/// iscsi-test-cu Read10Residuals: READ(10) of one block, EDTL 0 (rw.pcap, stream 7, initiator PDU 3, 52 bytes, header digest).
const HD_READ_10: &str = "\
    01c1000000000000000100000000000070f8223e000000003bb2b58000000003\
    28000000000000000100000000000000a68df06f";

/// iscsi-test-cu Read10Residuals: GOOD with residual overflow 512 (rw.pcap, stream 7, target PDU 3, 52 bytes, header digest).
const HD_RESPONSE_OVERFLOW: &str = "\
    2184000000000000000000000000000070f8223e00000000000000033bb2b581\
    3bb2b60100000000000000000000020086e1a776";

/// iscsi-test-cu Read10Residuals: Data-In with status, underflow (rw.pcap, stream 7, target PDU 4, 564 bytes, header digest).
const HD_DATA_IN_UNDERFLOW: &str = "\
    2583000000000200000000000000000070f8223fffffffff000000043bb2b582\
    3bb2b60200000000000000000000251074cfad74000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000";

/// iscsi-test-cu Read10Residuals: Data-In with status, overflow (rw.pcap, stream 7, target PDU 5, 252 bytes, header digest).
const HD_DATA_IN_OVERFLOW: &str = "\
    25850000000000c8000000000000000070f82240ffffffff000000053bb2b583\
    3bb2b60300000000000000000000013868a47993000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    0000000000000000000000000000000000000000000000000000000000000000\
    00000000000000000000000000000000000000000000000000000000";

/// iscsi-test-cu: Logout Request (rw.pcap, stream 7, initiator PDU 8, 52 bytes, header digest).
const HD_LOGOUT_REQUEST: &str = "\
    4680000000000000000000000000000070f82243000000003bb2b58500000008\
    0000000000000000000000000000000011d03c60";

/// iscsi-test-cu: Logout Response (rw.pcap, stream 7, target PDU 8, 52 bytes, header digest).
const HD_LOGOUT_RESPONSE: &str = "\
    2680000000000000000000000000000070f8224300000000000000083bb2b585\
    3bb2b60500000000000000000000000032ae3b8e";

/// iscsi-ls -s: REPORT LUNS, allocation length 16 (hd.pcap, stream 1, initiator PDU 1, 52 bytes, header digest).
const HD_REPORT_LUNS: &str = "\
    01c10000000000000000000000000000461428f7000000100f97087300000001\
    a000000000000000001000000000000065688eab";

/// iscsi-ls -s: REPORT LUNS data listing LUNs 0 and 1 (hd.pcap, stream 1, target PDU 2, 76 bytes, header digest).
const HD_DATA_IN_REPORT_LUNS: &str = "\
    25810000000000180000000000000000461428f8ffffffff000000020f970875\
    0f9708f5000000000000000000000000b45ab3f0000000100000000000000000\
    000000000001000000000000";

/// iscsi-ls -s: READ CAPACITY(10) data (hd.pcap, stream 1, target PDU 9, 60 bytes, header digest).
const HD_DATA_IN_READ_CAPACITY_10: &str = "\
    25810000000000080000000000000000461428ffffffffff000000090f97087c\
    0f9708fc000000000000000000000000908259e40001ffff00000200";
fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// Limits for the Full Feature Phase of the captured sessions.
fn ffp(header_digest: bool) -> FrameLimits {
    FrameLimits {
        max_recv_data_segment_length: 262_144,
        header_digest,
        data_digest: false,
        crc: digest::Crc32cImpl::Hardware,
    }
}

/// Decodes one captured PDU, checks it fills the vector exactly and re-encodes
/// to the same bytes; returns the typed BHS and the data segment.
fn check(vector: &str, limits: FrameLimits) -> (Pdu, Vec<u8>) {
    let bytes = hex(vector);
    let (frame, len) = match decode(&bytes, &limits) {
        Ok(Decoded::Frame { frame, len }) => (frame, len),
        other => panic!("captured PDU did not decode: {other:?}"),
    };
    assert_eq!(len, bytes.len(), "frame length");
    let pdu = frame.pdu().expect("captured BHS parses");
    let mut again = Vec::new();
    encode(&mut again, &pdu, frame.ahs, frame.data, &limits);
    assert_eq!(again, bytes, "re-encoding {pdu:?}");
    if limits.header_digest {
        // The captured digest is the CRC32C of the BHS, least significant byte first.
        let crc = digest::crc32c(&bytes[..48]);
        assert_eq!(&bytes[48..52], &crc.to_le_bytes());
        assert_ne!(&bytes[48..52], &crc.to_be_bytes());
    }
    (pdu, frame.data.to_vec())
}

/// The key=value pairs of a text or login data segment (RFC 7143 §6.1).
fn keys(data: &[u8]) -> Vec<(String, String)> {
    data.split(|&b| b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let kv = std::str::from_utf8(kv).expect("UTF-8 key");
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn key<'a>(pairs: &'a [(String, String)], name: &str) -> &'a str {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no key {name}"))
}

fn cdb(bytes: &[u8]) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[..bytes.len()].copy_from_slice(bytes);
    cdb
}

#[test]
fn discovery_login_request() {
    let (pdu, data) = check(LOGIN_REQUEST_DISCOVERY, FrameLimits::LOGIN);
    assert_eq!(
        pdu,
        Pdu::LoginRequest(LoginRequest {
            transit: true,
            continue_bit: false,
            csg: stage::OPERATIONAL,
            nsg: stage::FULL_FEATURE,
            version_max: 0,
            version_min: 0,
            isid: [0x80, 0xb5, 0xcb, 0xd4, 0x00, 0x00],
            tsih: 0,
            initiator_task_tag: 0x763e_2423,
            cid: 0,
            cmd_sn: 0x0a4f_94f5,
            exp_stat_sn: 1,
        })
    );
    let kv = keys(&data);
    assert_eq!(
        key(&kv, "InitiatorName"),
        "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-ls"
    );
    assert_eq!(key(&kv, "SessionType"), "Discovery");
    assert_eq!(key(&kv, "HeaderDigest"), "None");
    assert_eq!(key(&kv, "MaxRecvDataSegmentLength"), "262144");
    assert_eq!(kv.len(), 18);
}

#[test]
fn discovery_login_response() {
    let (pdu, data) = check(LOGIN_RESPONSE_DISCOVERY, FrameLimits::LOGIN);
    assert_eq!(
        pdu,
        Pdu::LoginResponse(LoginResponse {
            transit: true,
            continue_bit: false,
            csg: stage::OPERATIONAL,
            nsg: stage::FULL_FEATURE,
            version_max: 0,
            version_active: 0,
            isid: [0x80, 0xb5, 0xcb, 0xd4, 0x00, 0x00],
            tsih: 0x0100,
            initiator_task_tag: 0x763e_2423,
            stat_sn: 0,
            exp_cmd_sn: 0x0a4f_94f5,
            max_cmd_sn: 0x0a4f_94f6,
            status_class: login_status::SUCCESS,
            status_detail: 0,
        })
    );
    let kv = keys(&data);
    assert_eq!(key(&kv, "TargetPortalGroupTag"), "1");
    assert_eq!(key(&kv, "FirstBurstLength"), "65536");
}

#[test]
fn send_targets_text_request() {
    let (pdu, data) = check(TEXT_REQUEST_SEND_TARGETS, ffp(false));
    assert_eq!(
        pdu,
        Pdu::TextRequest(TextRequest {
            immediate: true,
            final_bit: true,
            continue_bit: false,
            lun: Lun::default(),
            initiator_task_tag: 0x763e_2424,
            target_transfer_tag: RESERVED_TAG,
            cmd_sn: 0x0a4f_94f5,
            exp_stat_sn: 1,
        })
    );
    assert_eq!(data, b"SendTargets=All\0");
}

#[test]
fn send_targets_text_response() {
    let (pdu, data) = check(TEXT_RESPONSE_SEND_TARGETS, ffp(false));
    assert_eq!(
        pdu,
        Pdu::TextResponse(TextResponse {
            final_bit: true,
            continue_bit: false,
            lun: Lun::default(),
            initiator_task_tag: 0x763e_2424,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: 1,
            exp_cmd_sn: 0x0a4f_94f5,
            max_cmd_sn: 0x0a4f_94f6,
        })
    );
    // 63 bytes of data: one byte of padding on the wire.
    assert_eq!(data.len(), 63);
    let kv = keys(&data);
    assert_eq!(key(&kv, "TargetName"), "iqn.2026-11.test:tgt");
    assert_eq!(key(&kv, "TargetAddress"), "127.0.0.1:3261,1");
}

#[test]
fn discovery_logout() {
    let (pdu, _) = check(LOGOUT_REQUEST, ffp(false));
    assert_eq!(
        pdu,
        Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason_code: logout::LogoutReason::CloseSession,
            initiator_task_tag: 0x763e_2425,
            cid: 0,
            cmd_sn: 0x0a4f_94f5,
            exp_stat_sn: 2,
        })
    );
    let (pdu, _) = check(LOGOUT_RESPONSE, ffp(false));
    assert_eq!(
        pdu,
        Pdu::LogoutResponse(LogoutResponse {
            response: logout::LogoutResponseCode::Closed,
            initiator_task_tag: 0x763e_2425,
            stat_sn: 2,
            exp_cmd_sn: 0x0a4f_94f5,
            max_cmd_sn: 0x0a4f_94f6,
            time2wait: 0,
            time2retain: 0,
        })
    );
}

#[test]
fn normal_login_request_names_the_target() {
    let (pdu, data) = check(LOGIN_REQUEST_NORMAL, FrameLimits::LOGIN);
    let Pdu::LoginRequest(req) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!(
        (req.csg, req.nsg, req.transit),
        (stage::OPERATIONAL, stage::FULL_FEATURE, true)
    );
    assert_eq!(req.isid, [0x80, 0xc4, 0xb0, 0xcc, 0x00, 0x00]);
    let kv = keys(&data);
    assert_eq!(key(&kv, "TargetName"), "iqn.2026-11.test:tgt");
    assert_eq!(key(&kv, "SessionType"), "Normal");
    assert_eq!(key(&kv, "HeaderDigest"), "None,CRC32C");
}

#[test]
fn test_unit_ready_and_unit_attention() {
    let (pdu, _) = check(TEST_UNIT_READY, ffp(false));
    assert_eq!(
        pdu,
        Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: true,
            read: false,
            write: false,
            attr: 1,
            lun: Lun::from_number(1),
            initiator_task_tag: 0x2ece_ca91,
            expected_data_transfer_length: 0,
            cmd_sn: 0x5878_68ce,
            exp_stat_sn: 1,
            cdb: [0; 16],
        })
    );
    let (pdu, sense) = check(RESPONSE_UNIT_ATTENTION, ffp(false));
    assert_eq!(
        pdu,
        Pdu::ScsiResponse(ScsiResponse {
            response: 0,
            status: 0x02, // CHECK CONDITION
            initiator_task_tag: 0x2ece_ca91,
            stat_sn: 1,
            exp_cmd_sn: 0x5878_68cf,
            max_cmd_sn: 0x5878_694f,
            ..Default::default()
        })
    );
    // RFC 7143 §11.4.7.2: SenseLength (2 bytes), then fixed-format sense:
    // UNIT ATTENTION (6), ASC 0x29 (power on, reset, or bus device reset).
    assert_eq!(u16::from_be_bytes([sense[0], sense[1]]), 18);
    assert_eq!((sense[2], sense[4] & 0x0f, sense[14]), (0x70, 0x06, 0x29));
    let (pdu, data) = check(RESPONSE_GOOD, ffp(false));
    assert!(data.is_empty());
    assert!(matches!(
        pdu,
        Pdu::ScsiResponse(ScsiResponse {
            status: 0,
            stat_sn: 2,
            ..
        })
    ));
}

#[test]
fn inquiry_and_its_data_in() {
    let (pdu, _) = check(INQUIRY_64, ffp(false));
    let Pdu::ScsiCommand(cmd) = pdu else {
        panic!("{pdu:?}")
    };
    assert!(cmd.read && cmd.final_bit && !cmd.write);
    assert_eq!(cmd.expected_data_transfer_length, 64);
    assert_eq!(cmd.cdb, cdb(&[0x12, 0, 0, 0, 0x40, 0]));
    let (pdu, data) = check(DATA_IN_INQUIRY_64, ffp(false));
    assert_eq!(
        pdu,
        Pdu::DataIn(DataIn {
            final_bit: true,
            acknowledge: false,
            overflow: false,
            underflow: false,
            status_present: true,
            status: 0,
            lun: Lun::default(),
            initiator_task_tag: 0x2ece_ca93,
            target_transfer_tag: RESERVED_TAG,
            stat_sn: 3,
            exp_cmd_sn: 0x5878_68d1,
            max_cmd_sn: 0x5878_6951,
            data_sn: 0,
            buffer_offset: 0,
            residual_count: 0,
        })
    );
    assert_eq!(data.len(), 64);
    assert_eq!(&data[8..16], b"IET     ");
    assert_eq!(&data[16..32], b"VIRTUAL-DISK    ");
}

#[test]
fn data_in_with_two_bytes_of_padding() {
    let (pdu, _) = check(INQUIRY_66, ffp(false));
    assert!(matches!(
        pdu,
        Pdu::ScsiCommand(ScsiCommand {
            expected_data_transfer_length: 66,
            ..
        })
    ));
    let (pdu, data) = check(DATA_IN_INQUIRY_66, ffp(false));
    assert!(matches!(
        pdu,
        Pdu::DataIn(DataIn {
            status_present: true,
            initiator_task_tag: 0x2ece_ca94,
            ..
        })
    ));
    assert_eq!(data.len(), 66);
    assert_eq!(hex(DATA_IN_INQUIRY_66).len(), 48 + 68);
}

#[test]
fn read_capacity_16() {
    let (pdu, _) = check(READ_CAPACITY_16, ffp(false));
    let Pdu::ScsiCommand(cmd) = pdu else {
        panic!("{pdu:?}")
    };
    // SERVICE ACTION IN(16) / READ CAPACITY(16), allocation length 32.
    assert_eq!(
        cmd.cdb,
        cdb(&[0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0])
    );
    assert_eq!(cmd.lun, Lun::from_number(1));
    let (pdu, data) = check(DATA_IN_READ_CAPACITY_16, ffp(false));
    assert!(matches!(
        pdu,
        Pdu::DataIn(DataIn {
            final_bit: true,
            status_present: true,
            status: 0,
            ..
        })
    ));
    // 64 MiB of 512-byte blocks: last LBA 131071.
    assert_eq!(u64::from_be_bytes(data[0..8].try_into().unwrap()), 131_071);
    assert_eq!(u32::from_be_bytes(data[8..12].try_into().unwrap()), 512);
}

#[test]
fn login_response_accepting_header_digest() {
    let (pdu, data) = check(HD_LOGIN_RESPONSE, FrameLimits::LOGIN);
    assert!(matches!(
        pdu,
        Pdu::LoginResponse(LoginResponse {
            transit: true,
            nsg: 3,
            tsih: 0x1300,
            ..
        })
    ));
    assert_eq!(key(&keys(&data), "HeaderDigest"), "CRC32C");
}

#[test]
fn write_10_with_immediate_data_and_header_digest() {
    let (pdu, data) = check(HD_WRITE_10_IMMEDIATE, ffp(true));
    assert_eq!(
        pdu,
        Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: true,
            read: false,
            write: true,
            attr: 1,
            lun: Lun::from_number(1),
            initiator_task_tag: 0x049f_dbde,
            expected_data_transfer_length: 512,
            cmd_sn: 0x7b1e_e78d,
            exp_stat_sn: 3,
            cdb: cdb(&[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0]),
        })
    );
    assert_eq!(data, vec![0xa6; 512]);
    let (pdu, _) = check(HD_RESPONSE_GOOD, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::ScsiResponse(ScsiResponse {
            status: 0,
            response: 0,
            ..
        })
    ));
}

#[test]
fn r2t_and_the_data_out_answering_it() {
    let (pdu, _) = check(HD_R2T, ffp(true));
    assert_eq!(
        pdu,
        Pdu::R2t(R2t {
            lun: Lun::from_number(1),
            initiator_task_tag: 0x049f_dbee,
            target_transfer_tag: 0x408c_7837,
            stat_sn: 0x13,
            exp_cmd_sn: 0x7b1e_e79e,
            max_cmd_sn: 0x7b1e_e81e,
            r2t_sn: 0,
            buffer_offset: 0x2000,
            desired_data_transfer_length: 0x200,
        })
    );
    let (pdu, data) = check(HD_DATA_OUT_FINAL, ffp(true));
    assert_eq!(
        pdu,
        Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_number(1),
            initiator_task_tag: 0x049f_dbee,
            target_transfer_tag: 0x408c_7837,
            exp_stat_sn: 0x14,
            data_sn: 0,
            buffer_offset: 0x2000,
        })
    );
    assert_eq!(data.len(), 512);
    let (pdu, _) = check(HD_DATA_OUT_NOT_FINAL, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::DataOut(DataOut {
            final_bit: false,
            buffer_offset: 0,
            ..
        })
    ));
}

#[test]
fn task_management() {
    let (pdu, _) = check(HD_TMF_LUN_RESET, ffp(true));
    assert_eq!(
        pdu,
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function: tmf::TmfFunction::LogicalUnitReset,
            lun: Lun::from_number(1),
            initiator_task_tag: 0x4c6e_301c,
            referenced_task_tag: RESERVED_TAG,
            cmd_sn: 0x3906_7450,
            exp_stat_sn: 3,
            ref_cmd_sn: 0,
            exp_data_sn: 0,
        })
    );
    let (pdu, _) = check(HD_TMF_ABORT_TASK, ffp(true));
    assert_eq!(
        pdu,
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function: tmf::TmfFunction::AbortTask,
            lun: Lun::from_number(1),
            initiator_task_tag: 0x431c_df13,
            referenced_task_tag: 0x431c_df12,
            cmd_sn: 0x72fc_c459,
            exp_stat_sn: 3,
            ref_cmd_sn: 0x72fc_c458,
            exp_data_sn: 0,
        })
    );
    let (pdu, _) = check(HD_TMF_RESPONSE_NO_TASK, ffp(true));
    assert_eq!(
        pdu,
        Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: tmf::TmfResponse::NoTask,
            initiator_task_tag: 0x431c_df13,
            stat_sn: 4,
            exp_cmd_sn: 0x72fc_c459,
            max_cmd_sn: 0x72fc_c4d9,
        })
    );
}

#[test]
fn residuals() {
    let (pdu, _) = check(HD_READ_10, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::ScsiCommand(ScsiCommand {
            read: true,
            expected_data_transfer_length: 0,
            cdb: [0x28, ..],
            ..
        })
    ));
    // READ(10) of one block with EDTL 0: the whole block is residual overflow.
    let (pdu, _) = check(HD_RESPONSE_OVERFLOW, ffp(true));
    assert_eq!(
        pdu,
        Pdu::ScsiResponse(ScsiResponse {
            overflow: true,
            initiator_task_tag: 0x70f8_223e,
            stat_sn: 3,
            exp_cmd_sn: 0x3bb2_b581,
            max_cmd_sn: 0x3bb2_b601,
            residual_count: 512,
            ..Default::default()
        })
    );
    let (pdu, data) = check(HD_DATA_IN_UNDERFLOW, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::DataIn(DataIn {
            final_bit: true,
            underflow: true,
            overflow: false,
            status_present: true,
            residual_count: 9488,
            ..
        })
    ));
    assert_eq!(data.len(), 512);
    let (pdu, data) = check(HD_DATA_IN_OVERFLOW, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::DataIn(DataIn {
            overflow: true,
            underflow: false,
            status_present: true,
            residual_count: 312,
            ..
        })
    ));
    assert_eq!(data.len(), 200);
}

#[test]
fn logout_with_header_digest() {
    let (pdu, _) = check(HD_LOGOUT_REQUEST, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason_code: LogoutReason::CloseSession,
            exp_stat_sn: 8,
            ..
        })
    ));
    let (pdu, _) = check(HD_LOGOUT_RESPONSE, ffp(true));
    assert!(matches!(
        pdu,
        Pdu::LogoutResponse(LogoutResponse {
            response: LogoutResponseCode::Closed,
            stat_sn: 8,
            ..
        })
    ));
}

#[test]
fn report_luns_and_read_capacity_10() {
    let (pdu, _) = check(HD_REPORT_LUNS, ffp(true));
    let Pdu::ScsiCommand(cmd) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!(cmd.lun, Lun::from_number(0));
    assert_eq!(cmd.cdb, cdb(&[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0]));
    let (_, data) = check(HD_DATA_IN_REPORT_LUNS, ffp(true));
    // LUN list length 16: LUN 0 and LUN 1.
    assert_eq!(u32::from_be_bytes(data[0..4].try_into().unwrap()), 16);
    assert_eq!(Lun(data[8..16].try_into().unwrap()).number(), Some(0));
    assert_eq!(Lun(data[16..24].try_into().unwrap()).number(), Some(1));
    let (_, data) = check(HD_DATA_IN_READ_CAPACITY_10, ffp(true));
    assert_eq!(data, [0x00, 0x01, 0xff, 0xff, 0x00, 0x00, 0x02, 0x00]);
}

/// The initiator's side of the Write10.Simple connection, replayed as one
/// stream and fed a byte at a time, yields the same frames.
#[test]
fn captured_stream_byte_by_byte() {
    let vectors = [
        HD_WRITE_10_IMMEDIATE,
        HD_DATA_OUT_FINAL,
        HD_DATA_OUT_NOT_FINAL,
        HD_READ_10,
        HD_LOGOUT_REQUEST,
    ];
    let stream: Vec<u8> = vectors.iter().flat_map(|v| hex(v)).collect();
    let limits = ffp(true);
    let mut buf = Vec::new();
    let mut seen = Vec::new();
    for &b in &stream {
        buf.push(b);
        if let Decoded::Frame { frame, len } = decode(&buf, &limits).expect("valid stream") {
            seen.push(frame.pdu().unwrap().opcode());
            buf.drain(..len);
        }
    }
    assert!(buf.is_empty());
    assert_eq!(
        seen,
        [
            Opcode::ScsiCommand,
            Opcode::DataOut,
            Opcode::DataOut,
            Opcode::ScsiCommand,
            Opcode::LogoutRequest
        ]
    );
}

/// A single flipped bit in a captured header is caught by its real digest.
#[test]
fn captured_header_digest_catches_corruption() {
    let mut bytes = hex(HD_R2T);
    bytes[40] ^= 0x01;
    assert!(matches!(
        decode(&bytes, &ffp(true)),
        Err(isoe_wire::frame::FrameError::HeaderDigest { .. })
    ));
}
