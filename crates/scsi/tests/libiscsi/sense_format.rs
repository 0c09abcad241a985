//! Sense data layout (SPC-5 4.4) and REQUEST SENSE.

use isoe_scsi::{FieldPointer, Sense};

use crate::harness::*;

#[test]
fn fixed_format_invalid_field_in_cdb_with_bit_pointer() {
    let fixed = Sense::invalid_field_in_cdb(1, 7).to_fixed();
    assert_eq!(fixed.len(), 18);
    assert_eq!(fixed[0], 0x70, "current error, VALID clear");
    assert_eq!(fixed[2], ILLEGAL_REQUEST);
    assert_eq!(fixed[7], 10, "ADDITIONAL SENSE LENGTH");
    assert_eq!((fixed[12], fixed[13]), (0x24, 0x00));
    assert_eq!(fixed[15], 0x80 | 0x40 | 0x08 | 7, "SKSV, C/D, BPV, bit 7");
    assert_eq!(be16(&fixed, 16), 1);
}

#[test]
fn fixed_format_without_bit_pointer_and_parameter_list_pointer() {
    let fixed = Sense::invalid_field_in_cdb_byte(2).to_fixed();
    assert_eq!(fixed[15], 0xc0);
    assert_eq!(be16(&fixed, 16), 2);
    let fixed = Sense::invalid_field_in_parameter_list(8, None).to_fixed();
    assert_eq!((fixed[12], fixed[13], fixed[15]), (0x26, 0x00, 0x80));
    assert_eq!(be16(&fixed, 16), 8);
    let plain = Sense::lba_out_of_range().to_fixed();
    assert_eq!(
        (plain[2], plain[12], plain[13], plain[15]),
        (ILLEGAL_REQUEST, 0x21, 0x00, 0x00)
    );
    let protected = Sense::write_protected().to_fixed();
    assert_eq!((protected[2], protected[12]), (DATA_PROTECT, 0x27));
    assert_eq!(Sense::parameter_list_length_error().to_fixed()[12], 0x1a);
}

#[test]
fn information_field_and_descriptor_format() {
    let fixed = Sense::miscompare(0x1234).to_fixed();
    assert_eq!(fixed[0], 0xf0);
    assert_eq!(fixed[2], MISCOMPARE);
    assert_eq!(be32(&fixed, 3), 0x1234);
    // An INFORMATION value past 32 bits cannot be VALID in fixed format.
    assert_eq!(Sense::miscompare(1 << 40).to_fixed()[0], 0x70);

    let mut sense = Sense::invalid_field_in_cdb(4, 1);
    sense.information = Some(1 << 40);
    let descriptor = sense.to_descriptor();
    assert_eq!(&descriptor[..4], &[0x72, ILLEGAL_REQUEST, 0x24, 0x00]);
    assert_eq!(usize::from(descriptor[7]), descriptor.len() - 8);
    assert_eq!(&descriptor[8..12], &[0x00, 0x0a, 0x80, 0x00]);
    assert_eq!(be64(&descriptor, 12), 1 << 40);
    assert_eq!(&descriptor[20..24], &[0x02, 0x06, 0x00, 0x00]);
    assert_eq!(descriptor[24], 0xc9);
    assert_eq!(be16(&descriptor, 25), 4);
    assert_eq!(
        sense.field_pointer,
        Some(FieldPointer {
            c_d: true,
            bit_pointer: Some(1),
            byte: 4
        })
    );
}

#[test]
fn request_sense_with_nothing_pending_is_no_sense() {
    let unit = unit();
    let (completion, data) = run(&unit, &[0x03, 0, 0, 0, 252, 0]);
    assert_good(completion);
    assert_eq!(data.len(), 18);
    assert_eq!((data[0], data[2], data[12], data[13]), (0x70, 0, 0, 0));
    let (completion, data) = run(&unit, &[0x03, 0x01, 0, 0, 252, 0]);
    assert_good(completion);
    assert_eq!(data, [0x72, 0, 0, 0, 0, 0, 0, 0]);
    let (completion, data) = run(&unit, &[0x03, 0, 0, 0, 8, 0]);
    assert_good(completion);
    assert_eq!(data.len(), 8);
}

#[test]
fn test_unit_ready_is_good() {
    assert_good(run(&unit(), &[0; 6]).0);
    assert_good(run(&read_only_unit(), &[0; 6]).0);
}
