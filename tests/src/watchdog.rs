//! Processes a test starts that must not outlive it.

use std::process::{Command, Stdio};

/// Runs `script` in a shell that outlives this call on purpose (it is never waited on):
/// a watchdog that stops what the test started once the test process is gone.
pub fn watchdog(script: &str) -> std::io::Result<()> {
    #[allow(clippy::zombie_processes)]
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    Ok(())
}

/// Kills `child` once this test process is gone: a test that panics (or times out) while
/// its servers and clients run leaves none of them behind. The shell looks at both pids
/// once a second.
pub fn stop_with_test(child: &std::process::Child) {
    let script = format!(
        "while kill -0 {test} 2>/dev/null && kill -0 {child} 2>/dev/null; do sleep 1; done; kill -9 {child} 2>/dev/null",
        test = std::process::id(),
        child = child.id()
    );
    watchdog(&script).unwrap_or_else(|e| panic!("cannot start a watchdog shell: {e}"));
}
