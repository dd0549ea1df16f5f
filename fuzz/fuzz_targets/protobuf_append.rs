//! Protobuf append bodies (`AppendInput`), decoded and turned into appends.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_api::fuzz::protobuf_append(data));
