//! Fuzzes text keys (RFC 7143 §6): arbitrary bytes through the pair parser,
//! the value decoders, and the negotiation engine on both sides.
//!
//! The first byte picks the engine's situation (role, leading connection or
//! not, session type, the stage carrying the text); the rest is the text.
//! As responder the engine answers the text; as originator it first writes
//! its offers and takes the text as the peer's answers. Either way the
//! engine must not panic, what it writes must parse back as text, and the
//! parameters it ends with must be within RFC 7143 §13's ranges.
#![no_main]

use isoe_wire::negotiate::{
    LocalParams, Negotiator, OfferPolicy, Role, SessionType, DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH,
};
use isoe_wire::pdu::stage;
use isoe_wire::text::{
    decode_binary, decode_boolean, decode_number, parse_pairs, parse_pairs_with_repeats, split_list,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    if let Ok(pairs) = parse_pairs_with_repeats(text) {
        for (_, value) in &pairs {
            decode_values(value);
        }
    }
    let Ok(pairs) = parse_pairs(text) else {
        return;
    };
    let role = if selector & 1 == 0 {
        Role::Target
    } else {
        Role::Initiator
    };
    let leading = selector & 2 == 0;
    let session_type = if selector & 4 == 0 {
        SessionType::Normal
    } else {
        SessionType::Discovery
    };
    let stage = match (selector >> 3) & 3 {
        0 => stage::SECURITY,
        1 => stage::OPERATIONAL,
        2 => stage::FULL_FEATURE,
        _ => 2, // reserved: must be handled like any other value
    };
    let originate = selector & 0x20 != 0;
    let policy = if selector & 0x40 == 0 {
        OfferPolicy::All
    } else {
        OfferPolicy::NonDefault
    };

    let mut negotiator = Negotiator::new(role, LocalParams::default(), leading);
    negotiator.set_session_type(session_type);
    let mut out = Vec::new();
    if originate {
        negotiator.write_offers(policy, &mut out);
        assert!(parse_pairs(&out).is_ok(), "our offers are valid text");
        out.clear();
    }
    if negotiator.handle_text(stage, &pairs, &mut out).is_err() {
        return;
    }
    let answers = parse_pairs(&out).expect("our answers are valid text");
    // RFC 7143 §6.2: one answer per key at most, and only to keys received.
    assert!(answers.len() <= pairs.len());
    for (key, _) in &answers {
        assert!(
            pairs.iter().any(|(k, _)| k == key),
            "answer to {key} unasked"
        );
    }
    let (session, connection) = negotiator.finish();
    // RFC 7143 §13.12-§13.14: lengths in 512..2^24-1; FirstBurstLength ≤ MaxBurstLength.
    for len in [
        session.max_burst_length,
        session.first_burst_length,
        connection.max_send_data_segment_length,
        connection.max_recv_data_segment_length,
    ] {
        assert!((512..1 << 24).contains(&len), "length {len} out of range");
    }
    assert!(session.first_burst_length <= session.max_burst_length);
    assert_eq!(
        connection.max_recv_data_segment_length, DEFAULT_MAX_RECV_DATA_SEGMENT_LENGTH,
        "we declared nothing"
    );
    assert!(session.max_connections >= 1);
    assert!(session.error_recovery_level <= 2);
});

/// Every decoder a value may go through; none may panic.
fn decode_values(value: &str) {
    let _ = decode_number(value);
    let _ = decode_boolean(value);
    if let Ok(bytes) = decode_binary(value) {
        assert!(bytes.len() <= value.len());
    }
    for item in split_list(value).take(1024) {
        let _ = decode_number(item);
    }
}
