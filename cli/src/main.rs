use clap::Parser;

/// Records are many small allocations (bodies, headers, batches) made on one thread and
/// freed on another, and megabyte buffers (blocks, frames) come and go many times a
/// second: jemalloc spends far less time on the first than the system allocator, and keeps
/// freed pages for seconds instead of returning them at once (which made the kernel zero
/// them again on every reuse under mimalloc's defaults).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHALE_LOG").unwrap_or_else(|_| "info,slatedb=warn".into()),
        )
        .init();
    shale::run(shale::Cli::parse()).await
}
