use super::*;
use crate::install::{AptError, FioBuildError};
use crate::plan::Plan;
use std::cell::RefCell;
use std::path::PathBuf;

/// A machine made up: what it has; installing adds to it.
#[derive(Debug, Default)]
struct Fake {
    root: bool,
    programs: RefCell<Vec<String>>,
    fio: RefCell<bool>,
    namespaces_refused: Option<CommandError>,
}

/// Everything the lab can use, as root.
const ALL: &[&str] = &["ip", "tc", "ethtool", "tgtd", "tgtadm", "apt-get"];

fn machine(root: bool, programs: &[&str], fio: bool) -> Fake {
    Fake {
        root,
        programs: RefCell::new(programs.iter().map(|p| p.to_string()).collect()),
        fio: RefCell::new(fio),
        namespaces_refused: None,
    }
}

fn without(programs: &[&str]) -> Vec<&'static str> {
    ALL.iter()
        .copied()
        .filter(|p| !programs.contains(p))
        .collect()
}

impl Machine for Fake {
    fn root(&self) -> bool {
        self.root
    }
    fn program(&self, program: &str) -> bool {
        self.programs.borrow().iter().any(|p| p == program)
    }
    fn fio_libiscsi(&self) -> Result<(), FioUnusable> {
        if *self.fio.borrow() {
            Ok(())
        } else {
            Err(FioUnusable::NotBuilt {
                place: "/cache/fio-libiscsi/fio".into(),
            })
        }
    }
    fn namespaces(&self) -> Result<(), CommandError> {
        self.namespaces_refused.clone().map_or(Ok(()), Err)
    }
}

/// Installs into a [`Fake`], recording what it was asked.
struct FakeInstaller<'a> {
    machine: &'a Fake,
    asked: Vec<String>,
    fail: bool,
}

impl Installer for FakeInstaller<'_> {
    fn apt_install(&mut self, packages: &[&str]) -> Result<(), AptError> {
        self.asked.push(format!("apt {}", packages.join(" ")));
        if self.fail {
            return Err(AptError::Install {
                status: std::os::unix::process::ExitStatusExt::from_raw(100 << 8),
                said: "E: Could not get lock".into(),
            });
        }
        for p in packages {
            let programs: &[&str] = match *p {
                "iproute2" => &["ip", "tc"],
                "tgt" => &["tgtd", "tgtadm"],
                other => &[other][..],
            };
            let mut have = self.machine.programs.borrow_mut();
            have.extend(programs.iter().map(|s| s.to_string()));
        }
        Ok(())
    }
    fn build_fio(&mut self) -> Result<PathBuf, FioBuildError> {
        self.asked.push("fio".into());
        *self.machine.fio.borrow_mut() = true;
        Ok(PathBuf::from("/cache/fio-libiscsi/fio"))
    }
}

fn quick() -> Vec<ResolvedCase> {
    Plan::embedded("quick").unwrap().resolved_cases()
}

fn plan(text: &str) -> Vec<ResolvedCase> {
    Plan::parse(text, "t.toml").unwrap().resolved_cases()
}

const HEAD: &str = "name = \"t\"\ntopology = \"loopback\"\n[[workload]]\nprofile = \"oltp-8k\"\n";

fn blocked(c: &Check) -> Vec<&str> {
    c.blocked.iter().map(|(case, _)| case.as_str()).collect()
}

#[test]
fn offloads_off_without_ethtool_needs_the_ethtool_package() {
    let m = machine(true, &without(&["ethtool"]), true);
    let c = check(&quick(), &m);
    assert_eq!(c.missing.len(), 1, "{c:#?}");
    let e = &c.missing[0];
    assert_eq!(e.need, Need::Ethtool);
    assert_eq!(e.need.package(), Some("ethtool"));
    assert_eq!(
        e.users,
        [(
            "offloads-off".to_string(),
            "offloads tso, gso, gro off".to_string()
        )]
    );
    assert_eq!(blocked(&c), ["offloads-off"]);
    assert!(
        c.blocked[0].1.contains("needs ethtool"),
        "{}",
        c.blocked[0].1
    );
    assert!(c.lost.is_empty());
    assert_eq!(
        install_commands(&c.installable(), true, true, None),
        ["apt-get install -y --no-install-recommends ethtool"]
    );
}

#[test]
fn a_libiscsi_case_without_fio_needs_the_script() {
    let m = machine(true, ALL, false);
    let c = check(&quick(), &m);
    assert_eq!(c.missing.len(), 1, "{c:#?}");
    assert_eq!(c.missing[0].need, Need::FioLibiscsi);
    assert_eq!(c.missing[0].cases(), ["libiscsi"]);
    assert!(c.missing[0].need.installable());
    assert_eq!(blocked(&c), ["libiscsi"]);
    let script = std::path::Path::new("/src/isoe/crates/lab/fio-libiscsi");
    assert_eq!(
        install_commands(&c.installable(), true, true, Some(script)),
        ["bash /src/isoe/crates/lab/fio-libiscsi"]
    );
    // Without a checkout, isoe builds it from its own copy.
    let without_checkout = install_commands(&c.installable(), false, true, None);
    assert!(
        without_checkout[0].starts_with("sudo isoe lab (without --no-install"),
        "{without_checkout:?}"
    );
}

#[test]
fn nothing_missing_is_a_clean_check() {
    let m = machine(true, ALL, true);
    assert!(check(&quick(), &m).is_clean());
    // A plan of isoe against isoe on loopback with no link knob needs
    // nothing, not even root.
    let bare = plan(HEAD);
    assert!(check(&bare, &machine(false, &[], false)).is_clean());
}

#[test]
fn install_commands_name_each_package_once_with_sudo_when_not_root() {
    let text = format!(
        "{HEAD}[[case]]\nname = \"tgt\"\ntarget = \"tgt\"\n[[case]]\nname = \"off\"\ntso = false\n\
         [[case]]\nname = \"fio\"\ninitiator = \"libiscsi\"\n"
    );
    let m = machine(true, &["ip", "tc"], false);
    let c = check(&plan(&text), &m);
    let needs: Vec<Need> = c.missing.iter().map(|x| x.need).collect();
    assert_eq!(needs, [Need::Ethtool, Need::Tgt, Need::FioLibiscsi]);
    let script = std::path::Path::new("/r/crates/lab/fio-libiscsi");
    assert_eq!(
        install_commands(&c.installable(), false, true, Some(script)),
        [
            "sudo apt-get install -y --no-install-recommends ethtool tgt",
            "bash /r/crates/lab/fio-libiscsi"
        ]
    );
    let no_apt = install_commands(&c.installable(), true, false, None);
    assert!(no_apt[0].starts_with("(no apt-get here)"), "{no_apt:?}");
    assert!(no_apt[0].contains("ethtool tgt"), "{no_apt:?}");
}

#[test]
fn without_root_loopback_cases_that_change_a_link_knob_are_skipped_and_the_rest_lose_it() {
    // ethtool is missing too: moot without namespaces, so nothing to install.
    let m = machine(false, &without(&["ethtool"]), true);
    let c = check(&quick(), &m);
    assert_eq!(blocked(&c), ["offloads-off", "mtu-9000"], "{c:#?}");
    assert_eq!(
        c.blocked[1].1,
        "mtu 9000 needs root, for a network namespace"
    );
    assert!(c.installable().is_empty(), "{c:#?}");
    assert_eq!(c.lost.len(), 1, "{c:#?}");
    assert_eq!(c.lost[0].what, "mtu 1500");
    assert_eq!(c.lost[0].cases, ["baseline", "digests", "libiscsi"]);
    assert!(c.lost[0].line().contains("host's own loopback"));
    // The lab does not stop for it: the quick plan runs on 127.0.0.1.
    let mut installer = FakeInstaller {
        machine: &m,
        asked: vec![],
        fail: false,
    };
    let policy = Policy {
        install: true,
        skip_missing: false,
    };
    let mut out = Vec::new();
    let ready = prepare("quick", &quick(), policy, &m, &mut installer, &mut out).unwrap();
    assert_eq!(ready.skipped.len(), 2);
    assert_eq!(ready.lost.len(), 1);
    assert!(installer.asked.is_empty());
}

#[test]
fn a_case_compared_to_another_shares_its_link_knobs() {
    let text = format!(
        "{HEAD}[[case]]\nname = \"jumbo\"\nmtu = 9000\n[[case]]\nname = \"jumbo-digest\"\n\
         compare_to = \"jumbo\"\nmtu = 9000\nheader_digest = true\n"
    );
    let c = check(&plan(&text), &machine(false, ALL, true));
    assert_eq!(blocked(&c), ["jumbo"]);
    assert_eq!(c.lost.len(), 1);
    assert_eq!(c.lost[0].what, "mtu 9000");
    assert_eq!(c.lost[0].cases, ["jumbo-digest"]);
}

#[test]
fn other_topologies_and_tgt_need_root_and_congested_needs_tc() {
    let text = "name = \"t\"\ntopology = \"congested\"\n[[workload]]\nprofile = \"oltp-8k\"\n\
                [[case]]\nname = \"tgt\"\ntarget = \"tgt\"\n";
    let cases = plan(text);
    let c = check(&cases, &machine(true, &without(&["tc"]), true));
    assert_eq!(c.missing[0].need, Need::Tc);
    assert_eq!(c.missing[0].cases(), ["baseline", "tgt"]);
    assert_eq!(
        install_commands(&c.installable(), true, true, None),
        ["apt-get install -y --no-install-recommends iproute2"]
    );
    // Not root: nothing can run, and no package would change that.
    let m = machine(false, ALL, true);
    let c = check(&cases, &m);
    assert_eq!(blocked(&c), ["baseline", "tgt"]);
    assert_eq!(
        c.blocked[1].1,
        "the congested topology needs root, for a network namespace; \
         target = tgt needs root, which tgtd runs as"
    );
    assert!(c.installable().is_empty());
    let mut installer = FakeInstaller {
        machine: &m,
        asked: vec![],
        fail: false,
    };
    let policy = Policy {
        install: true,
        skip_missing: true,
    };
    let stop = prepare("t", &cases, policy, &m, &mut installer, &mut Vec::new()).unwrap_err();
    assert!(
        stop.0.contains("no case of plan t can run here"),
        "{}",
        stop.0
    );
    assert!(stop.0.contains("Run it as root"), "{}", stop.0);
    // Root in a container that refuses namespaces: said so.
    let mut m = machine(true, ALL, true);
    m.namespaces_refused = Some(CommandError {
        command: "ip netns add isoe-lab-1-probe".into(),
        detail: "exit status: 1: mount --make-shared /run/netns failed: Operation not permitted"
            .into(),
    });
    let c = check(&cases, &m);
    assert_eq!(c.missing[0].need, Need::Namespaces);
    assert!(c.blocked[0].1.contains("Operation not permitted"), "{c:#?}");
}

#[test]
fn an_offload_baseline_without_ethtool_blocks_every_case() {
    let cases = Plan::embedded("openstack-offloads")
        .unwrap()
        .resolved_cases();
    let c = check(&cases, &machine(true, &without(&["ethtool"]), true));
    assert_eq!(c.blocked.len(), cases.len());
    assert_eq!(c.missing.len(), 1);
    assert_eq!(c.missing[0].users.len(), cases.len());
    assert_eq!(c.missing[0].users[0].1, "offloads tso, gso, gro, tx, rx on");
}

#[test]
fn block_device_initiators_and_bed_targets_are_refused_in_namespaces_with_the_reason() {
    let text = format!(
        "{HEAD}[[case]]\nname = \"ublk\"\ninitiator = \"isoe-ublk\"\n\
         [[case]]\nname = \"nbd\"\ninitiator = \"isoe-nbd\"\ntopology = \"base\"\n\
         [[case]]\nname = \"kernel\"\ninitiator = \"kernel\"\n\
         [[case]]\nname = \"lio\"\ntarget = \"lio\"\n\
         [[case]]\nname = \"libiscsi\"\ninitiator = \"libiscsi\"\n"
    );
    // Everything there, as root: only the bed's cases are refused.
    let m = machine(true, ALL, true);
    let c = check(&plan(&text), &m);
    assert_eq!(blocked(&c), ["ublk", "nbd", "kernel", "lio"]);
    assert!(c.missing.is_empty(), "nothing to install for them: {c:#?}");
    assert_eq!(
        c.blocked[0].1,
        "initiator = isoe-ublk runs on a test bed of machines only (topology \"physical\", \
         isoe lab --testbed FILE): isoe attach needs root and a kernel module to make a block \
         device of the machine, which fio drives"
    );
    assert!(c.blocked[1]
        .1
        .starts_with("initiator = isoe-nbd runs on a test bed"));
    assert!(c.blocked[2]
        .1
        .starts_with("initiator = kernel runs on a test bed"));
    assert!(c.blocked[3]
        .1
        .starts_with("target = lio runs on a test bed"));
    // Without root the reason is still the test bed, not root.
    let c = check(&plan(&text), &machine(false, ALL, true));
    assert!(c.blocked[0].1.contains("test bed"), "{c:#?}");

    // On a test bed nothing here is refused: the bed checks its hosts.
    let physical = text.replace("topology = \"loopback\"", "topology = \"physical\"");
    let on_bed: Vec<ResolvedCase> = plan(&physical)
        .into_iter()
        .filter(|c| c.name != "nbd")
        .collect();
    assert!(check(&on_bed, &m).blocked.is_empty());

    // A plan of such cases alone runs nothing and says where it would run.
    let only = format!("{HEAD}[baseline]\ninitiator = \"isoe-nbd\"\n");
    let mut installer = FakeInstaller {
        machine: &m,
        asked: vec![],
        fail: false,
    };
    let stop = prepare(
        "t",
        &plan(&only),
        policy(true, false),
        &m,
        &mut installer,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(
        stop.0
            .contains("  - baseline: initiator = isoe-nbd runs on a test bed")
            && stop.0.ends_with(
                "Name the machines with --testbed FILE (an example: \
                 crates/lab/examples/testbed-physical.toml)."
            ),
        "{}",
        stop.0
    );
    assert!(installer.asked.is_empty());
}

fn policy(install: bool, skip_missing: bool) -> Policy {
    Policy {
        install,
        skip_missing,
    }
}

#[test]
fn as_root_with_apt_it_installs_says_so_and_checks_again() {
    let m = machine(true, &without(&["ethtool", "tgtd", "tgtadm"]), false);
    let text = format!(
        "{HEAD}[[case]]\nname = \"offloads-off\"\ntso = false\n[[case]]\nname = \"tgt\"\n\
         target = \"tgt\"\n[[case]]\nname = \"libiscsi\"\ninitiator = \"libiscsi\"\n"
    );
    let cases = plan(&text);
    let mut installer = FakeInstaller {
        machine: &m,
        asked: vec![],
        fail: false,
    };
    let mut out = Vec::new();
    let ready = prepare(
        "t",
        &cases,
        policy(true, false),
        &m,
        &mut installer,
        &mut out,
    )
    .unwrap();
    assert_eq!(installer.asked, ["apt ethtool tgt", "fio"]);
    let printed = String::from_utf8(out).unwrap();
    assert!(
        printed.contains("installing ethtool (needed by offloads-off)...\n"),
        "{printed}"
    );
    assert!(
        printed.contains("installing tgt (needed by tgt)...\n"),
        "{printed}"
    );
    assert!(
        printed.contains("building fio with the libiscsi engine (needed by libiscsi)"),
        "{printed}"
    );
    assert!(ready.skipped.is_empty());
    assert_eq!(ready.installed.len(), 3, "{:?}", ready.installed);
}

#[test]
fn no_install_stops_with_the_missing_things_their_cases_and_the_command() {
    let m = machine(true, &without(&["ethtool"]), true);
    let mut installer = FakeInstaller {
        machine: &m,
        asked: vec![],
        fail: false,
    };
    let stop = prepare(
        "quick",
        &quick(),
        policy(false, false),
        &m,
        &mut installer,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(installer.asked.is_empty());
    let text = &stop.0;
    for expected in [
        "plan quick needs what this machine does not have; nothing was run",
        "  - ethtool (Debian package ethtool): ethtool not found",
        "needed by offloads-off (offloads tso, gso, gro off)",
        "Not installed: --no-install.",
        "  apt-get install -y --no-install-recommends ethtool\n",
        "--skip-missing",
    ] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    // With --skip-missing it runs the rest and names what it skips.
    let ready = prepare(
        "quick",
        &quick(),
        policy(false, true),
        &m,
        &mut installer,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(ready.skipped.len(), 1);
    assert_eq!(ready.skipped[0].0, "offloads-off");
    assert!(
        ready.skipped[0].1.contains("ethtool"),
        "{:?}",
        ready.skipped
    );
}

#[test]
fn without_root_or_apt_or_when_installing_fails_it_says_why_not() {
    let case = |root: bool, apt: bool, fail: bool| {
        assert!(root, "without root the quick plan needs nothing installed");
        let mut programs = without(&["ethtool"]);
        if !apt {
            programs.retain(|p| *p != "apt-get");
        }
        let m = machine(root, &programs, true);
        let mut installer = FakeInstaller {
            machine: &m,
            asked: vec![],
            fail,
        };
        let stop = prepare(
            "quick",
            &quick(),
            policy(true, false),
            &m,
            &mut installer,
            &mut Vec::new(),
        )
        .unwrap_err();
        (stop.0, installer.asked)
    };
    let (text, asked) = case(true, false, false);
    assert!(text.contains("Not installed: apt-get not found."), "{text}");
    assert!(text.contains("(no apt-get here)"), "{text}");
    assert!(asked.is_empty());
    let (text, asked) = case(true, true, true);
    assert_eq!(asked, ["apt ethtool"]);
    assert!(
        text.contains(
            "Not installed: installing failed: apt-get install ethtool: exit status: 100: \
             E: Could not get lock."
        ),
        "{text}"
    );
    // Not root: tgt is not asked for (it needs root as well), fio is.
    let text = format!(
        "{HEAD}[[case]]\nname = \"tgt\"\ntarget = \"tgt\"\n[[case]]\nname = \"fio\"\n\
         initiator = \"libiscsi\"\n"
    );
    let m = machine(false, &without(&["tgtd", "tgtadm"]), false);
    let mut installer = FakeInstaller {
        machine: &m,
        asked: vec![],
        fail: false,
    };
    let stop = prepare(
        "t",
        &plan(&text),
        policy(true, false),
        &m,
        &mut installer,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(installer.asked.is_empty());
    assert!(stop.0.contains("Not installed: not root."), "{}", stop.0);
    assert!(!stop.0.contains("apt-get install"), "{}", stop.0);
    assert!(stop.0.contains("  - root ("), "{}", stop.0);
    assert!(
        stop.0.contains("needed by tgt (target = tgt)"),
        "{}",
        stop.0
    );
    assert!(stop.0.contains("crates/lab/fio-libiscsi"), "{}", stop.0);
}
