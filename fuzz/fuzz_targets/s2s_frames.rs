//! S2S session frames (`s2s/proto`), decoded one after another.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_api::fuzz::s2s_frames(data));
