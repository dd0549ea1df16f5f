//! Client commands: talk gRPC to a Shale server (`--server`, `SHALE_SERVER`).
//!
//! Exit codes a script can rely on: 0 success, 2 invalid arguments, 3 not found,
//! 4 already exists, 5 append condition failed (sequence number or fencing token),
//! 6 server unavailable or overloaded, 7 no valid token or not permitted, 1 anything else.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use shale_metadata::BearerToken;
use shale_proto::grpc as pb;
use shale_proto::grpc::basins_client::BasinsClient;
use shale_proto::grpc::records_client::RecordsClient;
use shale_proto::grpc::streams_client::StreamsClient;
use tokio_stream::StreamExt;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

#[derive(Debug, Args)]
pub struct Connection {
    /// gRPC address of a Shale server.
    #[arg(long, env = "SHALE_SERVER", default_value = "http://127.0.0.1:50051", global = true)]
    pub server: String,
    /// Access token, when the server has access control on.
    #[arg(long, env = "SHALE_ACCESS_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// CA certificate (PEM) the server's certificate chains to, for `https://` servers.
    #[arg(long, env = "SHALE_CA_FILE", global = true)]
    pub ca_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum BasinsCommand {
    /// List basins.
    List {
        /// Only basins whose names start with this.
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Create a basin.
    Create {
        /// The basin's name: 8 to 48 lowercase letters, digits and hyphens.
        name: String,
        /// Create streams on first append.
        #[arg(long)]
        create_stream_on_append: bool,
    },
    /// Delete a basin and its streams.
    Delete {
        /// The basin's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum StreamsCommand {
    /// List the streams of a basin.
    List {
        /// The basin's name.
        basin: String,
        /// Only streams whose names start with this.
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Create a stream.
    Create {
        /// BASIN/STREAM
        target: String,
    },
    /// Delete a stream.
    Delete {
        /// BASIN/STREAM
        target: String,
    },
}

/// How records are written to stdout or read from stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One record body per line.
    Text,
    /// One JSON object per line: {"body", "headers", "timestamp"} (plus "seq_num" on reads).
    Json,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// BASIN/STREAM
    pub target: String,
    /// Start at this sequence number.
    #[arg(long, conflicts_with_all = ["ago", "tail_offset"])]
    pub from: Option<u64>,
    /// Resume from this tracked consumer's committed position (or the start given,
    /// when it has none) and commit the position after each batch printed.
    #[arg(long, conflicts_with_all = ["ago", "tail_offset"])]
    pub consumer: Option<String>,
    /// Start at records this old, e.g. 5m or 1h.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "tail_offset")]
    pub ago: Option<Duration>,
    /// Start this many records before the tail.
    #[arg(long)]
    pub tail_offset: Option<u64>,
    /// Stop after this many records.
    #[arg(long)]
    pub count: Option<u64>,
    /// Keep printing records as they are appended.
    #[arg(long)]
    pub follow: bool,
    /// How records are printed: bodies one per line, or one JSON object per line.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

/// A failed client command: message and exit code.
pub struct Failure(pub String, pub u8);

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Self {
        let code = match status.code() {
            tonic::Code::InvalidArgument | tonic::Code::OutOfRange => 2,
            tonic::Code::NotFound => 3,
            tonic::Code::AlreadyExists => 4,
            tonic::Code::FailedPrecondition => 5,
            tonic::Code::Unavailable | tonic::Code::ResourceExhausted => 6,
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => 7,
            _ => 1,
        };
        let details = String::from_utf8_lossy(status.details()).into_owned();
        let message = if details.is_empty() || details.contains("\"message\"") {
            status.message().to_string()
        } else {
            format!("{} {details}", status.message())
        };
        Failure(message, code)
    }
}

impl From<tonic::transport::Error> for Failure {
    fn from(error: tonic::transport::Error) -> Self {
        Failure(format!("cannot connect: {error}"), 6)
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure(error.to_string(), if error.kind() == std::io::ErrorKind::BrokenPipe { 0 } else { 1 })
    }
}

pub fn report(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`shale read ... | head`): done, quietly.
        Err(Failure(_, 0)) => ExitCode::SUCCESS,
        Err(Failure(message, code)) => {
            eprintln!("shale: error: {message}");
            ExitCode::from(code)
        }
    }
}

/// `host:port` as a URL: `https://` when a CA is given, else `http://`.
fn with_scheme(server: &str, tls: bool) -> String {
    match (server.contains("://"), tls) {
        (true, _) => server.to_string(),
        (false, true) => format!("https://{server}"),
        (false, false) => format!("http://{server}"),
    }
}

/// A connection to the server whose calls carry the access token, if one was given.
type Transport = InterceptedService<Channel, BearerToken>;

pub(crate) async fn channel(connection: &Connection) -> Result<Transport, Failure> {
    let token = BearerToken::new(connection.token.as_deref())
        .map_err(|_| Failure("the access token is not printable ASCII".into(), 2))?;
    let server = with_scheme(&connection.server, connection.ca_file.is_some());
    let mut endpoint = Channel::from_shared(server.clone()).map_err(|e| Failure(format!("bad --server: {e}"), 2))?;
    match &connection.ca_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| Failure(format!("reading {}: {e}", path.display()), 2))?;
            endpoint = endpoint.tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)))?;
        }
        None if server.starts_with("https://") => {
            return Err(Failure("an https:// server needs --ca-file (SHALE_CA_FILE)".into(), 2));
        }
        None => {}
    }
    let channel = endpoint.connect().await.map_err(|e| {
        let cause = std::error::Error::source(&e).map(|c| c.to_string()).unwrap_or_else(|| e.to_string());
        Failure(format!("cannot connect to {server}: {cause}"), 6)
    })?;
    Ok(InterceptedService::new(channel, token))
}

pub(crate) fn split_target(target: &str) -> Result<(String, String), Failure> {
    match target.split_once('/') {
        Some((basin, stream)) if !basin.is_empty() && !stream.is_empty() => Ok((basin.into(), stream.into())),
        _ => Err(Failure(format!("expected BASIN/STREAM, got `{target}`"), 2)),
    }
}

pub async fn basins(connection: &Connection, command: BasinsCommand) -> Result<(), Failure> {
    let mut client = BasinsClient::new(channel(connection).await?);
    match command {
        BasinsCommand::List { prefix } => {
            let mut start_after = String::new();
            loop {
                let page = client
                    .list_basins(pb::ListBasinsRequest { prefix: prefix.clone(), start_after, limit: 0 })
                    .await?
                    .into_inner();
                for basin in &page.basins {
                    println!("{}", basin.name);
                }
                match page.basins.last() {
                    Some(last) if page.has_more => start_after = last.name.clone(),
                    _ => return Ok(()),
                }
            }
        }
        BasinsCommand::Create { name, create_stream_on_append } => {
            let config = pb::BasinConfig { create_stream_on_append, create_stream_on_read: false };
            client.create_basin(pb::CreateBasinRequest { basin: name, config: Some(config) }).await?;
            Ok(())
        }
        BasinsCommand::Delete { name } => {
            client.delete_basin(pb::DeleteBasinRequest { basin: name }).await?;
            Ok(())
        }
    }
}

pub async fn streams(connection: &Connection, command: StreamsCommand) -> Result<(), Failure> {
    let mut client = StreamsClient::new(channel(connection).await?);
    match command {
        StreamsCommand::List { basin, prefix } => {
            let mut start_after = String::new();
            loop {
                let request =
                    pb::ListStreamsRequest { basin: basin.clone(), prefix: prefix.clone(), start_after, limit: 0 };
                let page = client.list_streams(request).await?.into_inner();
                for stream in &page.streams {
                    println!("{}", stream.name);
                }
                match page.streams.last() {
                    Some(last) if page.has_more => start_after = last.name.clone(),
                    _ => return Ok(()),
                }
            }
        }
        StreamsCommand::Create { target } => {
            let (basin, stream) = split_target(&target)?;
            client.create_stream(pb::CreateStreamRequest { basin, stream, config: None }).await?;
            Ok(())
        }
        StreamsCommand::Delete { target } => {
            let (basin, stream) = split_target(&target)?;
            client.delete_stream(pb::DeleteStreamRequest { basin, stream }).await?;
            Ok(())
        }
    }
}

pub async fn check_tail(connection: &Connection, target: &str) -> Result<(), Failure> {
    let (basin, stream) = split_target(target)?;
    let mut client = RecordsClient::new(channel(connection).await?);
    let tail = client.check_tail(pb::CheckTailRequest { basin, stream }).await?.into_inner().tail.unwrap_or_default();
    println!("seq_num={} timestamp={}", tail.seq_num, tail.timestamp);
    Ok(())
}

fn print_record(out: &mut impl Write, record: &pb::SequencedRecord, format: Format) -> std::io::Result<()> {
    match format {
        Format::Text => {
            out.write_all(&record.body)?;
            out.write_all(b"\n")
        }
        Format::Json => {
            let headers: Vec<Value> = record
                .headers
                .iter()
                .map(|h| json!([String::from_utf8_lossy(&h.name), String::from_utf8_lossy(&h.value)]))
                .collect();
            let line = json!({
                "seq_num": record.seq_num,
                "timestamp": record.timestamp,
                "headers": headers,
                "body": String::from_utf8_lossy(&record.body),
            });
            writeln!(out, "{line}")
        }
    }
}

/// Prints records; with `--follow` keeps printing new ones until interrupted.
pub async fn read(connection: &Connection, args: ReadArgs) -> Result<(), Failure> {
    let (basin, stream) = split_target(&args.target)?;
    let transport = channel(connection).await?;
    let mut client = RecordsClient::new(transport.clone());
    let mut consumer = match &args.consumer {
        Some(name) => Some(Consumer::resume(transport, &basin, &stream, name).await?),
        None => None,
    };
    let start = if let Some(position) = consumer.as_ref().and_then(|c| c.committed) {
        pb::read_request::Start::SeqNum(position)
    } else if let Some(ago) = args.ago {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        pb::read_request::Start::Timestamp(now.saturating_sub(ago).as_millis() as u64)
    } else if let Some(offset) = args.tail_offset {
        pb::read_request::Start::TailOffset(offset)
    } else {
        pb::read_request::Start::SeqNum(args.from.unwrap_or(0))
    };
    let request = pb::ReadRequest { basin, stream, start: Some(start), count: args.count, ..Default::default() };
    let mut session = client.read_session(request).await?.into_inner();
    let mut out = std::io::stdout().lock();
    while let Some(event) = session.next().await {
        match event?.event {
            Some(pb::read_session_response::Event::Batch(batch)) => {
                for record in &batch.records {
                    print_record(&mut out, record, args.format)?;
                }
                out.flush()?;
                if let (Some(consumer), Some(last)) = (&mut consumer, batch.records.last()) {
                    consumer.commit(last.seq_num + 1).await?;
                }
                let caught_up = batch.records.last().map(|r| r.seq_num + 1) == batch.tail.map(|t| t.seq_num);
                if caught_up && !args.follow && args.count.is_none() {
                    return Ok(());
                }
            }
            Some(pb::read_session_response::Event::Heartbeat(_)) if !args.follow => return Ok(()),
            _ => {}
        }
    }
    Ok(())
}

/// A tracked consumer `shale read --consumer` resumes from and commits to.
struct Consumer {
    client: StreamsClient<Transport>,
    request: pb::CommitConsumerRequest,
    /// The position it had committed when the read began.
    committed: Option<u64>,
}

impl Consumer {
    async fn resume(transport: Transport, basin: &str, stream: &str, name: &str) -> Result<Self, Failure> {
        let mut client = StreamsClient::new(transport);
        let get = pb::GetConsumerRequest { basin: basin.into(), stream: stream.into(), name: name.into() };
        let committed = match client.get_consumer(get).await {
            Ok(found) => Some(found.into_inner().seq_num),
            Err(status) if status.code() == tonic::Code::NotFound => None,
            Err(status) => return Err(status.into()),
        };
        let request = pb::CommitConsumerRequest {
            basin: basin.into(),
            stream: stream.into(),
            name: name.into(),
            ..Default::default()
        };
        Ok(Self { client, request, committed })
    }

    async fn commit(&mut self, seq_num: u64) -> Result<(), Failure> {
        let request = pb::CommitConsumerRequest { seq_num, ..self.request.clone() };
        self.client.commit_consumer(request).await?;
        Ok(())
    }
}
