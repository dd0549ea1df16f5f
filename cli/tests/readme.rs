//! The README's quick start, run as written: each command of its shell blocks in order,
//! with the `shale` binary of this build on `PATH` and the server it starts listening on
//! free ports (the test points `localhost:8080` and `SHALE_SERVER` there).

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{start, terminate};

/// The commands of the shell blocks in the README's "Quick start" section, continuation
/// lines joined, each with the comment line just above it (or an empty one).
fn quick_start_commands() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = readme.split("\n## Quick start").nth(1).unwrap().split("\n## ").next().unwrap();
    let mut commands = Vec::new();
    for block in section.split("```sh\n").skip(1) {
        let block = block.split("```").next().unwrap();
        let (mut pending, mut comment) = (String::new(), String::new());
        for line in block.lines() {
            if let Some(continued) = line.strip_suffix('\\') {
                pending += continued;
                continue;
            }
            let command = pending.clone() + line;
            pending.clear();
            if command.trim_start().starts_with('#') {
                comment = command;
            } else if !command.trim().is_empty() {
                commands.push((std::mem::take(&mut comment), command));
            }
        }
    }
    commands
}

#[test]
fn the_readme_quick_start_runs_as_written() {
    let commands = quick_start_commands();
    assert!(commands.len() >= 15, "{commands:#?}");
    assert!(commands[0].1.starts_with("cargo install --locked --path cli"), "the install line comes first");
    assert!(commands[1].1.starts_with("shale serve "), "then the server: {}", commands[1].1);

    let dir = tempfile::tempdir().unwrap();
    let (server, http, grpc) = start(dir.path());
    let binaries = std::path::Path::new(env!("CARGO_BIN_EXE_shale")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", binaries.display(), std::env::var("PATH").unwrap_or_default());
    for (comment, command) in &commands[2..] {
        let command = command.replace("localhost:8080", http.trim_start_matches("http://"));
        // A command that follows the tail (its line or the comment above says Ctrl-C
        // ends it) runs until stopped: it must still be running after a while.
        let follows = command.contains("Ctrl-C") || comment.contains("Ctrl-C");
        let script = if follows { format!("timeout 3 {command}") } else { command.clone() };
        let output = Command::new("bash")
            .args(["-o", "pipefail", "-c", &script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("SHALE_SERVER", &grpc)
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let expected = if follows { 124 } else { 0 };
        assert_eq!(output.status.code(), Some(expected), "`{command}`\nstdout: {stdout}\nstderr: {stderr}");
        assert!(!stdout.contains("\"code\":"), "`{command}` answered an error: {stdout}");
        if command.contains("check-tail") {
            assert!(stdout.starts_with("seq_num=100000 timestamp="), "as the README says: {stdout}");
        }
    }
    assert!(terminate(server).success());
}

/// `docs/operations.md`'s walkthrough of the separate roles on the local S3 server, from
/// installing it and creating the bucket to a read through the reader, run as written
/// (one bash script, from the repository's root, with this build's `shale` on `PATH`).
/// It binds fixed ports below the ephemeral range (7000-7083), which no other test takes.
#[test]
fn the_operations_walkthrough_of_separate_roles_runs_as_written() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/operations.md")).unwrap();
    let section = doc.split("\n### From a bare machine").nth(1).expect("the walkthrough section");
    let script = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    assert!(script.contains("curl -fsS -X PUT http://127.0.0.1:7000/shale"), "it creates the bucket");
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let binaries = std::path::Path::new(env!("CARGO_BIN_EXE_shale")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", binaries.display(), std::env::var("PATH").unwrap_or_default());
    assert!(
        std::net::TcpListener::bind("127.0.0.1:7000").is_ok(),
        "port 7000 is busy: a local S3 server left running?"
    );
    // Whatever the script starts is stopped when it ends, even when it fails half-way.
    let script = format!("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}");
    let output = Command::new("timeout")
        .args(["300", "bash", "-euo", "pipefail", "-c", &script])
        .current_dir(root)
        .env("PATH", &path)
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("SHALE_SERVER")
        .env_remove("SHALE_STORE")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", output.status);
    assert!(stdout.contains("created basin demo-basin\n"), "{stdout}");
    assert!(stdout.ends_with("hello\n"), "the record read back through the reader: {stdout}");
}
