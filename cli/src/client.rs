//! Client commands: talk gRPC to a Shale server (`--server`, `SHALE_SERVER`).
//!
//! Exit codes a script can rely on: 0 success, 2 invalid arguments, 3 not found,
//! 4 already exists, 5 append condition failed (sequence number or fencing token),
//! 6 server unavailable or overloaded, 7 no valid token or not permitted, 8 a read starts
//! past the stream's tail, 1 anything else.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use shale_metadata::BearerToken;
use shale_proto::grpc as pb;
use shale_proto::grpc::basins_client::BasinsClient;
use shale_proto::grpc::records_client::RecordsClient;
use shale_proto::grpc::streams_client::StreamsClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig};

/// Where client commands connect: on every client command (and its subcommands), on no
/// server command.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// gRPC address of a Shale server: host:port, http://host:port or https://host:port.
    #[arg(long, env = "SHALE_SERVER", default_value = "127.0.0.1:50051", global = true)]
    pub server: String,
    /// Access token, when the server has access control on.
    #[arg(long, env = "SHALE_ACCESS_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// CA certificate (PEM) the server's certificate chains to, for `https://` servers.
    #[arg(long, env = "SHALE_CA_FILE", global = true)]
    pub ca_file: Option<std::path::PathBuf>,
}

/// A client command with subcommands (`basins`, `streams`): the connection flags apply
/// to each.
#[derive(Debug, Args)]
pub struct WithConnection<C: Subcommand> {
    #[command(subcommand)]
    pub command: C,
    #[command(flatten)]
    pub connection: Connection,
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

/// A failed client command: message and exit code.
pub struct Failure(pub String, pub u8);

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Self {
        let code = match status.code() {
            tonic::Code::InvalidArgument => 2,
            tonic::Code::OutOfRange => 8,
            tonic::Code::NotFound => 3,
            tonic::Code::AlreadyExists => 4,
            tonic::Code::FailedPrecondition => 5,
            tonic::Code::Unavailable | tonic::Code::ResourceExhausted => 6,
            tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => 7,
            _ => 1,
        };
        // The server's JSON body rides in the ErrorInfo detail; a condition's body (the
        // stream's actual tail or token) says more than the message alone.
        let details = tonic_types::StatusExt::get_error_details(&status);
        let json = details.error_info().and_then(|info| info.metadata.get("json").cloned()).unwrap_or_default();
        let message = match status.code() {
            tonic::Code::OutOfRange => past_the_tail(&json),
            // The server's hint names the HTTP header; a CLI user gives a flag.
            tonic::Code::Unauthenticated if status.message().starts_with("missing access token") => {
                "missing access token: give --token or set SHALE_ACCESS_TOKEN".to_string()
            }
            _ if json.is_empty() || json.contains("\"message\"") => status.message().to_string(),
            _ => format!("{} {json}", status.message()),
        };
        Failure(message, code)
    }
}

/// A read past the tail, told with the tail from the error's body (`{"tail": {...}}`).
fn past_the_tail(json: &str) -> String {
    let tail = serde_json::from_str::<serde_json::Value>(json).ok().and_then(|body| body["tail"]["seq_num"].as_u64());
    match tail {
        Some(tail) => format!(
            "the read starts past the stream's tail (seq_num {tail}): start at {tail} or below, or use --tail-offset"
        ),
        None => "the read starts past the stream's tail".to_string(),
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
pub(crate) type Transport = InterceptedService<Channel, BearerToken>;

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
            client.create_basin(pb::CreateBasinRequest { basin: name.clone(), config: Some(config) }).await?;
            println!("created basin {name}");
            Ok(())
        }
        BasinsCommand::Delete { name } => {
            client.delete_basin(pb::DeleteBasinRequest { basin: name.clone() }).await?;
            println!("deleted basin {name}");
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
            println!("created stream {target}");
            Ok(())
        }
        StreamsCommand::Delete { target } => {
            let (basin, stream) = split_target(&target)?;
            client.delete_stream(pb::DeleteStreamRequest { basin, stream }).await?;
            println!("deleted stream {target}");
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

/// `shale tables BASIN`: the table tier's status, then how to query it.
pub async fn tables(connection: &Connection, basin: &str) -> Result<(), Failure> {
    let mut client = BasinsClient::new(channel(connection).await?);
    let status = client.get_table_status(pb::GetTableStatusRequest { basin: basin.into() }).await?.into_inner();
    println!(
        "basin {basin}: records {} s old are tiered; {} passes, {} rows in {} files",
        status.after_secs,
        status.passes,
        status.rows,
        status.files.len()
    );
    println!("location: {}", status.location);
    println!("{:<32} {:>14} {:>14} {:>10}", "STREAM", "TIERED", "TAIL", "LAG");
    for stream in &status.streams {
        let lag = stream.tail.saturating_sub(stream.tiered_seq);
        println!("{:<32} {:>14} {:>14} {:>10}", stream.stream, stream.tiered_seq, stream.tail, lag);
    }
    // DuckDB reads a local path as is, S3 through its httpfs extension; files of a later
    // schema have more columns, so they are read by name. It reads the files the committed
    // state names: a glob over `data/` would also see files a rewrite replaced, until
    // their snapshots expire.
    let table = status.location.strip_prefix("file://").unwrap_or(&status.location);
    let store_root = table.strip_suffix(&format!("/tables/{basin}")).unwrap_or(table);
    // Closed days' files are listed in archives the state names (`{"files": [...]}`, the
    // state's own shape), so one `read_json` over the state and its archives lists them all.
    println!(
        "\nDuckDB:    SET VARIABLE lists = ['{table}/state.json'] || (SELECT coalesce(list('{store_root}/' || a.path), []) FROM (SELECT unnest(archives) AS a FROM read_json('{table}/state.json'))); \
         SET VARIABLE files = (SELECT list('{store_root}/' || f.path) FROM (SELECT unnest(files) AS f FROM read_json(getvariable('lists'), union_by_name = true))); \
         SELECT stream, count(*) FROM read_parquet(getvariable('files'), union_by_name = true) GROUP BY stream;"
    );
    if status.metadata_location.is_empty() {
        println!("Iceberg:   no snapshot yet");
        return Ok(());
    }
    let metadata = &status.metadata_location;
    println!("DuckDB:    SELECT count(*) FROM iceberg_scan('{metadata}');  -- with the iceberg extension");
    println!("pyiceberg: StaticTable.from_metadata(\"{metadata}\").scan().to_arrow()");
    // Spark's Iceberg source opens a path as a table through its version hint.
    let spark = status.location.replace("s3://", "s3a://");
    println!("Spark:     spark.read.format(\"iceberg\").load(\"{spark}\")");
    Ok(())
}
