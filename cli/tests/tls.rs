//! TLS and access control between separate processes on the local S3 server: metadata,
//! a gateway and a reader, every listener on TLS with one test CA, a root token, and
//! the roles reaching metadata over TLS with the cluster token. Clients: curl with the
//! CA, and the `shale` CLI with `--ca-file`; plaintext to a TLS port fails cleanly.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::cluster::Cluster;
use common::{shale, terminate};
use shale_tests::tls::TestCerts;

const ROOT: &str = "tls-root-secret";
const BASIN: &str = "tls-basin";

fn https(url: &str) -> String {
    url.replacen("http://", "https://", 1)
}

/// `curl` with the test CA and the root token: status code and body.
fn curl(certs: &TestCerts, args: &[&str]) -> (String, String) {
    let output = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(&certs.ca)
        .args(["-H", &format!("Authorization: Bearer {ROOT}"), "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.to_string(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_talk_tls_with_tokens_and_clients_trust_the_ca() {
    let certs = TestCerts::new().unwrap();
    let mut cluster = Cluster::new("").await;
    for (name, path) in [("SHALE_TLS_CERT", &certs.cert), ("SHALE_TLS_KEY", &certs.key), ("SHALE_TLS_CA", &certs.ca)] {
        cluster.env.push((name, path.display().to_string()));
    }
    cluster.env.push(("SHALE_ROOT_TOKEN", ROOT.to_string()));
    let (metadata, metadata_grpc, metadata_http) = cluster.start_metadata();
    cluster.metadata.push(metadata_grpc);
    cluster.start_roles(1, 1);
    let gateway = https(&cluster.gateways[0].1);
    let reader = https(&cluster.readers[0].1);

    // curl over HTTPS: the gateway creates and appends (through metadata over TLS), the
    // reader reads back.
    let basin = format!(r#"{{"basin":"{BASIN}","config":{{"create_stream_on_append":true}}}}"#);
    let (status, body) = curl(
        &certs,
        &["-X", "POST", "-H", "content-type: application/json", "-d", &basin, &format!("{gateway}/v1/basins")],
    );
    assert_eq!(status, "201", "{body}");
    let records = r#"{"records":[{"body":"over tls"}]}"#;
    let append_url = format!("{gateway}/v1/streams/s/records");
    let (status, body) = curl(
        &certs,
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-H",
            &format!("s2-basin: {BASIN}"),
            "-d",
            records,
            &append_url,
        ],
    );
    assert_eq!(status, "200", "{body}");
    let (status, body) =
        curl(&certs, &["-H", &format!("s2-basin: {BASIN}"), &format!("{reader}/v1/streams/s/records?seq_num=0")]);
    assert_eq!(status, "200", "{body}");
    assert!(body.contains("over tls"), "{body}");
    let (status, _) = curl(&certs, &[&format!("{}/health", https(&metadata_http))]);
    assert_eq!(status, "200");

    // Plaintext to a TLS port fails, and the port goes on serving TLS.
    let plain =
        Command::new("curl").args(["-sS", "-m", "5", &format!("{}/health", cluster.gateways[0].1)]).output().unwrap();
    assert!(!plain.status.success(), "plaintext to a TLS port must fail");
    assert_eq!(curl(&certs, &[&format!("{gateway}/health")]).0, "200");

    // The CLI over gRPC with TLS: needs the CA and the token.
    let no_ca = shale().args(["basins", "list"]).env("SHALE_SERVER", "https://127.0.0.1:1").output().unwrap();
    assert_eq!(no_ca.status.code(), Some(2), "https without a CA is refused before connecting");
    let gateway_grpc = https(&cluster.gateway_grpc[0]);
    let cli = |args: &[&str], token: Option<&str>| {
        let mut command = shale();
        command.args(args).env("SHALE_SERVER", &gateway_grpc).env("SHALE_CA_FILE", &certs.ca);
        if let Some(token) = token {
            command.env("SHALE_ACCESS_TOKEN", token);
        }
        command.output().unwrap()
    };
    let listed = cli(&["basins", "list"], Some(ROOT));
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    assert_eq!(String::from_utf8(listed.stdout).unwrap().trim(), BASIN);
    assert_eq!(cli(&["basins", "list"], None).status.code(), Some(7), "no token: not authorised");

    cluster.stop_all();
    terminate(metadata);
}
