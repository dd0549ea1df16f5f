use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHALE_LOG").unwrap_or_else(|_| "info,slatedb=warn".into()),
        )
        .init();
    shale::run(shale::Cli::parse()).await
}
