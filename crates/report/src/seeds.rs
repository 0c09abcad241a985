//! The published evaluations ("seeds") the lab's plans reproduce, by
//! number, so that a report can say what "seed 001" means the first time
//! it names one.

/// (number, title, who and when) of every seed.
pub const SEEDS: [(&str, &str, &str); 5] = [
    (
        "000",
        "Reduce CPU Utilization by 10GbE CNA with Hardware iSCSI Offload",
        "Qsan Technology, 2012",
    ),
    (
        "001",
        "Windows Server 2008 R2 NIC Optimization and Best Practices with EqualLogic SAN",
        "Dell Storage Engineering, 2013",
    ),
    (
        "002",
        "Hardware Offloads: Comparative performance analysis",
        "OpenStack performance test plans",
    ),
    (
        "003",
        "Evaluation of the Chelsio T580-CR iSCSI Offload adapter",
        "Demartek, 2016",
    ),
    (
        "004",
        "10Gb iSCSI Initiators: Broadcom HBA vs. Intel Software Initiator with I/OAT",
        "Principled Technologies, 2009",
    ),
];

/// "seed 001, “Windows Server 2008 R2 NIC Optimization ...” (Dell ..., 2013)".
pub fn title(number: &str) -> Option<String> {
    SEEDS
        .iter()
        .find(|(n, _, _)| *n == number)
        .map(|(n, title, by)| format!("seed {n}, “{title}” ({by})"))
}

/// The seeds a plan reproduces, for the report's front matter; the
/// statistics always follow seed 001's, so it is named even when the plan
/// does not list it.
pub fn describe(numbers: &[String]) -> String {
    let mut all: Vec<&str> = numbers.iter().map(String::as_str).collect();
    if !all.contains(&"001") {
        all.push("001");
    }
    all.sort_unstable();
    all.dedup();
    let known: Vec<String> = all.iter().filter_map(|n| title(n)).collect();
    format!(
        "the published evaluations it rebuilds (\"seeds\"): {}. Seed 001's test sequence and \
         statistics are the base of every plan.",
        known.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_is_named_by_its_title_and_001_always_appears() {
        let text = describe(&["003".to_string()]);
        assert!(
            text.contains("seed 001, “Windows Server 2008 R2 NIC Optimization"),
            "{text}"
        );
        assert!(
            text.contains("seed 003, “Evaluation of the Chelsio T580-CR"),
            "{text}"
        );
        assert!(!text.contains("seed 000"), "{text}");
        assert_eq!(title("999"), None);
    }
}
