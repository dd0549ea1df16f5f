//! Atomic appends across streams (`POST /v1/records`, `shale.v1.Records/AppendAtomic`):
//! 16 clients move "transfers" between 10 streams, each transfer one record in each of
//! two streams, conditioned on both tails. Afterwards, read from the streams themselves,
//! every transfer is in both streams or in neither, exactly where its acks said.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use serde_json::{json, Value};
use shale_proto::grpc as pb;
use shale_proto::grpc::records_client::RecordsClient;
use shale_tests::TestServer;

const BASIN: &str = "atomic-basin";
const STREAMS: usize = 10;
const CLIENTS: usize = 16;
const TRANSFERS_PER_CLIENT: usize = 25;

fn stream(i: usize) -> String {
    format!("acct-{i}")
}

async fn post(server: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let request = server.client.post(server.url(path)).header("s2-basin", BASIN).json(&body).send();
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), request)
        .await
        .unwrap_or_else(|_| panic!("no answer to {body}"))
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn tail(server: &TestServer, stream: &str) -> u64 {
    let request =
        server.client.get(server.url(&format!("/v1/streams/{stream}/records/tail"))).header("s2-basin", BASIN).send();
    let response = tokio::time::timeout(std::time::Duration::from_secs(10), request)
        .await
        .unwrap_or_else(|_| panic!("no tail of {stream}"))
        .unwrap();
    response.json::<Value>().await.unwrap()["tail"]["seq_num"].as_u64().unwrap()
}

/// Every record of a stream: sequence number and body.
async fn records(server: &TestServer, stream: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    loop {
        let url = server.url(&format!("/v1/streams/{stream}/records?seq_num={}&count=1000", out.len()));
        let batch: Value = server.client.get(url).header("s2-basin", BASIN).send().await.unwrap().json().await.unwrap();
        let records = batch["records"].as_array().unwrap();
        if records.is_empty() {
            return out;
        }
        for r in records {
            out.push((r["seq_num"].as_u64().unwrap(), r["body"].as_str().unwrap().to_string()));
        }
    }
}

/// What a client saw of one transfer.
#[derive(Debug)]
enum Outcome {
    /// Acked: the two streams and the sequence numbers the acks gave.
    Applied([(String, u64); 2]),
    Refused,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_transfers_are_all_or_nothing_in_every_stream() {
    let server = TestServer::start().await;
    let (status, body) = post(&server, "/v1/basins", json!({ "basin": BASIN })).await;
    assert_eq!(status, 201, "{body}");
    for i in 0..STREAMS {
        assert_eq!(post(&server, "/v1/streams", json!({ "stream": stream(i) })).await.0, 201);
    }
    let server = std::sync::Arc::new(server);
    // Rounds: every client reads its two tails, then all post at once, so transfers
    // that share a stream race (16 clients touch 32 stream slots of 10 each round).
    let round = std::sync::Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let clients = (0..CLIENTS).map(|c| {
        let (server, round) = (server.clone(), round.clone());
        tokio::spawn(async move {
            let mut outcomes = HashMap::new();
            for t in 0..TRANSFERS_PER_CLIENT {
                let id = format!("t{c}-{t}");
                let from = (c * 7 + t * 3) % STREAMS;
                let to = (from + 1 + (c + t) % (STREAMS - 1)) % STREAMS;
                let (from, to) = (stream(from), stream(to));
                round.wait().await;
                let (from_tail, to_tail) = (tail(&server, &from).await, tail(&server, &to).await);
                round.wait().await;
                let body = json!({ "appends": [
                    { "stream": from, "records": [{ "body": id }], "match_seq_num": from_tail },
                    { "stream": to, "records": [{ "body": id }], "match_seq_num": to_tail },
                ]});
                let (status, answer) = post(&server, "/v1/records", body).await;
                let outcome = match status {
                    200 => {
                        let seq = |i: usize| answer["acks"][i]["start"]["seq_num"].as_u64().unwrap();
                        assert_eq!((seq(0), seq(1)), (from_tail, to_tail), "acks at the conditioned tails");
                        Outcome::Applied([(from, seq(0)), (to, seq(1))])
                    }
                    412 => {
                        let failed = answer["stream"].as_str().unwrap();
                        assert!(failed == from || failed == to, "the refusal names a stream of the group: {answer}");
                        assert!(answer["seq_num_mismatch"].is_u64(), "{answer}");
                        Outcome::Refused
                    }
                    // A stream's appends in one segment after a refused one are not
                    // committed either (retryable), so a failure never reorders a stream.
                    503 => {
                        assert!(answer["message"].as_str().unwrap().contains("earlier append"), "{answer}");
                        Outcome::Refused
                    }
                    other => panic!("unexpected {other}: {answer}"),
                };
                outcomes.insert(id, outcome);
            }
            outcomes
        })
    });
    let clients: Vec<_> = clients.collect();
    let mut outcomes = HashMap::new();
    for client in clients {
        outcomes.extend(client.await.unwrap());
    }

    // Where each transfer id appears, from the records themselves.
    let mut found: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for i in 0..STREAMS {
        let records = records(&server, &stream(i)).await;
        for (n, (seq, _)) in records.iter().enumerate() {
            assert_eq!(*seq, n as u64, "dense sequence numbers in {}", stream(i));
        }
        for (seq, body) in records {
            found.entry(body).or_default().push((stream(i), seq));
        }
    }
    let applied = outcomes.values().filter(|o| matches!(o, Outcome::Applied(_))).count();
    assert!(applied > 0 && applied < outcomes.len(), "some transfers applied ({applied}), some refused");
    for (id, outcome) in &outcomes {
        let mut places = found.remove(id).unwrap_or_default();
        places.sort();
        match outcome {
            Outcome::Applied(expected) => {
                let mut expected = expected.to_vec();
                expected.sort();
                assert_eq!(places, expected, "transfer {id} is in both streams where its acks said");
            }
            Outcome::Refused => assert!(places.is_empty(), "refused transfer {id} left {places:?}"),
        }
    }
    assert!(found.is_empty(), "records from no transfer: {found:?}");

    // The same over gRPC, and the limits.
    let mut client = RecordsClient::connect(server.grpc.clone()).await.unwrap();
    let append = |s: usize| pb::AppendRequest {
        stream: stream(s),
        records: vec![pb::AppendRecord { body: b"grpc".to_vec().into(), ..Default::default() }],
        ..Default::default()
    };
    let request = pb::AppendAtomicRequest { basin: BASIN.into(), appends: vec![append(0), append(1)] };
    let acks = client.append_atomic(request).await.unwrap().into_inner().acks;
    assert_eq!(acks.len(), 2);
    let twice = pb::AppendAtomicRequest { basin: BASIN.into(), appends: vec![append(2), append(2)] };
    assert_eq!(client.append_atomic(twice).await.unwrap_err().code(), tonic::Code::InvalidArgument);
    let missing = json!({ "appends": [{ "stream": stream(3), "records": [{ "body": "x" }] },
                                      { "stream": "no-such-stream", "records": [{ "body": "x" }] }] });
    let tail_before = tail(&server, &stream(3)).await;
    let (status, body) = post(&server, "/v1/records", missing).await;
    assert_eq!((status, body["stream"].as_str()), (404, Some("no-such-stream")), "{body}");
    assert_eq!(tail(&server, &stream(3)).await, tail_before, "the other stream did not advance");
}
