//! The segment decoder on arbitrary bytes: a whole object (footer, index, blocks) and a
//! single block, as a reader meets them after a range GET.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    let _ = shale_proto::segment::decode_segment("fuzz", &bytes);
    let _ = shale_proto::segment::decode_block("fuzz", &bytes);
});
