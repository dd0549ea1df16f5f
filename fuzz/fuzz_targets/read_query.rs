//! A read's query string and `s2-format` header.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_api::fuzz::read_query(data));
