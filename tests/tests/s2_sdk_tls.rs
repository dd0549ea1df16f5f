//! S2's Rust SDK (unmodified) against `shale serve` on TLS with access control: it trusts
//! a custom CA through `SSL_CERT_FILE` (the SDK loads the platform's roots, which that
//! variable extends), and authenticates with the root token. Alone in its file because
//! it sets a process-wide variable.

#![allow(clippy::unwrap_used)]

use s2_sdk::types::{AppendInput, AppendRecord, AppendRecordBatch, CreateBasinInput, S2Config, S2Endpoints};
use shale_metadata::ClusterToken;
use shale_tests::tls::TestCerts;
use shale_tests::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_sdk_trusts_a_custom_ca_and_sends_its_token() {
    let certs = TestCerts::new().unwrap();
    // SAFETY: this test is the only one in its binary, and sets the variable before any
    // thread of its own reads the environment.
    unsafe { std::env::set_var("SSL_CERT_FILE", &certs.ca) };
    let server = TestServer::start_with(|config| {
        config.tls.cert = Some(certs.cert.clone());
        config.tls.key = Some(certs.key.clone());
        config.auth.root_token = Some(ClusterToken("sdk-root".into()));
    })
    .await;
    let endpoint = server.base.replacen("http://", "https://", 1);
    let client = |token: &str| {
        let config = S2Config::new(token.to_string())
            .with_endpoints(S2Endpoints::for_endpoint(&endpoint).unwrap())
            .with_rustls_aws_lc_rs_crypto_provider();
        s2_sdk::S2::new(config).unwrap()
    };
    let s2 = client("sdk-root");
    s2.create_basin(CreateBasinInput::new("tls-sdk-basin".parse().unwrap())).await.unwrap();
    let stream = s2.basin("tls-sdk-basin".parse().unwrap()).stream("events".parse().unwrap());
    let basin = s2.basin("tls-sdk-basin".parse().unwrap());
    basin.create_stream(s2_sdk::types::CreateStreamInput::new("events".parse().unwrap())).await.unwrap();
    let batch = AppendRecordBatch::try_from_iter([AppendRecord::new("secure").unwrap()]).unwrap();
    let ack = stream.append(AppendInput::new(batch)).await.unwrap();
    assert_eq!(ack.end.seq_num, 1);
    let refused = client("wrong-token").list_basins(Default::default()).await.unwrap_err();
    assert!(refused.to_string().contains("authn") || refused.to_string().contains("401"), "{refused}");
    server.stop().await;
}
