//! Shaping Data-In to what the initiator allocated (SPC-5 4.2.5.6).

/// SPC-5 4.2.5.6: the device server returns at most ALLOCATION LENGTH bytes;
/// a shorter allocation is not an error.
pub(crate) fn truncate_to_allocation_length(data_in: &mut Vec<u8>, allocation_length: u32) {
    let allowed = usize::try_from(allocation_length).unwrap_or(usize::MAX);
    data_in.truncate(allowed);
}

/// Appends `text` as a left-aligned ASCII field of exactly `width` bytes,
/// padded with spaces (SPC-5 4.3.1); bytes outside 20h..7Eh become spaces.
pub(crate) fn push_ascii_field(data_in: &mut Vec<u8>, text: &str, width: usize) {
    let start = data_in.len();
    data_in.extend(
        text.bytes()
            .take(width)
            .map(|b| if (0x20..=0x7e).contains(&b) { b } else { b' ' }),
    );
    data_in.resize(start + width, b' ');
}
