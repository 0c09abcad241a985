//! A link knob whose program is missing is an error, not a run without the
//! knob: `Topology::apply` refuses before changing anything, and the runner
//! skips the case instead of measuring noise as its effect.
//!
//! Its own test binary: it makes ethtool and tc look missing for the whole
//! process (`ISOE_LAB_PRETEND_MISSING`), which would mislead other tests.
//! Needs root (namespaces); skipped otherwise, unless CI is set.

use isoe_lab::link::LinkKnobs;
use isoe_lab::netcmd;
use isoe_lab::topology::{Kind, MissingProgram, Options, Topology};

fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && netcmd::find_program("ip").is_some() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: CI runs as root with iproute2"
    );
    eprintln!("SKIPPED {test}: network namespaces need root and ip");
    false
}

#[test]
fn offloads_without_ethtool_and_a_rate_without_tc_are_refused() {
    let test = "offloads_without_ethtool_and_a_rate_without_tc_are_refused";
    if !root_or_skip(test) {
        return;
    }
    // The only test in this binary: no other thread reads the environment.
    std::env::set_var(netcmd::PRETEND_MISSING_ENV, "ethtool,tc");
    assert!(netcmd::find_program("ethtool").is_none());

    let lo = Topology::create(Kind::Loopback, Options::default()).unwrap();
    let mut knobs = LinkKnobs {
        mtu: Some(9000),
        ..LinkKnobs::default()
    };
    knobs.initiator.tso = Some(false);
    knobs.target.tso = Some(false);
    let refused = lo.apply(&knobs).unwrap_err();
    assert_eq!(
        refused,
        MissingProgram {
            program: "ethtool",
            package: "ethtool",
            knobs: vec!["initiator.tso".into(), "target.tso".into()],
        }
    );
    assert_eq!(
        refused.to_string(),
        "ethtool is not installed (Debian package ethtool), so initiator.tso, target.tso \
         cannot be applied"
    );
    // Nothing changed: lo keeps its MTU; without offloads the rest applies.
    let mtu = |t: &Topology| {
        let ns = t.namespaces()[0].clone();
        netcmd::run(&netcmd::addr_show_json(&ns)).unwrap()
    };
    assert!(!mtu(&lo).contains("\"mtu\":9000"), "{}", mtu(&lo));
    knobs.initiator.tso = None;
    knobs.target.tso = None;
    let applied = lo.apply(&knobs).unwrap();
    assert!(applied.iter().all(|a| a.outcome.is_ok()), "{applied:?}");
    lo.destroy().unwrap();

    let base = Topology::create(Kind::Base, Options::default()).unwrap();
    let rate = LinkKnobs {
        rate_mbit: Some(100),
        ..LinkKnobs::default()
    };
    let refused = base.apply(&rate).unwrap_err();
    assert_eq!(refused.program, "tc");
    assert_eq!(refused.package, "iproute2");
    base.destroy().unwrap();
    std::env::remove_var(netcmd::PRETEND_MISSING_ENV);
}
