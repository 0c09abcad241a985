//! Claims on a file: another set of claims ([`Claims::new`]) acts as
//! another process would, with descriptions of its own whose locks
//! conflict with this set's.

use isoe_store::{ClaimError, Claims, Conflict, Sharing};
use std::path::{Path, PathBuf};

fn file(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, vec![0; 4096]).unwrap();
    path
}

fn shared(identity: &str) -> Sharing {
    Sharing::As(identity.into())
}

/// The conflict a claim met, and that it named this process (the other
/// set's holder) with its command line.
fn conflict_of(result: Result<impl std::fmt::Debug, ClaimError>) -> Conflict {
    match result.unwrap_err() {
        ClaimError::Busy {
            conflict, holders, ..
        } => {
            let me = std::process::id();
            assert!(holders.iter().any(|h| h.pid == me), "{holders:?}");
            let holder = holders.iter().find(|h| h.pid == me).unwrap();
            assert!(!holder.command.is_empty(), "{holder:?}");
            conflict
        }
        other => panic!("not busy: {other:?}"),
    }
}

#[test]
fn a_file_claimed_alone_is_refused_to_another_process_however_it_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(dir.path(), "a.img");
    std::os::unix::fs::symlink(&path, dir.path().join("link.img")).unwrap();
    std::fs::hard_link(&path, dir.path().join("hard.img")).unwrap();
    let (mine, other) = (Claims::new(), Claims::new());
    let claim = mine.claim(&path, Sharing::Alone).unwrap();
    for name in ["a.img", "link.img", "hard.img"] {
        let named = dir.path().join(name);
        for sharing in [Sharing::Alone, shared("x")] {
            let refused = other.claim(&named, sharing.clone());
            assert_eq!(conflict_of(refused), Conflict::InUse, "{name}");
            assert_eq!(
                conflict_of(other.check(&named, sharing)),
                Conflict::InUse,
                "{name}"
            );
        }
    }
    let message = other.claim(&path, Sharing::Alone).unwrap_err().to_string();
    let expected = format!(
        "{} is in use by another process: pid {} (",
        path.display(),
        std::process::id()
    );
    assert!(message.starts_with(&expected), "{message}");

    drop(claim);
    other.check(&path, Sharing::Alone).unwrap();
    let _taken = other.claim(&path, Sharing::Alone).unwrap();
}

#[test]
fn sharers_of_one_identity_coexist_and_another_identity_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(dir.path(), "a.img");
    let (a, b, c) = (Claims::new(), Claims::new(), Claims::new());
    let first = a.claim(&path, shared("lu-1")).unwrap();
    let second = b.claim(&path, shared("lu-1")).unwrap();
    assert_eq!(
        conflict_of(c.claim(&path, shared("lu-2"))),
        Conflict::OtherIdentity
    );
    assert_eq!(
        conflict_of(c.check(&path, shared("lu-2"))),
        Conflict::OtherIdentity
    );
    assert_eq!(conflict_of(c.claim(&path, Sharing::Alone)), Conflict::InUse);
    drop(first);
    assert_eq!(
        conflict_of(c.claim(&path, shared("lu-2"))),
        Conflict::OtherIdentity,
        "the second sharer still marks lu-1"
    );
    drop(second);
    let _alone = c.claim(&path, Sharing::Alone).unwrap();
}

#[test]
fn claims_of_one_process_share_the_file_and_let_it_go_with_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(dir.path(), "a.img");
    let (mine, other) = (Claims::new(), Claims::new());
    let old = mine.claim(&path, Sharing::Alone).unwrap();
    // A unit replacing another over the same file, as a reload makes it.
    let new = mine.claim(&path, Sharing::Alone).unwrap();
    mine.check(&path, shared("x")).unwrap();
    drop(old);
    assert_eq!(
        conflict_of(other.check(&path, Sharing::Alone)),
        Conflict::InUse
    );
    drop(new);
    other.check(&path, Sharing::Alone).unwrap();
}

#[test]
fn a_claim_that_changes_its_sharing_in_one_process_holds_the_union_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(dir.path(), "a.img");
    let (mine, other) = (Claims::new(), Claims::new());
    // A LUN given a serial and NAA by a reload: alone, then shared.
    let alone = mine.claim(&path, Sharing::Alone).unwrap();
    let sharing = mine.claim(&path, shared("lu-1")).unwrap();
    assert_eq!(
        conflict_of(other.check(&path, shared("lu-1"))),
        Conflict::InUse
    );
    drop(alone);
    other.check(&path, shared("lu-1")).unwrap();
    assert_eq!(
        conflict_of(other.check(&path, shared("lu-2"))),
        Conflict::OtherIdentity
    );

    // Back to alone, while another process shares it: refused, and the
    // shared claim still holds.
    let theirs = other.claim(&path, shared("lu-1")).unwrap();
    assert_eq!(
        conflict_of(mine.claim(&path, Sharing::Alone)),
        Conflict::InUse
    );
    assert_eq!(
        conflict_of(Claims::new().check(&path, Sharing::Alone)),
        Conflict::InUse
    );
    drop(theirs);
    let alone = mine.claim(&path, Sharing::Alone).unwrap();
    drop(sharing);
    assert_eq!(
        conflict_of(other.check(&path, shared("lu-1"))),
        Conflict::InUse
    );
    drop(alone);
    other.check(&path, Sharing::Alone).unwrap();
}

#[test]
fn a_missing_file_is_checked_as_free_and_cannot_be_claimed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.img");
    Claims::new().check(&missing, Sharing::Alone).unwrap();
    let error = Claims::new().claim(&missing, Sharing::Alone).unwrap_err();
    assert!(matches!(error, ClaimError::Io { .. }), "{error:?}");
}
