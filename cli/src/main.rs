use clap::Parser;

/// Records are many small allocations (bodies, headers, batches) made on one thread and
/// freed on another, and megabyte buffers (blocks, frames) come and go many times a
/// second: jemalloc spends far less time on the first than the system allocator, and keeps
/// freed pages for seconds instead of returning them at once (which made the kernel zero
/// them again on every reuse under mimalloc's defaults).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = shale::Cli::parse_from(shale::client_flags_after_command(std::env::args_os().collect()));
    init_logs(cli.log_format);
    let invocation = match cli.prepare() {
        Ok(invocation) => invocation,
        Err(error) => return shale::exit(Err(error)),
    };
    match shale::runtime::build(invocation.writes_local_files()) {
        Ok(runtime) => runtime.block_on(shale::run(invocation)),
        Err(error) => {
            eprintln!("shale: error: cannot start the async runtime: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout is for client commands' output), filtered by `SHALE_LOG`,
/// as text (colored only on a terminal) or one JSON object per line.
fn init_logs(format: shale::LogFormat) {
    use std::io::IsTerminal;
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("SHALE_LOG").unwrap_or_else(|_| "info,slatedb=warn".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        shale::LogFormat::Json => builder.json().init(),
        shale::LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}
