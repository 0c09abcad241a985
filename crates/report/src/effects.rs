//! How an effect reads in the report, wherever a section shows one: the
//! name of the test behind it, and the table cell with its change and
//! interval.

use super::document::Cell;
use super::numbers::change_ci;
use crate::stats::{Effect, Test};

/// The test behind an effect, for people.
pub(super) fn test_name(e: &Effect) -> String {
    match e.test {
        Test::Paired { rounds } => format!("paired t-test over {rounds} rounds"),
        Test::Welch {
            n_reference,
            n_case,
        } => {
            format!("Welch's t-test, {n_case} runs against {n_reference}")
        }
        Test::None => "no test".to_string(),
    }
}

/// An effect as a table cell: the change with its interval, `against`
/// (" vs CASE", or nothing) after it; bold when significant and conclusive.
pub(super) fn effect_cell(e: Option<Effect>, against: &str) -> Cell {
    match e {
        Some(e) => Cell {
            text: format!(
                "{}{against}{}",
                change_ci(&e),
                if e.conclusive { "" } else { ", inconclusive" }
            ),
            strong: e.significant && e.conclusive,
        },
        None => "–".into(),
    }
}
