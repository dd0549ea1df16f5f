//! One loopback address in front of a gateway and a reader, for clients that take a
//! single endpoint (S2's CLI and SDKs) when benchmarking the separate roles: reads of
//! records (`GET .../records...`, sessions included) go to the reader, everything else
//! to the gateway. Requests and answers stream through unbuffered, over HTTP/2 to both
//! roles, as a load balancer routing by method and path would.
//!   shale-route --listen 127.0.0.1:18093 --gateway http://127.0.0.1:18081 --reader http://127.0.0.1:18083

use std::net::SocketAddr;

use anyhow::Context;
use clap::Parser;
use hyper::body::Incoming;
use hyper::header::{HeaderName, CONNECTION, HOST, TRANSFER_ENCODING, UPGRADE};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;

#[derive(Debug, Parser)]
struct Args {
    #[arg(long, default_value = "127.0.0.1:18093")]
    listen: SocketAddr,
    /// Where appends and management go.
    #[arg(long)]
    gateway: String,
    /// Where reads go.
    #[arg(long)]
    reader: String,
}

/// HTTP/2 flow-control windows (and send buffer) on both sides of the proxy. With the
/// stack's defaults (1-2 MiB windows, a 400 KiB send buffer) a catch-up read through two
/// hops waits on window updates and ran at a third of its direct rate with the CPUs 40%
/// idle; a load balancer in front of a log is configured for bulk streams the same way.
const WINDOW: u32 = 16 << 20;
/// The largest DATA frame either peer of the proxy may send it.
const MAX_FRAME: u32 = 1 << 20;

/// Headers that belong to one hop and may not travel over HTTP/2.
const HOP_BY_HOP: [HeaderName; 4] = [CONNECTION, TRANSFER_ENCODING, UPGRADE, HOST];

fn upstream<'a>(request: &Request<Incoming>, args: &'a Args) -> &'a str {
    let is_read = request.method() == Method::GET && request.uri().path().contains("/records");
    if is_read {
        &args.reader
    } else {
        &args.gateway
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: &'static Args = Box::leak(Box::new(Args::parse()));
    let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .http2_initial_stream_window_size(WINDOW)
        .http2_initial_connection_window_size(2 * WINDOW)
        .http2_max_frame_size(MAX_FRAME)
        .build_http();
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    eprintln!("routing {} -> reads {}, the rest {}", args.listen, args.reader, args.gateway);
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let client = client.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                let target = upstream(&request, args);
                let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
                let uri = format!("{target}{path}").parse();
                for name in &HOP_BY_HOP {
                    request.headers_mut().remove(name);
                }
                let client = client.clone();
                async move {
                    *request.uri_mut() = uri?;
                    *request.version_mut() = hyper::Version::HTTP_2;
                    anyhow::Ok(client.request(request).await?)
                }
            });
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http2()
                .initial_stream_window_size(WINDOW)
                .initial_connection_window_size(2 * WINDOW)
                .max_frame_size(MAX_FRAME)
                .max_send_buf_size(WINDOW as usize);
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), service).await {
                eprintln!("connection ended: {e}");
            }
        });
    }
}
