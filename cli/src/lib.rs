//! The `shale` binary's library: command-line parsing, configuration, the server
//! commands (`serve`: metadata, gateway and reader in one process behind the HTTP and
//! gRPC APIs; `metadata`, `gateway`, `reader`, `compactor`: one role each) and the client commands
//! (`basins`, `streams`, `append` (as an idempotent producer, in `append`), `read`, `check-tail`, `tail`)
//! that talk gRPC to a server.

mod append;
mod client;
mod config;
mod dir_lock;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use shale_api::Role;

pub use config::ServeConfig;
pub use serve::{serve, serve_compactor, serve_metadata, serve_role, Running};

#[derive(Debug, Parser)]
#[command(name = "shale", version, about = "A diskless, object-store-native log of streams")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub connection: client::Connection,
    /// How server logs are written to stderr.
    #[arg(long, env = "SHALE_LOG_FORMAT", value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,
}

/// Server log formats.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every role in one process (the embedded default: ./shale-data on local disk).
    Serve(config::ServeArgs),
    /// Run the metadata service alone (the sequencer and index) on --store, serving the
    /// internal gRPC API on --grpc.
    Metadata(config::MetadataArgs),
    /// Run a gateway alone: appends and basin/stream management, against --metadata.
    Gateway(config::RoleArgs),
    /// Run a reader alone: reads, check-tail and live reads, against --metadata.
    Reader(config::RoleArgs),
    /// Run compaction alone against --metadata (turn it off on the metadata role with
    /// `[compactor] enabled = false`); several split the streams by `[compactor] shard`.
    Compactor(config::RoleArgs),
    /// Manage basins.
    #[command(subcommand)]
    Basins(client::BasinsCommand),
    /// Manage streams.
    #[command(subcommand)]
    Streams(client::StreamsCommand),
    /// Append records from stdin, one per line.
    Append(append::AppendArgs),
    /// Print records of a stream.
    Read(client::ReadArgs),
    /// Print a stream's tail position: `seq_num=N timestamp=T`, the sequence number the
    /// next record will get and the last record's timestamp (S2's check-tail).
    CheckTail {
        /// BASIN/STREAM
        target: String,
    },
    /// Print the last records of a stream (as `tail -n` does for a file).
    Tail {
        /// BASIN/STREAM
        target: String,
        /// How many records.
        #[arg(short = 'n', long, default_value_t = 10)]
        lines: u64,
        /// How records are printed: bodies one per line, or one JSON object per line.
        #[arg(long, value_enum, default_value = "text")]
        format: client::Format,
    },
}

pub async fn run(cli: Cli) -> ExitCode {
    let connection = &cli.connection;
    match cli.command {
        Command::Serve(args) => exit(run_server(&args, Server::AllInOne).await),
        Command::Metadata(args) => exit(run_server(&args.serve, Server::Metadata(args.advertise.clone())).await),
        Command::Gateway(args) => {
            exit(run_server(&args.serve, Server::Role(Role::Gateway, args.metadata.clone())).await)
        }
        Command::Reader(args) => exit(run_server(&args.serve, Server::Role(Role::Reader, args.metadata.clone())).await),
        Command::Compactor(args) => exit(run_server(&args.serve, Server::Compactor(args.metadata.clone())).await),
        Command::Basins(command) => client::report(client::basins(connection, command).await),
        Command::Streams(command) => client::report(client::streams(connection, command).await),
        Command::Append(args) => client::report(append::append(connection, args).await),
        Command::Read(args) => client::report(client::read(connection, args).await),
        Command::CheckTail { target } => client::report(client::check_tail(connection, &target).await),
        Command::Tail { target, lines, format } => {
            let args = client::ReadArgs {
                target,
                from: None,
                consumer: None,
                ago: None,
                tail_offset: Some(lines),
                count: Some(lines),
                follow: false,
                format,
            };
            client::report(client::read(connection, args).await)
        }
    }
}

fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Which server command runs.
enum Server {
    AllInOne,
    Metadata(Option<String>),
    Role(Role, Vec<String>),
    Compactor(Vec<String>),
}

async fn run_server(args: &config::ServeArgs, server: Server) -> anyhow::Result<()> {
    let config = ServeConfig::load(args)?;
    // A role on a store of its own would accept appends no reader ever finds, or serve
    // reads of nothing: only `serve` defaults to a local directory.
    if !matches!(server, Server::AllInOne) && config.store.is_none() && args.data_dir.is_none() {
        anyhow::bail!(
            "this role needs the cluster's store: give --store (SHALE_STORE, or `store` in the config file), \
             the same for every role (or --data-dir for a local directory)"
        );
    }
    let running = match server {
        Server::AllInOne => serve(config).await?,
        Server::Metadata(advertise) => serve_metadata(config, advertise).await?,
        Server::Role(role, metadata) => serve_role(config, role, metadata).await?,
        Server::Compactor(metadata) => serve_compactor(config, metadata).await?,
    };
    let halted = tokio::select! {
        _ = serve::wait_for_signal() => None,
        reason = running.halted() => Some(reason),
    };
    if let Some(reason) = halted {
        let why = match reason {
            shale_metadata::HaltReason::Fenced => "fenced by a newer metadata instance",
            shale_metadata::HaltReason::WriteFailed => "a durable metadata write failed",
        };
        tracing::error!(reason = why, "metadata halted; stopping");
        // Best effort: nothing more can be written, the shutdown only closes connections.
        let _ = running.shutdown().await;
        anyhow::bail!("{why}");
    }
    running.shutdown().await
}
