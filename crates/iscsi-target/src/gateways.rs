//! Several targets (gateways) serving one RBD image as one logical unit:
//! the unit's reservations are kept in the cluster, beside the image, and
//! each gateway hears of the others' changes through the image's watched
//! object ([`isoe_rbd::Channel`]).

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use isoe_rbd::{Channel, RbdStore, Written};
use isoe_scsi::{LogicalUnit, UnitPeers};

/// How long a change waits for the other gateways to take it in. A gateway
/// that died without closing its watch holds a change this long, until the
/// cluster drops its watch (osd_client_watch_timeout).
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the hello at start waits for answers: a gateway that answers
/// in this time serves the unit already.
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);

/// The unit's link to the other gateways.
struct Peers {
    channel: Channel,
}

impl UnitPeers for Peers {
    fn load(&self) -> Result<(Vec<u8>, u64), String> {
        self.channel.read()
    }

    fn store(&self, state: &[u8], expected: u64) -> Result<Option<u64>, String> {
        Ok(match self.channel.write(state, expected)? {
            Written::Stored(version) => Some(version),
            Written::Conflict => None,
        })
    }

    fn publish(&self, message: &[u8]) -> Result<(), String> {
        let (_, missed) = self.channel.notify(message, PUBLISH_TIMEOUT)?;
        if missed > 0 {
            return Err(format!(
                "{missed} gateway(s) did not answer within {PUBLISH_TIMEOUT:?}"
            ));
        }
        Ok(())
    }
}

/// Shares `unit`'s reservations with the other gateways of `image`.
pub(crate) fn share(unit: &Arc<LogicalUnit>, image: &RbdStore) -> Result<(), String> {
    let weak: Arc<OnceLock<Weak<LogicalUnit>>> = Arc::default();
    let target = Arc::clone(&weak);
    let handler: isoe_rbd::Handler = Arc::new(move |message: Option<&[u8]>, own: bool| {
        if own {
            return;
        }
        if let Some(unit) = target.get().and_then(Weak::upgrade) {
            unit.peer_message(message);
        }
    });
    let channel = Channel::open(image, handler).map_err(|e| e.to_string())?;
    let _ = weak.set(Arc::downgrade(unit));
    // Whoever answers serves the unit already; this gateway counts itself.
    let (answered, _) = channel.notify(b"isoe-hello 1", HELLO_TIMEOUT)?;
    let first = answered <= 1;
    unit.share_reservations(Arc::new(Peers { channel }), first)
}
