//! Access control across separate processes on the local S3 server: `shale metadata`,
//! two gateways and a reader started with a root token. A token revoked through one
//! gateway stops working on the other gateway and on the reader within the documented
//! bound, and metadata refuses internal calls (and `/metrics`) without a token.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use tokio::time::Instant;

use common::cluster::Cluster;
use common::terminate;
use serde_json::json;
use shale_metadata::{ClusterToken, MetadataApi, RemoteConfig, RemoteMetadata};
use shale_proto::metadata_rpc as pb;

const ROOT: &str = "cluster-root-secret";
const BASIN: &str = "secure-basin";
/// `[auth] revocation_bound` in this cluster's config.
const BOUND: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_stops_working_on_every_process_within_the_bound() {
    let mut cluster = Cluster::new("[auth]\nrevocation_bound = \"2s\"\n").await;
    cluster.env.push(("SHALE_ROOT_TOKEN", ROOT.to_string()));
    let (metadata, metadata_grpc, metadata_http) = cluster.start_metadata();
    cluster.metadata.push(metadata_grpc.clone());
    cluster.start_roles(2, 1);
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let (gateway_a, gateway_b, reader) =
        (cluster.gateways[0].1.clone(), cluster.gateways[1].1.clone(), cluster.readers[0].1.clone());

    let unauthenticated = client.get(format!("{gateway_a}/v1/basins")).send().await.unwrap();
    assert_eq!(unauthenticated.status(), 401);
    let basin = json!({ "basin": BASIN, "config": { "create_stream_on_append": true } });
    let created = client.post(format!("{gateway_a}/v1/basins")).bearer_auth(ROOT).json(&basin).send().await.unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let info = json!({ "id": "app", "scope": { "basins": { "exact": BASIN }, "streams": { "prefix": "" },
                                               "op_groups": { "stream": { "read": true, "write": true } } } });
    let issued =
        client.post(format!("{gateway_a}/v1/access-tokens")).bearer_auth(ROOT).json(&info).send().await.unwrap();
    assert_eq!(issued.status(), 201);
    let token = issued.json::<serde_json::Value>().await.unwrap()["access_token"].as_str().unwrap().to_string();

    let append = |gateway: String| {
        let (client, token) = (client.clone(), token.clone());
        async move {
            client
                .post(format!("{gateway}/v1/streams/events/records"))
                .bearer_auth(token)
                .header("s2-basin", BASIN)
                .json(&json!({ "records": [{ "body": "e" }] }))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let read = || {
        let (client, token, reader) = (client.clone(), token.clone(), reader.clone());
        async move {
            client
                .get(format!("{reader}/v1/streams/events/records?seq_num=0"))
                .bearer_auth(token)
                .header("s2-basin", BASIN)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    // The token works everywhere (and each process now holds it in its cache).
    assert_eq!(append(gateway_a.clone()).await, 200);
    assert_eq!(append(gateway_b.clone()).await, 200);
    assert_eq!(read().await, 200);

    let revoked = client.delete(format!("{gateway_a}/v1/access-tokens/app")).bearer_auth(ROOT).send().await.unwrap();
    assert_eq!(revoked.status(), 204);
    let revoked_at = Instant::now();
    assert_eq!(append(gateway_a.clone()).await, 401, "refused at once where it was revoked");
    let (mut gateway_refused, mut reader_refused) = (None, None);
    while (gateway_refused.is_none() || reader_refused.is_none()) && revoked_at.elapsed() < BOUND * 3 {
        if gateway_refused.is_none() && append(gateway_b.clone()).await == 401 {
            gateway_refused = Some(revoked_at.elapsed());
        }
        if reader_refused.is_none() && read().await == 401 {
            reader_refused = Some(revoked_at.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The bound, plus the time one request takes.
    let limit = BOUND + Duration::from_millis(500);
    assert!(gateway_refused.is_some_and(|t| t <= limit), "other gateway refused after {gateway_refused:?}");
    assert!(reader_refused.is_some_and(|t| t <= limit), "reader refused after {reader_refused:?}");

    // Metadata's metrics need a token too; health stays open.
    let metrics = format!("{metadata_http}/metrics");
    assert_eq!(client.get(&metrics).send().await.unwrap().status(), 401);
    assert_eq!(client.get(&metrics).bearer_auth(ROOT).send().await.unwrap().status(), 200);
    assert_eq!(client.get(format!("{metadata_http}/health")).send().await.unwrap().status(), 200);

    // Metadata's internal API: refused without the cluster token, served with it.
    let mut raw = pb::metadata_client::MetadataClient::connect(format!("http://{metadata_grpc}")).await.unwrap();
    let list = pb::CatalogCall {
        call: Some(pb::catalog_call::Call::ListBasins(pb::ListRequest { limit: 10, ..Default::default() })),
    };
    let refused = raw.catalog(list).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let config = RemoteConfig { token: Some(ClusterToken(ROOT.into())), ..RemoteConfig::default() };
    let remote = RemoteMetadata::new(vec![metadata_grpc.clone()], None, config).unwrap();
    let basins = remote.list_basins("", "", 10).await.unwrap();
    assert_eq!(basins.items.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), vec![BASIN]);
    // A call that names nothing is the caller's error, not an unavailable metadata.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{metadata_grpc}")).unwrap().connect().await.unwrap();
    let token = shale_metadata::BearerToken::new(Some(ROOT)).unwrap();
    let mut authorized = pb::metadata_client::MetadataClient::with_interceptor(channel, token);
    let empty = authorized.catalog(pb::CatalogCall { call: None }).await.unwrap_err();
    assert_eq!(empty.code(), tonic::Code::InvalidArgument, "{empty:?}");
    assert!(empty.message().contains("does not decode"), "{empty:?}");

    cluster.stop_all();
    terminate(metadata);
}
