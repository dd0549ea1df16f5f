//! Every JSON body the API takes: appends, stream and basin configs, basin patches.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_api::fuzz::json_bodies(data));
