//! SCSI.StartStopUnit and SCSI.NoMedia for a unit whose medium is not
//! removable (RMB=0): eject must fail, everything else is accepted and the
//! medium stays readable.

use crate::harness::*;

#[test]
fn eject_is_refused_on_a_non_removable_unit() {
    let unit = unit();
    for immed in [true, false] {
        let completion = run(&unit, &start_stop_unit(immed, 0, false, true, false)).0;
        let sense = assert_invalid_field_in_cdb(completion);
        assert_eq!(sense.field_pointer.unwrap().byte, 4);
        assert_invalid_field_in_cdb(run(&unit, &start_stop_unit(immed, 0, false, true, true)).0);
    }
    assert_good(run(&unit, &[0; 6]).0);
}

#[test]
fn start_and_stop_without_loej_keep_the_medium_available() {
    let (unit, store) = counting_unit();
    for immed in [false, true] {
        for no_flush in [false, true] {
            for start in [false, true] {
                let before = store.flush_count();
                assert_good(run(&unit, &start_stop_unit(immed, 0, no_flush, false, start)).0);
                assert_eq!(unit.is_stopped(), !start);
                let flushed = store.flush_count() > before;
                assert_eq!(flushed, !start && !no_flush, "STOP flushes unless NO_FLUSH");
                assert_good(run(&unit, &[0; 6]).0);
                assert_good(run(&unit, &block_cdb(0x28, 10, 0, 1, 0)).0);
            }
        }
    }
}

#[test]
fn power_conditions_are_accepted_and_reserved_ones_refused() {
    let unit = unit();
    for power_condition in [1u8, 2, 3, 7, 0xa, 0xb] {
        assert_good(
            run(
                &unit,
                &start_stop_unit(true, power_condition, false, true, false),
            )
            .0,
        );
        assert_good(run(&unit, &[0; 6]).0);
    }
    for power_condition in [4u8, 5, 6, 8, 9, 0xc, 0xf] {
        assert_invalid_field_in_cdb(
            run(
                &unit,
                &start_stop_unit(false, power_condition, false, false, true),
            )
            .0,
        );
    }
}

#[test]
fn prevent_allow_medium_removal_on_a_fixed_medium() {
    let unit = unit();
    assert_good(run(&unit, &[0x1e, 0, 0, 0, 0x01, 0]).0);
    assert_good(run(&unit, &[0x1e, 0, 0, 0, 0x00, 0]).0);
    for prevent in [0x02u8, 0x03] {
        let sense = assert_invalid_field_in_cdb(run(&unit, &[0x1e, 0, 0, 0, prevent, 0]).0);
        assert_eq!(sense.field_pointer.unwrap().byte, 4);
    }
    let (_, standard) = run(&unit, &inquiry(false, 0, 96));
    assert_eq!(
        standard[1] & 0x80,
        0,
        "RMB=0: libiscsi's PreventAllow tests skip"
    );
}
