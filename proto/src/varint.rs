//! Unsigned LEB128 varints.

use bytes::BufMut;

/// Appends `value` as an unsigned LEB128 varint.
pub fn put_u64(buf: &mut impl BufMut, mut value: u64) {
    while value >= 0x80 {
        buf.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Number of bytes [`put_u64`] writes for `value`.
pub fn len_u64(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads a varint from the front of `input`, advancing it. `None` on truncation or a
/// varint longer than ten bytes.
pub fn get_u64(input: &mut &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for (i, byte) in input.iter().enumerate().take(10) {
        let part = u64::from(byte & 0x7f);
        if i == 9 && *byte > 1 {
            return None;
        }
        value |= part << (7 * i);
        if byte & 0x80 == 0 {
            *input = &input[i + 1..];
            return Some(value);
        }
    }
    None
}

/// Zigzag-encodes a signed value so small magnitudes stay short.
pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trips(value: u64) {
            let mut buf = Vec::new();
            put_u64(&mut buf, value);
            prop_assert_eq!(buf.len(), len_u64(value));
            let mut slice = buf.as_slice();
            prop_assert_eq!(get_u64(&mut slice), Some(value));
            prop_assert!(slice.is_empty());
        }

        #[test]
        fn zigzag_round_trips(value: i64) {
            prop_assert_eq!(unzigzag(zigzag(value)), value);
        }
    }

    #[test]
    fn truncated_varint_is_none() {
        let mut slice: &[u8] = &[0x80, 0x80];
        assert_eq!(get_u64(&mut slice), None);
    }
}
