//! Idempotent producer fields on every append API of `shale serve`: JSON, S2's protobuf
//! `AppendInput` (the message S2S sessions carry too) and `shale.v1`; a retry gets the
//! original ack and applies nothing, a gap is refused, half a stamp is invalid.

#![allow(clippy::unwrap_used)]

use prost::Message;
use serde_json::{json, Value};
use shale_proto::{grpc as pb, s2};
use shale_tests::TestServer;

const BASIN: &str = "producer-basin";

async fn post_json(server: &TestServer, body: Value) -> (u16, Value) {
    let r = server.client.post(server.url("/v1/streams/s/records")).header("s2-basin", BASIN).json(&body);
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn post_protobuf(server: &TestServer, input: &s2::AppendInput) -> s2::AppendAck {
    let r = server
        .client
        .post(server.url("/v1/streams/s/records"))
        .header("s2-basin", BASIN)
        .header("content-type", "application/protobuf")
        .header("accept", "application/protobuf")
        .body(input.encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    s2::AppendAck::decode(r.bytes().await.unwrap()).unwrap()
}

#[tokio::test]
async fn producer_fields_on_json_protobuf_and_grpc() {
    let server = TestServer::start().await;
    let basin = json!({ "basin": BASIN, "config": { "create_stream_on_append": true } });
    assert_eq!(server.client.post(server.url("/v1/basins")).json(&basin).send().await.unwrap().status(), 201);

    let append =
        |seq: u64| json!({ "records": [{ "body": "a" }, { "body": "b" }], "producer_id": "json", "producer_seq": seq });
    let (status, first) = post_json(&server, append(0)).await;
    assert_eq!(status, 200, "{first}");
    let (status, again) = post_json(&server, append(0)).await;
    assert_eq!(status, 200);
    assert_eq!((&again["start"], &again["end"]), (&first["start"], &first["end"]));
    let (status, gap) = post_json(&server, append(2)).await;
    assert_eq!((status, gap), (412, json!({ "producer_seq_mismatch": 1 })));
    let (status, half) = post_json(&server, json!({ "records": [{ "body": "x" }], "producer_id": "json" })).await;
    assert_eq!(status, 400, "{half}");
    let (status, empty) =
        post_json(&server, json!({ "records": [{ "body": "x" }], "producer_id": "", "producer_seq": 0 })).await;
    assert_eq!(status, 400, "{empty}");

    let input = s2::AppendInput {
        records: vec![s2::AppendRecord { body: "p".into(), ..Default::default() }],
        producer_id: Some("protobuf".into()),
        producer_seq: Some(7),
        ..Default::default()
    };
    let first = post_protobuf(&server, &input).await;
    let again = post_protobuf(&server, &input).await;
    assert_eq!(first.start, again.start);
    assert_eq!(first.start.unwrap().seq_num, 2);

    let mut records = pb::records_client::RecordsClient::connect(server.grpc.clone()).await.unwrap();
    let request = pb::AppendRequest {
        basin: BASIN.into(),
        stream: "s".into(),
        records: vec![pb::AppendRecord { body: "g".into(), ..Default::default() }],
        producer_id: Some("grpc".into()),
        producer_seq: Some(0),
        ..Default::default()
    };
    let first = records.append(request.clone()).await.unwrap().into_inner();
    let again = records.append(request.clone()).await.unwrap().into_inner();
    assert_eq!(first.start, again.start);
    let gap = pb::AppendRequest { producer_seq: Some(5), ..request };
    let status = records.append(gap).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);

    let check = pb::CheckTailRequest { basin: BASIN.into(), stream: "s".into() };
    let tail = records.check_tail(check).await.unwrap().into_inner().tail.unwrap();
    assert_eq!(tail.seq_num, 4, "two JSON records, one protobuf, one gRPC: each once");
    server.stop().await;
}
