//! The `shale` binary's library: command-line parsing, configuration, and `serve`,
//! which runs metadata, gateway and reader in one process behind the HTTP API.

mod config;
mod serve;

use clap::{Parser, Subcommand};

pub use config::ServeConfig;
pub use serve::{serve, Running};

#[derive(Debug, Parser)]
#[command(name = "shale", version, about = "A diskless, object-store-native log of streams")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run every role in one process (the embedded default: ./shale-data on local disk).
    Serve(config::ServeArgs),
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => {
            let config = ServeConfig::load(&args)?;
            let running = serve(config).await?;
            serve::wait_for_signal().await;
            running.shutdown().await
        }
    }
}
