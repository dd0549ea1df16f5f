use clap::Parser;

/// Records are many small allocations (bodies, headers, batches) made on one thread and
/// freed on another; mimalloc spends far less time on them than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHALE_LOG").unwrap_or_else(|_| "info,slatedb=warn".into()),
        )
        .init();
    shale::run(shale::Cli::parse()).await
}
