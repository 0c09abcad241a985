//! Serial number arithmetic (RFC 1982, SERIAL_BITS = 32) for CmdSN, StatSN,
//! DataSN and R2TSN (RFC 7143 §4.2.2.1 and §11.2.1).
//!
//! Sequence numbers wrap at 2^32, so plain `<` is wrong near the wrap. RFC 1982
//! §3.2 defines `a < b` when `b` is ahead of `a` by less than 2^31. Two numbers
//! exactly 2^31 apart are neither less nor greater than each other: for such a
//! pair [`sn_lt`], [`sn_gt`], [`sn_le`] and [`sn_ge`] are all false, so
//! `!sn_lt(a, b)` does NOT imply `sn_ge(a, b)`. Callers must use the function
//! that says what they mean.

/// Half the serial number space: the distance at which comparison is undefined.
const HALF: u32 = 1 << 31;

/// True when `a` precedes `b` in serial arithmetic (RFC 1982 §3.2).
pub fn sn_lt(a: u32, b: u32) -> bool {
    // RFC 1982 §3.2: i1 < i2 iff (i1 < i2 and i2 - i1 < 2^31) or
    // (i1 > i2 and i1 - i2 > 2^31); both cases are "b - a mod 2^32 is in
    // (0, 2^31)".
    let ahead = b.wrapping_sub(a);
    ahead != 0 && ahead < HALF
}

/// True when `a` follows `b` in serial arithmetic (RFC 1982 §3.2).
pub fn sn_gt(a: u32, b: u32) -> bool {
    sn_lt(b, a)
}

/// True when `a` equals or precedes `b` in serial arithmetic.
pub fn sn_le(a: u32, b: u32) -> bool {
    a == b || sn_lt(a, b)
}

/// True when `a` equals or follows `b` in serial arithmetic.
pub fn sn_ge(a: u32, b: u32) -> bool {
    a == b || sn_gt(a, b)
}

/// True when `sn` lies in the command window [ExpCmdSN, MaxCmdSN].
///
/// RFC 7143 §4.2.2.1: a target accepts a non-immediate command whose CmdSN is
/// within ExpCmdSN..=MaxCmdSN, compared in serial arithmetic. MaxCmdSN =
/// ExpCmdSN - 1 means the window is closed (empty); a MaxCmdSN further behind
/// than that is a protocol violation and is treated as closed too, so a
/// misbehaving peer never opens the window by accident.
pub fn sn_in_window(sn: u32, exp_cmd_sn: u32, max_cmd_sn: u32) -> bool {
    // The two half-open ranges [exp, exp + 2^31) and (max - 2^31, max] only
    // overlap when max is not behind exp, so the closed window (max = exp - 1)
    // falls out without a special case.
    sn_ge(sn, exp_cmd_sn) && sn_le(sn, max_cmd_sn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_order_away_from_wrap() {
        assert!(sn_lt(1, 2));
        assert!(!sn_lt(2, 1));
        assert!(sn_gt(2, 1));
        assert!(sn_le(5, 5));
        assert!(sn_ge(5, 5));
        assert!(!sn_lt(5, 5));
        assert!(!sn_gt(5, 5));
    }

    #[test]
    fn order_across_the_wrap() {
        // RFC 1982 §3.2: 0xffff_ffff precedes 0 after wrapping.
        assert!(sn_lt(u32::MAX, 0));
        assert!(sn_gt(0, u32::MAX));
        assert!(sn_lt(0xffff_fff0, 0x10));
        assert!(!sn_lt(0x10, 0xffff_fff0));
    }

    #[test]
    fn distance_of_exactly_half_is_undefined() {
        // RFC 1982 §3.2: for i2 = i1 + 2^(SERIAL_BITS-1) the result is undefined.
        for a in [0u32, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX] {
            let b = a.wrapping_add(HALF);
            assert!(!sn_lt(a, b) && !sn_gt(a, b) && !sn_le(a, b) && !sn_ge(a, b));
        }
    }

    #[test]
    fn largest_step_ahead_is_half_minus_one() {
        assert!(sn_lt(0, HALF - 1));
        assert!(sn_lt(HALF, u32::MAX));
        assert!(sn_lt(HALF + 1, 0));
    }

    #[test]
    fn window_plain() {
        assert!(sn_in_window(10, 10, 20));
        assert!(sn_in_window(20, 10, 20));
        assert!(sn_in_window(15, 10, 20));
        assert!(!sn_in_window(9, 10, 20));
        assert!(!sn_in_window(21, 10, 20));
    }

    #[test]
    fn window_of_one() {
        assert!(sn_in_window(7, 7, 7));
        assert!(!sn_in_window(8, 7, 7));
        assert!(!sn_in_window(6, 7, 7));
    }

    #[test]
    fn window_across_the_wrap() {
        assert!(sn_in_window(u32::MAX, 0xffff_fff0, 5));
        assert!(sn_in_window(0, 0xffff_fff0, 5));
        assert!(sn_in_window(5, 0xffff_fff0, 5));
        assert!(!sn_in_window(6, 0xffff_fff0, 5));
        assert!(!sn_in_window(0xffff_ffef, 0xffff_fff0, 5));
    }

    #[test]
    fn closed_window_accepts_nothing() {
        // RFC 7143 §4.2.2.1: MaxCmdSN = ExpCmdSN - 1 closes the window.
        for exp in [0u32, 1, 100, HALF, u32::MAX] {
            let max = exp.wrapping_sub(1);
            for sn in [
                exp,
                max,
                exp.wrapping_add(1),
                exp.wrapping_add(HALF),
                0,
                u32::MAX,
            ] {
                assert!(!sn_in_window(sn, exp, max), "sn {sn} exp {exp}");
            }
        }
    }

    #[test]
    fn max_behind_exp_minus_one_is_closed() {
        assert!(!sn_in_window(100, 100, 90));
        assert!(!sn_in_window(95, 100, 90));
        assert!(!sn_in_window(90, 100, 90));
    }

    proptest! {
        #[test]
        fn lt_matches_signed_distance(a: u32, d in 1u32..HALF) {
            let b = a.wrapping_add(d);
            prop_assert!(sn_lt(a, b));
            prop_assert!(sn_gt(b, a));
            prop_assert!(!sn_lt(b, a));
            prop_assert!(!sn_gt(a, b));
            prop_assert!(sn_le(a, b) && sn_ge(b, a));
        }

        #[test]
        fn trichotomy_except_at_half(a: u32, b: u32) {
            let ways = [sn_lt(a, b), a == b, sn_gt(a, b)].iter().filter(|&&x| x).count();
            if b.wrapping_sub(a) == HALF {
                prop_assert_eq!(ways, 0);
            } else {
                prop_assert_eq!(ways, 1);
            }
        }

        #[test]
        fn order_is_translation_invariant(a: u32, b: u32, k: u32) {
            prop_assert_eq!(sn_lt(a, b), sn_lt(a.wrapping_add(k), b.wrapping_add(k)));
            prop_assert_eq!(sn_le(a, b), sn_le(a.wrapping_add(k), b.wrapping_add(k)));
        }

        #[test]
        fn window_is_offset_range(exp: u32, size in 0u32..HALF, off: u32) {
            // A window of `size` commands: MaxCmdSN = ExpCmdSN + size - 1.
            let max = exp.wrapping_add(size).wrapping_sub(1);
            let sn = exp.wrapping_add(off);
            let inside = off < size;
            prop_assert_eq!(sn_in_window(sn, exp, max), inside, "exp {} max {} sn {}", exp, max, sn);
        }
    }
}
