//! Callgrind's client requests, so a bench can count the instructions of one phase of its
//! own run (a compaction pass, a tiering pass) when it runs under
//! `valgrind --tool=callgrind`: [`zero`] before the phase, [`dump`] after it writes a
//! profile named after the phase whose totals are that phase's instructions, in every
//! thread. Outside valgrind each request is a sequence of no-op instructions.
//!
//! The request is valgrind's documented "special instruction sequence" for amd64
//! (`valgrind.h`): four rotations of `rdi` that add up to none, then `xchg rbx, rbx`, with
//! the address of the request's words in `rax`; the answer comes back in `rdx`.

/// `VG_USERREQ_TOOL_BASE('C', 'T')`: callgrind's first request.
const CALLGRIND_BASE: u64 = (b'C' as u64) << 24 | (b'T' as u64) << 16;
const ZERO_STATS: u64 = CALLGRIND_BASE + 1;
const DUMP_STATS_AT: u64 = CALLGRIND_BASE + 3;

#[cfg(target_arch = "x86_64")]
fn client_request(request: u64, argument: u64) -> u64 {
    let words: [u64; 6] = [request, argument, 0, 0, 0, 0];
    let mut answer: u64 = 0;
    // SAFETY: the rotations leave `rdi` as it was (3 + 13 + 61 + 51 = 128 bits) and
    // `xchg rbx, rbx` changes nothing; under valgrind the sequence is the request, which
    // reads `words` (and the string `argument` may point at) and writes only `rdx`.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") answer,
            in("rax") words.as_ptr(),
            inout("rdi") 0u64 => _,
            options(nostack),
        );
    }
    answer
}

#[cfg(not(target_arch = "x86_64"))]
fn client_request(_request: u64, _argument: u64) -> u64 {
    0
}

/// Sets callgrind's counters to zero (in every thread).
pub fn zero() {
    client_request(ZERO_STATS, 0);
}

/// Writes callgrind's counters since the last [`zero`] to a profile of their own, its
/// `desc: Trigger: Client Request: NAME` line naming the phase.
pub fn dump(name: &std::ffi::CStr) {
    client_request(DUMP_STATS_AT, name.as_ptr() as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside valgrind a request runs through and answers its default (0): a malformed
    /// sequence (an instruction that does not assemble to a no-op) would fault here.
    #[test]
    fn outside_valgrind_a_request_answers_its_default() {
        assert_eq!(client_request(ZERO_STATS, 0), 0);
        assert_eq!(client_request(DUMP_STATS_AT, c"phase".as_ptr() as u64), 0);
        zero();
        dump(c"phase");
    }
}
