//! Access control against `shale serve` with a root token: S2's access-token endpoints,
//! 401 and 403 over HTTP JSON, S2S sessions (S2's own SDK) and `shale.v1` gRPC, scoped
//! tokens, expiry, revocation, auto-prefixed streams, and refusals in `/metrics`.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use tokio::time::Instant;

use futures::StreamExt;
use serde_json::{json, Value};
use shale_metadata::ClusterToken;
use shale_proto::grpc as pb;
use shale_proto::grpc::access_tokens_client::AccessTokensClient;
use shale_proto::grpc::basins_client::BasinsClient;
use shale_proto::grpc::records_client::RecordsClient;
use shale_tests::{series, TestServer};
use tonic::Code;

const ROOT: &str = "root-secret-for-tests";

/// How long a process trusts a token lookup in these tests.
const BOUND: Duration = Duration::from_millis(300);

async fn server() -> TestServer {
    TestServer::start_with(|config| {
        config.auth.root_token = Some(ClusterToken(ROOT.into()));
        config.auth.revocation_bound = BOUND;
    })
    .await
}

/// An HTTP call with an optional token: status and JSON body.
async fn call(
    server: &TestServer,
    token: Option<&str>,
    method: reqwest::Method,
    path: &str,
    basin: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = server.client.request(method, server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(basin) = basin {
        request = request.header("s2-basin", basin);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

async fn issue(server: &TestServer, token: &str, info: Value) -> (u16, Value) {
    call(server, Some(token), reqwest::Method::POST, "/v1/access-tokens", None, Some(info)).await
}

async fn issue_ok(server: &TestServer, info: Value) -> String {
    let (status, body) = issue(server, ROOT, info).await;
    assert_eq!(status, 201, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

async fn seed(server: &TestServer) {
    for basin in ["team-a-x", "team-b-x"] {
        let (status, body) = call(
            server,
            Some(ROOT),
            reqwest::Method::POST,
            "/v1/basins",
            None,
            Some(json!({ "basin": basin, "config": { "create_stream_on_append": true } })),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        let records = json!({ "records": [{ "body": "one" }, { "body": "two" }] });
        let (status, body) =
            call(server, Some(ROOT), reqwest::Method::POST, "/v1/streams/s/records", Some(basin), Some(records)).await;
        assert_eq!(status, 200, "{body}");
    }
}

fn read_only_team_a() -> Value {
    json!({
        "id": "team-a/reader",
        "scope": { "basins": { "prefix": "team-a-" }, "streams": { "prefix": "" },
                   "op_groups": { "stream": { "read": true, "write": false } } }
    })
}

const READ_FROM_0: &str = "/v1/streams/s/records?seq_num=0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_json_needs_a_token_and_honours_its_scope() {
    let server = server().await;
    seed(&server).await;

    let (status, body) = call(&server, None, reqwest::Method::GET, "/v1/basins", None, None).await;
    assert_eq!((status, body["code"].as_str()), (401, Some("authn")), "{body}");
    let (status, _) =
        call(&server, Some("not-a-token"), reqwest::Method::DELETE, "/v1/basins/team-a-x", None, None).await;
    assert_eq!(status, 401);
    assert_eq!(server.client.get(server.url("/health")).send().await.unwrap().status(), 200);
    assert_eq!(server.client.get(server.url("/metrics")).send().await.unwrap().status(), 401);

    let reader = issue_ok(&server, read_only_team_a()).await;
    let (status, body) = call(&server, Some(&reader), reqwest::Method::GET, READ_FROM_0, Some("team-a-x"), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"].as_array().unwrap().len(), 2);
    let append = json!({ "records": [{ "body": "three" }] });
    let (status, body) =
        call(&server, Some(&reader), reqwest::Method::POST, "/v1/streams/s/records", Some("team-a-x"), Some(append))
            .await;
    assert_eq!((status, body["code"].as_str()), (403, Some("permission_denied")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("`append`"), "{body}");
    let (status, body) = call(&server, Some(&reader), reqwest::Method::GET, READ_FROM_0, Some("team-b-x"), None).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["message"].as_str().unwrap().contains("team-b-x"), "{body}");
    let (status, _) = call(&server, Some(&reader), reqwest::Method::GET, "/v1/basins", None, None).await;
    assert_eq!(status, 403, "listing basins is an account operation the token lacks");
    // The refused append applied nothing.
    let (_, body) =
        call(&server, Some(ROOT), reqwest::Method::GET, "/v1/streams/s/records/tail", Some("team-a-x"), None).await;
    assert_eq!(body["tail"]["seq_num"], 2);

    // A token may not issue one wider than itself; the read-only one may not issue at all.
    let (status, _) = issue(&server, &reader, json!({ "id": "x", "scope": { "ops": ["read"] } })).await;
    assert_eq!(status, 403);
    let issuer = issue_ok(&server, json!({
        "id": "team-a/issuer",
        "scope": { "basins": { "prefix": "team-a-" }, "streams": { "prefix": "" }, "access_tokens": { "prefix": "team-a/" },
                   "ops": ["issue-access-token", "read"] }
    }))
    .await;
    let wider = json!({ "id": "team-a/writer", "scope": { "basins": { "prefix": "team-a-" }, "ops": ["append"] } });
    assert_eq!(issue(&server, &issuer, wider).await.0, 403);
    let narrower = json!({ "id": "team-a/narrow", "scope": { "basins": { "exact": "team-a-x" }, "ops": ["read"] } });
    assert_eq!(issue(&server, &issuer, narrower).await.0, 201);
    let elsewhere = json!({ "id": "team-b/narrow", "scope": { "basins": { "exact": "team-a-x" }, "ops": ["read"] } });
    assert_eq!(issue(&server, &issuer, elsewhere).await.0, 403, "token ids outside its access_tokens scope");

    // Expired tokens are refused.
    let expired = issue_ok(&server, json!({
        "id": "old", "expires_at": "2020-01-01T00:00:00Z", "scope": { "basins": { "prefix": "" }, "ops": ["list-basins"] }
    }))
    .await;
    let (status, body) = call(&server, Some(&expired), reqwest::Method::GET, "/v1/basins", None, None).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["message"].as_str().unwrap().contains("expired"), "{body}");

    // Listing shows ids and scopes, never secrets; an id cannot be issued twice.
    let (status, body) =
        call(&server, Some(ROOT), reqwest::Method::GET, "/v1/access-tokens?prefix=team-a/", None, None).await;
    assert_eq!(status, 200, "{body}");
    let ids: Vec<&str> = body["access_tokens"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["team-a/issuer", "team-a/narrow", "team-a/reader"]);
    assert!(!body.to_string().contains(&reader));
    assert_eq!(body["access_tokens"][2]["scope"]["basins"], json!({ "prefix": "team-a-" }));
    assert_eq!(issue(&server, ROOT, read_only_team_a()).await.0, 409);

    // Revoked: refused at once on this process.
    let (status, _) =
        call(&server, Some(ROOT), reqwest::Method::DELETE, "/v1/access-tokens/team-a%2Freader", None, None).await;
    assert_eq!(status, 204);
    let (status, _) = call(&server, Some(&reader), reqwest::Method::GET, READ_FROM_0, Some("team-a-x"), None).await;
    assert_eq!(status, 401);
    let (status, body) =
        call(&server, Some(ROOT), reqwest::Method::DELETE, "/v1/access-tokens/team-a%2Freader", None, None).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("access_token_not_found")), "{body}");

    let metrics =
        server.client.get(server.url("/metrics")).bearer_auth(ROOT).send().await.unwrap().text().await.unwrap();
    let count = |reason: &str| -> u64 {
        let name = format!("shale_auth_failures_total{{reason=\"{reason}\"}}");
        series(&metrics, &name).unwrap_or_else(|| panic!("{name} missing"))
    };
    assert!(
        count("missing") >= 2 && count("unknown") >= 2 && count("expired") >= 1 && count("denied") >= 4,
        "{metrics}"
    );
    assert!(!metrics.contains(ROOT) && !metrics.contains(&reader));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_prefixed_tokens_see_their_own_namespace() {
    let server = server().await;
    seed(&server).await;
    let user = issue_ok(
        &server,
        json!({
            "id": "user-7", "auto_prefix_streams": true,
            "scope": { "basins": { "exact": "team-a-x" }, "streams": { "prefix": "users/7/" },
                       "ops": ["create-stream", "list-streams", "append", "read"] }
        }),
    )
    .await;
    let (status, body) = call(
        &server,
        Some(&user),
        reqwest::Method::POST,
        "/v1/streams",
        Some("team-a-x"),
        Some(json!({ "stream": "clicks" })),
    )
    .await;
    assert_eq!((status, body["name"].as_str()), (201, Some("clicks")), "{body}");
    let records = json!({ "records": [{ "body": "c1" }] });
    let (status, _) = call(
        &server,
        Some(&user),
        reqwest::Method::POST,
        "/v1/streams/clicks/records",
        Some("team-a-x"),
        Some(records),
    )
    .await;
    assert_eq!(status, 200);
    let (_, mine) = call(&server, Some(&user), reqwest::Method::GET, "/v1/streams", Some("team-a-x"), None).await;
    let (_, all) = call(&server, Some(ROOT), reqwest::Method::GET, "/v1/streams", Some("team-a-x"), None).await;
    let names = |v: &Value| -> Vec<String> {
        v["streams"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(&mine), vec!["clicks"]);
    assert_eq!(names(&all), vec!["s", "users/7/clicks"]);
    let (_, body) = call(
        &server,
        Some(ROOT),
        reqwest::Method::GET,
        "/v1/streams/users%2F7%2Fclicks/records?seq_num=0",
        Some("team-a-x"),
        None,
    )
    .await;
    assert_eq!(body["records"][0]["body"], "c1");
    let refused =
        json!({ "id": "bad", "auto_prefix_streams": true, "scope": { "streams": { "exact": "x" }, "ops": ["read"] } });
    assert_eq!(issue(&server, ROOT, refused).await.0, 400);
    server.stop().await;
}

fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_answers_unauthenticated_and_permission_denied() {
    let server = server().await;
    seed(&server).await;
    let mut basins = BasinsClient::connect(server.grpc.clone()).await.unwrap();
    let list = pb::ListBasinsRequest::default();
    assert_eq!(basins.list_basins(list.clone()).await.unwrap_err().code(), Code::Unauthenticated);
    assert_eq!(basins.list_basins(with_token(list.clone(), ROOT)).await.unwrap().into_inner().basins.len(), 2);

    let mut tokens = AccessTokensClient::connect(server.grpc.clone()).await.unwrap();
    let info = pb::AccessTokenInfo {
        id: "grpc-reader".into(),
        expires_at: None,
        auto_prefix_streams: false,
        scope: Some(pb::AccessTokenScope {
            basins: Some(pb::ResourceSet { matching: Some(pb::resource_set::Matching::Prefix("team-a-".into())) }),
            streams: Some(pb::ResourceSet { matching: Some(pb::resource_set::Matching::Prefix(String::new())) }),
            ops: vec!["read".into(), "check-tail".into()],
            ..Default::default()
        }),
    };
    let reader = tokens.issue_access_token(with_token(info, ROOT)).await.unwrap().into_inner().access_token;
    let listed = tokens.list_access_tokens(with_token(pb::ListAccessTokensRequest::default(), ROOT)).await.unwrap();
    assert_eq!(listed.into_inner().access_tokens[0].scope.as_ref().unwrap().ops, vec!["check-tail", "read"]);

    let mut records = RecordsClient::connect(server.grpc.clone()).await.unwrap();
    let read = |basin: &str| pb::ReadRequest {
        basin: basin.into(),
        stream: "s".into(),
        start: Some(pb::read_request::Start::SeqNum(0)),
        ..Default::default()
    };
    let batch = records.read(with_token(read("team-a-x"), &reader)).await.unwrap().into_inner();
    assert_eq!(batch.records.len(), 2);
    let denied = records.read(with_token(read("team-b-x"), &reader)).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let append = pb::AppendRequest {
        basin: "team-a-x".into(),
        stream: "s".into(),
        records: vec![pb::AppendRecord { body: b"x".to_vec().into(), ..Default::default() }],
        ..Default::default()
    };
    assert_eq!(records.append(with_token(append.clone(), &reader)).await.unwrap_err().code(), Code::PermissionDenied);

    let mut session = records.read_session(with_token(read("team-a-x"), &reader)).await.unwrap().into_inner();
    let first = session.next().await.unwrap().unwrap();
    assert!(matches!(first.event, Some(pb::read_session_response::Event::Batch(b)) if b.records.len() == 2));
    let revoke = pb::RevokeAccessTokenRequest { id: "grpc-reader".into() };
    tokens.revoke_access_token(with_token(revoke, ROOT)).await.unwrap();
    let revoked_at = Instant::now();
    assert_eq!(records.read(with_token(read("team-a-x"), &reader)).await.unwrap_err().code(), Code::Unauthenticated);
    // The session opened before the revocation ends within the bound (heartbeats may come first).
    let ended = tokio::time::timeout(BOUND * 10, async {
        loop {
            match session.next().await {
                Some(Ok(_heartbeat)) => continue,
                Some(Err(status)) => break status,
                None => panic!("the session ended without an error"),
            }
        }
    })
    .await
    .expect("the session outlived its revoked token");
    assert_eq!(ended.code(), Code::Unauthenticated, "{ended:?}");
    assert!(revoked_at.elapsed() < BOUND * 3, "ended {:?} after the revocation", revoked_at.elapsed());

    // An append session outlives its request: once its token is revoked, the next append
    // after the bound is refused.
    let writer_info = pb::AccessTokenInfo {
        id: "grpc-writer".into(),
        scope: Some(pb::AccessTokenScope {
            basins: Some(pb::ResourceSet { matching: Some(pb::resource_set::Matching::Exact("team-a-x".into())) }),
            streams: Some(pb::ResourceSet { matching: Some(pb::resource_set::Matching::Prefix(String::new())) }),
            ops: vec!["append".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let writer = tokens.issue_access_token(with_token(writer_info, ROOT)).await.unwrap().into_inner().access_token;
    let (inputs, outgoing) = tokio::sync::mpsc::channel(4);
    let mut acks = records
        .append_session(with_token(tokio_stream::wrappers::ReceiverStream::new(outgoing), &writer))
        .await
        .unwrap()
        .into_inner();
    inputs.send(append.clone()).await.unwrap();
    assert_eq!(acks.next().await.unwrap().unwrap().end.unwrap().seq_num, 3);
    let revoke = pb::RevokeAccessTokenRequest { id: "grpc-writer".into() };
    tokens.revoke_access_token(with_token(revoke, ROOT)).await.unwrap();
    let revoked_at = Instant::now();
    let refused = loop {
        inputs.send(append.clone()).await.unwrap();
        match acks.next().await.unwrap() {
            Ok(_) => {
                assert!(revoked_at.elapsed() < BOUND * 3, "appends still accepted {:?} after", revoked_at.elapsed())
            }
            Err(status) => break status,
        }
    };
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(revoked_at.elapsed() < BOUND * 3);
    server.stop().await;
}

/// S2's SDK issues a token through the API and uses it: S2S read sessions within its
/// scope, 403 outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s2_sdk_issues_a_token_and_uses_it_over_s2s() {
    use s2_sdk::types::{
        AccessTokenScopeInput, AppendInput, AppendRecord, AppendRecordBatch, BasinMatcher, IssueAccessTokenInput,
        OperationGroupPermissions, ReadFrom, ReadInput, ReadLimits, ReadSessionConfig, ReadStart, ReadStop,
        ReadWritePermissions, S2Config, S2Endpoints, StreamMatcher,
    };
    let server = server().await;
    seed(&server).await;
    let sdk = |token: &str| {
        let endpoints = S2Endpoints::for_endpoint(&server.base).unwrap();
        s2_sdk::S2::new(S2Config::new(token.to_string()).with_endpoints(endpoints)).unwrap()
    };
    let root = sdk(ROOT);
    let scope = AccessTokenScopeInput::from_op_group_perms(
        OperationGroupPermissions::new().with_stream(ReadWritePermissions::read_only()),
    )
    .with_basins(BasinMatcher::Prefix("team-a-".parse().unwrap()))
    .with_streams(StreamMatcher::Prefix("".parse().unwrap()));
    let secret =
        root.issue_access_token(IssueAccessTokenInput::new("sdk-reader".parse().unwrap(), scope)).await.unwrap();
    let listed = root.list_access_tokens(Default::default()).await.unwrap();
    assert!(listed.values.iter().any(|t| t.id.to_string() == "sdk-reader"));

    let reader = sdk(&secret);
    let stream = reader.basin("team-a-x".parse().unwrap()).stream("s".parse().unwrap());
    let input = ReadInput::new()
        .with_start(ReadStart::new().with_from(ReadFrom::SeqNum(0)))
        .with_stop(ReadStop::new().with_limits(ReadLimits::new().with_count(2)));
    let mut session = stream.read_session(input, ReadSessionConfig::default()).await.unwrap();
    let mut bodies = Vec::new();
    while let Some(batch) = session.next().await {
        bodies.extend(batch.unwrap().records.into_iter().map(|r| r.body.to_vec()));
    }
    assert_eq!(bodies, vec![b"one".to_vec(), b"two".to_vec()]);
    let append = AppendInput::new(AppendRecordBatch::try_from_iter([AppendRecord::new("x").unwrap()]).unwrap());
    let refused = stream.append(append).await.unwrap_err();
    assert!(refused.to_string().contains("permission_denied") || refused.to_string().contains("append"), "{refused}");
    let other = reader.basin("team-b-x".parse().unwrap()).stream("s".parse().unwrap());
    assert!(other.check_tail().await.is_err());
    root.revoke_access_token("sdk-reader".parse().unwrap()).await.unwrap();
    assert!(stream.check_tail().await.is_err());
    server.stop().await;
}

/// Without a root token nothing changes for clients, and issuing a token is refused
/// rather than giving one that would never be checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_root_token_access_control_is_off() {
    let server = TestServer::start().await;
    let (status, _) = call(&server, None, reqwest::Method::GET, "/v1/basins", None, None).await;
    assert_eq!(status, 200);
    let (status, _) = call(&server, Some("anything"), reqwest::Method::GET, "/v1/basins", None, None).await;
    assert_eq!(status, 200, "S2 clients always send a token; it is ignored");
    let (status, body) = issue(&server, "anything", read_only_team_a()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("access control is off"), "{body}");
    assert_eq!(server.client.get(server.url("/metrics")).send().await.unwrap().status(), 200);
    server.stop().await;
}

/// S2's stream metrics need the `stream-metrics` operation on the stream (in the stream
/// read group), not `read`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streams_storage_needs_the_stream_metrics_operation() {
    let server = server().await;
    seed(&server).await;
    let storage = "/v1/metrics/team-a-x/s?set=storage";
    let only_read = issue_ok(&server, json!({
        "id": "read-only-op", "scope": { "basins": { "prefix": "team-a-" }, "streams": { "prefix": "" }, "ops": ["read"] }
    }))
    .await;
    let (status, body) = call(&server, Some(&only_read), reqwest::Method::GET, storage, None, None).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("permission_denied")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("`stream-metrics`"), "{body}");

    let metrics_only = issue_ok(&server, json!({
        "id": "metrics-op", "scope": { "basins": { "prefix": "team-a-" }, "streams": { "prefix": "" }, "ops": ["stream-metrics"] }
    }))
    .await;
    let group_reader = issue_ok(&server, read_only_team_a()).await;
    for token in [&metrics_only, &group_reader] {
        let (status, body) = call(&server, Some(token), reqwest::Method::GET, storage, None, None).await;
        assert_eq!(status, 200, "{body}");
        let point = &body["values"][0]["gauge"]["values"][0];
        assert_eq!(point[1], json!(22.0), "two records of 3 bytes, 8 more each: {body}");
        let (status, _) =
            call(&server, Some(token), reqwest::Method::GET, "/v1/metrics/team-b-x/s?set=storage", None, None).await;
        assert_eq!(status, 403, "another team's basin");
        let (status, _) = call(&server, Some(token), reqwest::Method::GET, READ_FROM_0, Some("team-a-x"), None).await;
        assert_eq!(status, if *token == metrics_only { 403 } else { 200 }, "metrics do not grant reads");
    }
    server.stop().await;
}
