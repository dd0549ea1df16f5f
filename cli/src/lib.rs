//! The `shale` binary's library: command-line parsing, configuration, `serve` (metadata,
//! gateway and reader in one process behind the HTTP and gRPC APIs) and the client
//! commands (`basins`, `streams`, `append`, `read`, `tail`) that talk gRPC to a server.

mod client;
mod config;
mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use config::ServeConfig;
pub use serve::{serve, Running};

#[derive(Debug, Parser)]
#[command(name = "shale", version, about = "A diskless, object-store-native log of streams")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub connection: client::Connection,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every role in one process (the embedded default: ./shale-data on local disk).
    Serve(config::ServeArgs),
    /// Manage basins.
    #[command(subcommand)]
    Basins(client::BasinsCommand),
    /// Manage streams.
    #[command(subcommand)]
    Streams(client::StreamsCommand),
    /// Append records from stdin, one per line.
    Append(client::AppendArgs),
    /// Print records of a stream.
    Read(client::ReadArgs),
    /// Print a stream's tail: next sequence number and last timestamp.
    Tail { target: String },
}

pub async fn run(cli: Cli) -> ExitCode {
    let connection = &cli.connection;
    match cli.command {
        Command::Serve(args) => match run_server(&args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("shale: error: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Basins(command) => client::report(client::basins(connection, command).await),
        Command::Streams(command) => client::report(client::streams(connection, command).await),
        Command::Append(args) => client::report(client::append(connection, args).await),
        Command::Read(args) => client::report(client::read(connection, args).await),
        Command::Tail { target } => client::report(client::tail(connection, &target).await),
    }
}

async fn run_server(args: &config::ServeArgs) -> anyhow::Result<()> {
    let config = ServeConfig::load(args)?;
    let running = serve(config).await?;
    let fenced = tokio::select! {
        _ = serve::wait_for_signal() => false,
        _ = running.fenced() => true,
    };
    if fenced {
        tracing::error!("a newer metadata instance took over this store; stopping");
        // Best effort: nothing more can be written, the shutdown only closes connections.
        let _ = running.shutdown().await;
        anyhow::bail!("fenced by a newer metadata instance");
    }
    running.shutdown().await
}
