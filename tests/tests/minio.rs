//! Shale on MinIO in a container, started by testcontainers. Needs a Docker engine, so
//! every test here is ignored by default; run them with
//!   cargo nextest run -p shale-tests --test minio --run-ignored only
//! (documented in localstack/README.md). Without a Docker engine they fail loudly.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use aws_config::BehaviorVersion;
use aws_sdk_s3::config::Credentials;
use bytes::Bytes;
use shale_gateway::{AppendInput, GatewayConfig};
use shale_metadata::{BasinConfig, MetadataApi, MetadataError, StreamConfig};
use shale_proto::Record;
use shale_reader::ReadStart;
use shale_storage::object_store::aws::AmazonS3Builder;
use shale_storage::object_store::ObjectStore;
use shale_tests::{Node, TestStore};
use testcontainers::runners::AsyncRunner;
use testcontainers_modules::minio::MinIO;

const BUCKET: &str = "shale";

/// Creates the bucket with the AWS SDK (object_store cannot) and opens a store on it.
async fn minio_store(endpoint: &str) -> Arc<dyn ObjectStore> {
    let credentials = Credentials::new("minioadmin", "minioadmin", None, None, "minio");
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region("us-east-1")
        .credentials_provider(credentials)
        .load()
        .await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    s3.create_bucket().bucket(BUCKET).send().await.unwrap();
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_access_key_id("minioadmin")
            .with_secret_access_key("minioadmin")
            .build()
            .unwrap(),
    )
}

fn input(body: &str) -> AppendInput {
    AppendInput {
        basin: "minio-basin".into(),
        stream: "s".into(),
        records: vec![Record { body: Bytes::copy_from_slice(body.as_bytes()), ..Default::default() }],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Docker engine: cargo nextest run -p shale-tests --test minio --run-ignored only"]
async fn appends_reads_reopen_and_fencing_on_minio() {
    let minio = MinIO::default().start().await.expect("starting MinIO needs a running Docker engine");
    let port = minio.get_host_port_ipv4(9000).await.unwrap();
    let store = TestStore::on(minio_store(&format!("http://127.0.0.1:{port}")).await, format!("s3://{BUCKET}"));

    let node = Node::start(&store, GatewayConfig::default()).await;
    node.metadata.create_basin("minio-basin", BasinConfig::default()).await.unwrap();
    node.metadata.create_stream("minio-basin", "s", StreamConfig::default()).await.unwrap();
    for i in 0..10 {
        let ack = node.gateway.append(input(&format!("r{i}"))).await.unwrap();
        assert_eq!(ack.start.seq_num, i);
    }

    // A second node on the same bucket fences the first and sees every acked record.
    let second = Node::start(&store, GatewayConfig::default()).await;
    match node.metadata.create_stream("minio-basin", "late", StreamConfig::default()).await {
        Err(MetadataError::Fenced) => {}
        other => panic!("the first metadata must be fenced, got {other:?}"),
    }
    let request = shale_tests::read_request("minio-basin", "s", ReadStart::SeqNum(0));
    let output = second.reader.read(&request).await.unwrap();
    let bodies: Vec<_> = output.records.iter().map(|r| String::from_utf8(r.body.to_vec()).unwrap()).collect();
    assert_eq!(bodies, (0..10).map(|i| format!("r{i}")).collect::<Vec<_>>());
    assert_eq!(second.gateway.append(input("after")).await.unwrap().start.seq_num, 10);
    second.stop().await;
}
