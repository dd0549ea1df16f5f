//! Kafka requests on arbitrary bytes, as a connection decodes one frame: the header, then
//! the body at its version when that version is served. Kafka's codec sizes an array
//! from its length before reading it, so this target runs on jemalloc as the `shale`
//! binary does: it reserves such sizes without backing them (MAP_NORESERVE).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fuzz_target!(|data: &[u8]| {
    let _ = shale_kafka::fuzz::decode_request(data);
});
