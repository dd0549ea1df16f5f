//! A produced partition's record batch on arbitrary bytes: the batch header, its CRC,
//! decompression (every codec) and the records, turned into Shale records; then the same
//! bytes with their CRC made right, so the records behind it are decoded too.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fuzz_target!(|data: &[u8]| {
    let _ = shale_kafka::fuzz::decode_produced(data);
    let _ = shale_kafka::fuzz::decode_produced_sealed(data);
});
