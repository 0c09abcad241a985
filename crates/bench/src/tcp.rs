//! TCP segment and retransmission counters from `/proc/net/snmp` and
//! `/proc/net/netstat`.
//!
//! The counters belong to the network namespace of the process that reads
//! them: in the lab's topologies, read them inside the namespace whose
//! traffic is measured.

use serde::{Deserialize, Serialize};

use crate::proc_error::ProcError;

const SNMP: &str = "/proc/net/snmp";
const NETSTAT: &str = "/proc/net/netstat";

/// TCP counters since boot (or since the namespace was made).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpCounters {
    /// Segments sent (`Tcp: OutSegs`), excluding retransmissions.
    pub out_segs: u64,
    /// Segments retransmitted (`Tcp: RetransSegs`).
    pub retrans_segs: u64,
    /// Segments carrying a D-SACK received (`TcpExt: TCPDSACKRecvSegs`, or
    /// `TCPDSACKRecv` on kernels before 5.10): the peer saying a
    /// retransmission was needless. On veth most retransmits are spurious
    /// reordering, and this shows it.
    pub dsack_recv_segs: u64,
}

/// The change in [`TcpCounters`] over a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct TcpDelta {
    /// Segments sent.
    pub out_segs: u64,
    /// Segments retransmitted.
    pub retrans_segs: u64,
    /// Segments carrying a D-SACK received.
    pub dsack_recv_segs: u64,
    /// retrans_segs / out_segs × 100; 0 when nothing was sent.
    pub retrans_pct: f64,
}

impl TcpCounters {
    /// Parses the texts of `/proc/net/snmp` and `/proc/net/netstat`.
    pub fn parse(snmp: &str, netstat: &str) -> Result<TcpCounters, ProcError> {
        let tcp = Section::find(SNMP, snmp, "Tcp:")?;
        let ext = Section::find(NETSTAT, netstat, "TcpExt:")?;
        let dsack_recv_segs = match ext.value("TCPDSACKRecvSegs") {
            Err(ProcError::Missing { .. }) => ext.value("TCPDSACKRecv")?,
            other => other?,
        };
        Ok(TcpCounters {
            out_segs: tcp.value("OutSegs")?,
            retrans_segs: tcp.value("RetransSegs")?,
            dsack_recv_segs,
        })
    }

    /// Reads and parses `/proc/net/snmp` and `/proc/net/netstat`.
    pub fn read() -> Result<TcpCounters, ProcError> {
        let snmp = ProcError::read_to_string(SNMP)?;
        let netstat = ProcError::read_to_string(NETSTAT)?;
        TcpCounters::parse(&snmp, &netstat)
    }

    /// The change from `self` to `later`. A counter that went backwards
    /// (a namespace was remade between the samples) counts as 0.
    pub fn delta(&self, later: &TcpCounters) -> TcpDelta {
        let out_segs = later.out_segs.saturating_sub(self.out_segs);
        let retrans_segs = later.retrans_segs.saturating_sub(self.retrans_segs);
        let retrans_pct = if out_segs == 0 {
            0.0
        } else {
            retrans_segs as f64 * 100.0 / out_segs as f64
        };
        TcpDelta {
            out_segs,
            retrans_segs,
            dsack_recv_segs: later.dsack_recv_segs.saturating_sub(self.dsack_recv_segs),
            retrans_pct,
        }
    }
}

/// One protocol's pair of lines: a header of names, then a line of values,
/// both starting with the same `Prefix:`.
struct Section<'a> {
    file: &'static str,
    prefix: &'static str,
    names: Vec<&'a str>,
    values: Vec<&'a str>,
}

impl<'a> Section<'a> {
    fn find(
        file: &'static str,
        text: &'a str,
        prefix: &'static str,
    ) -> Result<Section<'a>, ProcError> {
        let mut lines = text
            .lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .map(|rest| rest.split_whitespace().collect::<Vec<_>>());
        let names = lines
            .next()
            .ok_or_else(|| ProcError::missing(file, format!("the {prefix} header line")))?;
        let values = lines
            .next()
            .ok_or_else(|| ProcError::missing(file, format!("the {prefix} values line")))?;
        Ok(Section {
            file,
            prefix,
            names,
            values,
        })
    }

    fn value(&self, name: &str) -> Result<u64, ProcError> {
        let missing = || ProcError::missing(self.file, format!("{} {name}", self.prefix));
        let index = self
            .names
            .iter()
            .position(|n| *n == name)
            .ok_or_else(missing)?;
        let text = self.values.get(index).ok_or_else(missing)?;
        ProcError::parse_u64(self.file, name, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shaped like this machine's files (kernel 6.18), trimmed.
    const SNMP_A: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 2 64 22445868 0
Icmp: InMsgs InErrors
Icmp: 2 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 3184 3086 64 42 0 22445790 22441223 3225 0 119 0
Udp: InDatagrams NoPorts InErrors OutDatagrams
Udp: 76 0 0 78
";
    const SNMP_B: &str = "\
Ip: Forwarding DefaultTTL InReceives InHdrErrors
Ip: 2 64 23445868 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 3190 3092 64 42 4 23445790 22641223 3325 0 119 0
";
    const NETSTAT_A: &str = "\
TcpExt: SyncookiesSent TCPDSACKOldSent TCPDSACKRecv TCPDSACKOfoRecv TcpDuplicateDataRehash TCPDSACKRecvSegs TCPDSACKIgnoredDubious
TcpExt: 0 2750 2502 0 0 2974 0
IpExt: InNoRoutes InTruncatedPkts InOctets OutOctets
IpExt: 0 0 299371712745 299225071681
";
    const NETSTAT_B: &str = "\
TcpExt: SyncookiesSent TCPDSACKOldSent TCPDSACKRecv TCPDSACKOfoRecv TcpDuplicateDataRehash TCPDSACKRecvSegs TCPDSACKIgnoredDubious
TcpExt: 0 2760 2580 0 0 3054 0
IpExt: InNoRoutes InTruncatedPkts InOctets OutOctets
IpExt: 0 0 309371712745 309225071681
";

    #[test]
    fn parses_out_retrans_and_dsack_segs() {
        let c = TcpCounters::parse(SNMP_A, NETSTAT_A).unwrap();
        assert_eq!(
            c,
            TcpCounters {
                out_segs: 22441223,
                retrans_segs: 3225,
                dsack_recv_segs: 2974,
            }
        );
    }

    #[test]
    fn delta_and_retransmit_percentage() {
        let a = TcpCounters::parse(SNMP_A, NETSTAT_A).unwrap();
        let b = TcpCounters::parse(SNMP_B, NETSTAT_B).unwrap();
        let d = a.delta(&b);
        // out 22641223 - 22441223 = 200000; retrans 3325 - 3225 = 100;
        // DSACK segs 3054 - 2974 = 80; 100 / 200000 × 100 = 0.05%
        assert_eq!(d.out_segs, 200_000);
        assert_eq!(d.retrans_segs, 100);
        assert_eq!(d.dsack_recv_segs, 80);
        assert_eq!(d.retrans_pct, 0.05);
    }

    #[test]
    fn older_kernels_fall_back_to_tcp_dsack_recv() {
        let netstat = "TcpExt: TCPDSACKOldSent TCPDSACKRecv\nTcpExt: 1 77\n";
        let c = TcpCounters::parse(SNMP_A, netstat).unwrap();
        assert_eq!(c.dsack_recv_segs, 77);
    }

    #[test]
    fn nothing_sent_means_zero_percent_and_backwards_means_zero() {
        let a = TcpCounters {
            out_segs: 10,
            retrans_segs: 5,
            dsack_recv_segs: 3,
        };
        let d = a.delta(&a);
        assert_eq!(d, TcpDelta::default());
        let earlier = TcpCounters {
            out_segs: 1000,
            retrans_segs: 9,
            dsack_recv_segs: 9,
        };
        let d = earlier.delta(&a);
        assert_eq!((d.out_segs, d.retrans_segs, d.dsack_recv_segs), (0, 0, 0));
        assert_eq!(d.retrans_pct, 0.0);
    }

    #[test]
    fn counters_above_u32_parse() {
        let snmp = "Tcp: OutSegs RetransSegs\nTcp: 18446744073709551615 4294967296\n";
        let c = TcpCounters::parse(snmp, NETSTAT_A).unwrap();
        assert_eq!(c.out_segs, u64::MAX);
        assert_eq!(c.retrans_segs, 1 << 32);
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        // No values line.
        assert!(matches!(
            TcpCounters::parse("Tcp: OutSegs RetransSegs\n", NETSTAT_A),
            Err(ProcError::Missing { .. })
        ));
        // Values line shorter than the header.
        assert!(matches!(
            TcpCounters::parse("Tcp: OutSegs RetransSegs\nTcp: 5\n", NETSTAT_A),
            Err(ProcError::Missing { .. })
        ));
        // Not a number.
        assert!(matches!(
            TcpCounters::parse("Tcp: OutSegs RetransSegs\nTcp: 5 many\n", NETSTAT_A),
            Err(ProcError::BadNumber { .. })
        ));
        // No DSACK counter of either name.
        assert!(TcpCounters::parse(SNMP_A, "TcpExt: TW\nTcpExt: 1\n").is_err());
        assert!(TcpCounters::parse("", "").is_err());
        assert!(TcpCounters::parse(SNMP_A, "").is_err());
    }

    #[test]
    fn reads_this_machines_proc_files() {
        let a = TcpCounters::read().unwrap();
        let b = TcpCounters::read().unwrap();
        let d = a.delta(&b);
        assert!(d.retrans_pct >= 0.0);
    }
}
