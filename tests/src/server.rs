use std::time::Duration;

use futures::StreamExt;
use shale::{serve, Running, ServeConfig};

/// `shale serve` in process, on a loopback port, over a fresh in-memory store.
pub struct TestServer {
    pub base: String,
    pub grpc: String,
    /// Kafka's bootstrap address, when the configuration turned the listener on.
    pub kafka: Option<String>,
    pub client: reqwest::Client,
    running: Running,
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(|_| {}).await
    }

    /// [`Self::start`] with its Kafka listener on a loopback port ([`Self::kafka`]).
    pub async fn start_with_kafka() -> TestServer {
        Self::start_with(|config| config.kafka.listen = Some("127.0.0.1:0".parse().unwrap())).await
    }

    /// [`Self::start`] with settings changed by `configure`.
    pub async fn start_with(configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
        let mut config = ServeConfig {
            store: Some("memory://".into()),
            http: "127.0.0.1:0".parse().unwrap(),
            grpc: "127.0.0.1:0".parse().unwrap(),
            ..ServeConfig::default()
        };
        configure(&mut config);
        let running = serve(config).await.unwrap();
        TestServer {
            base: format!("http://{}", running.http_addr),
            grpc: format!("http://{}", running.grpc_addr),
            kafka: running.kafka_addr.map(|addr| addr.to_string()),
            client: reqwest::Client::new(),
            running,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn stop(self) {
        self.running.shutdown().await.unwrap();
    }
}

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// Reads events from an SSE response as they arrive.
pub struct SseReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl SseReader {
    pub fn new(response: reqwest::Response) -> Self {
        Self { body: response.bytes_stream().boxed(), buffer: String::new() }
    }

    /// The next event, or `None` when the stream ends; fails the test after `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let mut event = SseEvent { event: "message".into(), ..SseEvent::default() };
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event.event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        event.id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        event.data.push_str(v.trim_start());
                    }
                }
                return Some(event);
            }
            match tokio::time::timeout(timeout, self.body.next()).await.expect("no SSE event in time") {
                Some(chunk) => self.buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap())),
                None => return None,
            }
        }
    }
}
