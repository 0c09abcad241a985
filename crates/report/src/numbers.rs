//! Numbers for people: a few significant digits, thousands grouped, and
//! signed percentages for changes.

use crate::stats::Effect;

/// A measured value with about three significant digits; large values
/// grouped by thousands ("36,511"); "–" when absent.
pub fn num(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => {
            let a = v.abs();
            if a >= 1000.0 {
                group_thousands(v)
            } else if a >= 100.0 {
                format!("{v:.1}")
            } else if a >= 10.0 {
                format!("{v:.2}")
            } else if a == 0.0 {
                "0".to_string()
            } else if a >= 0.01 {
                format!("{v:.3}")
            } else {
                format!("{v:.2e}")
            }
        }
        _ => "–".to_string(),
    }
}

/// A percentage or share with two decimals ("0.11"); "–" when absent.
pub fn pct(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.2}"),
        _ => "–".to_string(),
    }
}

/// A share that is often tiny (retransmissions: 0.00032%) with two
/// significant digits, at least two decimals; "0" for none.
pub fn small_pct(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".to_string();
    }
    let decimals = (1 - v.abs().log10().floor() as i32).max(2) as usize;
    format!("{v:.decimals$}")
}

/// A change over the baseline, signed, one decimal, with "%" ("+12.3%").
pub fn change(change_pct: f64) -> String {
    // Avoid "-0.0%" for tiny negative changes.
    let rounded = (change_pct * 10.0).round() / 10.0;
    if rounded == 0.0 {
        "0.0%".to_string()
    } else {
        format!("{rounded:+.1}%")
    }
}

/// A change with its interval: "-41.0% (95% CI -44.2 to -37.9)"; the bare
/// change when there was no test.
pub fn change_ci(e: &Effect) -> String {
    match (e.ci_low_pct, e.ci_high_pct) {
        (Some(lo), Some(hi)) => format!(
            "{} (95% CI {} to {})",
            change(e.change_pct),
            signed(lo),
            signed(hi)
        ),
        _ => format!("{} (no test: too few runs)", change(e.change_pct)),
    }
}

/// "+1.2" / "-3.4" / "0.0": one decimal, signed, no "-0.0".
fn signed(v: f64) -> String {
    let rounded = (v * 10.0).round() / 10.0;
    if rounded == 0.0 {
        "0.0".to_string()
    } else {
        format!("{rounded:+.1}")
    }
}

/// What an effect's test says: "significant", "no meaningful change",
/// "inconclusive".
pub fn verdict(e: &Effect) -> &'static str {
    if !e.conclusive {
        "inconclusive"
    } else if e.significant {
        "significant"
    } else {
        "no meaningful change"
    }
}

fn group_thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A latency bucket bound in µs, short: "512", "1.0k", "16k", "1.0M".
pub fn short_us(us: f64) -> String {
    if us >= 1e6 {
        let m = us / 1e6;
        if m >= 10.0 {
            format!("{m:.0}M")
        } else {
            format!("{m:.1}M")
        }
    } else if us >= 1e3 {
        let k = us / 1e3;
        if k >= 10.0 {
            format!("{k:.0}k")
        } else {
            format!("{k:.1}k")
        }
    } else if us < 1.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_about_three_digits() {
        assert_eq!(num(Some(36511.02)), "36,511");
        assert_eq!(num(Some(1234567.0)), "1,234,567");
        assert_eq!(num(Some(-1500.0)), "-1,500");
        assert_eq!(num(Some(299.098)), "299.1");
        assert_eq!(num(Some(17.2995)), "17.30");
        assert_eq!(num(Some(0.1345)), "0.135");
        assert_eq!(num(Some(0.0)), "0");
        assert_eq!(num(None), "–");
        assert_eq!(num(Some(f64::NAN)), "–");
    }

    #[test]
    fn small_shares_keep_two_digits() {
        assert_eq!(small_pct(1.685), "1.69");
        assert_eq!(small_pct(0.035), "0.035");
        assert_eq!(small_pct(0.679), "0.68");
        assert_eq!(small_pct(0.000_32), "0.00032");
        assert_eq!(small_pct(0.0), "0");
    }

    #[test]
    fn changes_are_signed() {
        assert_eq!(change(12.34), "+12.3%");
        assert_eq!(change(-4.0), "-4.0%");
        assert_eq!(change(-0.01), "0.0%");
    }

    #[test]
    fn bucket_bounds_are_short() {
        assert_eq!(short_us(512.0), "512");
        assert_eq!(short_us(0.5), "0.5");
        assert_eq!(short_us(1024.0), "1.0k");
        assert_eq!(short_us(16384.0), "16k");
        assert_eq!(short_us(1048576.0), "1.0M");
    }
}
