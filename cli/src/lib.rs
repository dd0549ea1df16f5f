//! The `shale` binary's library: command-line parsing, configuration, the server
//! commands (`serve`: metadata, gateway and reader in one process behind the HTTP and
//! gRPC APIs; `metadata`, `gateway`, `reader`, `compactor`: one role each; `running`: what
//! a started server holds and how it stops) and the client commands
//! (`basins`, `streams`, `append` (as an idempotent producer, in `append`), `read` and
//! `tail` (in `read`), `check-tail`, `tables`) that talk gRPC to a server, with the record line
//! formats in `format`.

mod append;
mod client;
mod config;
mod dir_lock;
mod format;
mod read;
mod running;
pub mod runtime;
mod serve;
mod tokens;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use shale_api::Role;

pub use config::{DefaultPorts, ServeConfig};
pub use running::Running;
pub use serve::{serve, serve_compactor, serve_metadata, serve_role};

#[derive(Debug, Parser)]
#[command(name = "shale", version, about = "A diskless, object-store-native log of streams")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// How log lines are written to stderr (a server's logs; a client command logs only
    /// with SHALE_LOG set).
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
    #[command(flatten)]
    Server(ServerCommand),
    #[command(flatten)]
    Client(ClientCommand),
}

/// Commands that run a server until it is stopped.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Run every role in one process (the embedded default: ./shale-data on local disk).
    Serve(config::ServeArgs),
    /// Run the metadata service alone (the sequencer and index) on --store, serving the
    /// internal gRPC API on --grpc.
    Metadata(config::MetadataArgs),
    /// Run a gateway alone: appends and basin/stream management, against --metadata.
    Gateway(config::RoleArgs),
    /// Run a reader alone: reads, check-tail and live reads, against --metadata.
    Reader(config::RoleArgs),
    /// Run a Kafka agent: a gateway and a reader in one stateless process against
    /// --metadata, serving Kafka's protocol on --kafka (default 127.0.0.1:9092) and the
    /// client API; agents register with metadata, which lists the live ones to clients.
    Agent(config::RoleArgs),
    /// Run compaction alone against --metadata (turn it off on the metadata role with
    /// `[compactor] enabled = false`); several split the streams by `[compactor] shard`.
    Compactor(config::RoleArgs),
}

/// Commands that talk to a server as a client.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Manage basins.
    Basins(client::WithConnection<client::BasinsCommand>),
    /// Manage streams.
    Streams(client::WithConnection<client::StreamsCommand>),
    /// Manage access tokens: issue, list, revoke (with a token allowed to, such as the
    /// root token).
    Tokens(client::WithConnection<tokens::TokensCommand>),
    /// Append records from stdin, one per line.
    Append(append::AppendArgs),
    /// Print records of a stream: from the tail, following new ones, unless told otherwise.
    Read(read::ReadArgs),
    /// Print a stream's tail position: `seq_num=N timestamp=T`, the sequence number the
    /// next record will get and the last record's timestamp (S2's check-tail).
    CheckTail {
        /// BASIN/STREAM
        target: String,
        #[command(flatten)]
        connection: client::Connection,
    },
    /// Print the last records of a stream (as `tail -n` does for a file).
    Tail(read::TailArgs),
    /// Show a basin's table tier: files, rows, how far each stream is tiered, and how to
    /// query the table with DuckDB or Spark.
    Tables {
        /// The basin's name.
        basin: String,
        #[command(flatten)]
        connection: client::Connection,
    },
}

/// The connection flags ([`client::Connection`]), each with a value.
const CLIENT_FLAGS: &[&str] = &["--server", "--token", "--ca-file"];

/// The command line with connection flags given before a client command moved after
/// it, where the command's own flags are parsed (`shale --server H read ...`, as users
/// type global flags). Anything else is left as it is (clap then says what is wrong).
pub fn client_flags_after_command(args: Vec<OsString>) -> Vec<OsString> {
    let mut moved = Vec::new();
    let mut i = 1;
    while let Some(arg) = args.get(i).and_then(|a| a.to_str()) {
        let flag = arg.split('=').next().unwrap_or(arg);
        if ClientCommand::has_subcommand(arg) {
            let mut reordered: Vec<OsString> = args[..1].to_vec();
            reordered.extend((1..i).filter(|at| !moved.contains(at)).map(|at| args[at].clone()));
            reordered.push(args[i].clone());
            reordered.extend(moved.iter().filter_map(|&at| args.get(at).cloned()));
            reordered.extend(args[i + 1..].iter().cloned());
            return reordered;
        }
        if CLIENT_FLAGS.contains(&flag) {
            moved.push(i);
            if !arg.contains('=') {
                moved.push(i + 1);
                i += 1;
            }
        } else if arg == "--log-format" {
            i += 1;
        } else if !arg.starts_with("--log-format=") {
            break;
        }
        i += 1;
    }
    args
}

/// A command ready to run: a server's settings loaded and checked once, before the
/// runtime is built to suit them ([`Invocation::writes_local_files`]).
pub struct Invocation(Ready);

enum Ready {
    Server(Box<ServeConfig>, Server),
    Client(Box<ClientCommand>),
}

impl Cli {
    /// The command with a server's settings loaded from its flags, environment and
    /// config file; an error says what is wrong with them.
    pub fn prepare(self) -> anyhow::Result<Invocation> {
        Ok(Invocation(match self.command {
            Command::Server(command) => {
                let (args, server) = command.server();
                let config = ServeConfig::load(args, server.default_ports())?;
                // A role on a store of its own would accept appends no reader ever finds,
                // or serve reads of nothing: only `serve` defaults to a local directory.
                if !matches!(server, Server::AllInOne) && config.store.is_none() && args.data_dir.is_none() {
                    anyhow::bail!(
                        "this role needs the cluster's store: give --store (SHALE_STORE, or `store` in the config \
                         file), the same for every role (or --data-dir for a local directory)"
                    );
                }
                Ready::Server(Box::new(config), server)
            }
            Command::Client(command) => Ready::Client(Box::new(command)),
        }))
    }
}

impl Invocation {
    /// Whether this is a server on a local directory (`serve`'s default store, a
    /// `file://` store or `--data-dir`): its file writes and fsyncs then keep a core busy
    /// on the blocking pool ([`runtime`]). False for client commands and object stores.
    pub fn writes_local_files(&self) -> bool {
        matches!(&self.0, Ready::Server(config, _) if config.stores_in_a_directory())
    }
}

pub async fn run(invocation: Invocation) -> ExitCode {
    match invocation.0 {
        Ready::Server(config, server) => exit(run_server(*config, server).await),
        Ready::Client(command) => run_client(*command).await,
    }
}

async fn run_client(command: ClientCommand) -> ExitCode {
    match command {
        ClientCommand::Basins(basins) => client::report(client::basins(&basins.connection, basins.command).await),
        ClientCommand::Streams(streams) => client::report(client::streams(&streams.connection, streams.command).await),
        ClientCommand::Tokens(tokens) => client::report(tokens::tokens(&tokens.connection, tokens.command).await),
        ClientCommand::Append(args) => client::report(append::append(args).await),
        ClientCommand::Read(args) => client::report(read::read(args).await),
        ClientCommand::CheckTail { target, connection } => {
            client::report(client::check_tail(&connection, &target).await)
        }
        ClientCommand::Tail(args) => client::report(read::read(args.into()).await),
        ClientCommand::Tables { basin, connection } => client::report(client::tables(&connection, &basin).await),
    }
}

impl ServerCommand {
    /// The command's arguments and which server it runs.
    fn server(&self) -> (&config::ServeArgs, Server) {
        match self {
            ServerCommand::Serve(args) => (args, Server::AllInOne),
            ServerCommand::Metadata(args) => (&args.serve, Server::Metadata(args.advertise.clone())),
            ServerCommand::Gateway(args) => (&args.serve, Server::Role(Role::Gateway, args.metadata.clone())),
            ServerCommand::Reader(args) => (&args.serve, Server::Role(Role::Reader, args.metadata.clone())),
            ServerCommand::Agent(args) => (&args.serve, Server::Role(Role::Agent, args.metadata.clone())),
            ServerCommand::Compactor(args) => (&args.serve, Server::Compactor(args.metadata.clone())),
        }
    }
}

/// The exit code of a command's outcome; an error is printed first.
pub fn exit(result: anyhow::Result<()>) -> ExitCode {
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

impl Server {
    fn default_ports(&self) -> DefaultPorts {
        match self {
            Server::AllInOne => DefaultPorts::SERVE,
            Server::Metadata(_) => DefaultPorts::METADATA,
            Server::Role(Role::Gateway, _) => DefaultPorts::GATEWAY,
            Server::Role(Role::Reader, _) => DefaultPorts::READER,
            Server::Role(Role::AllInOne, _) => DefaultPorts::SERVE,
            Server::Role(Role::Agent, _) => DefaultPorts::AGENT,
            Server::Compactor(_) => DefaultPorts::COMPACTOR,
        }
    }
}

async fn run_server(config: ServeConfig, server: Server) -> anyhow::Result<()> {
    let running = match server {
        Server::AllInOne => serve(config).await?,
        Server::Metadata(advertise) => serve_metadata(config, advertise).await?,
        Server::Role(role, metadata) => serve_role(config, role, metadata).await?,
        Server::Compactor(metadata) => serve_compactor(config, metadata).await?,
    };
    let halted = tokio::select! {
        _ = running::wait_for_signal() => None,
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

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn client_flags_before_a_client_command_move_after_it() {
        let reorder = |line: &str| {
            let args = line.split(' ').map(OsString::from).collect();
            client_flags_after_command(args)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(reorder("shale --server h:1 check-tail b/s"), "shale check-tail --server h:1 b/s");
        assert_eq!(
            reorder("shale --log-format json --token=t --server h:1 basins create x"),
            "shale --log-format json basins --token=t --server h:1 create x"
        );
        assert_eq!(
            reorder("shale --token read read b/s"),
            "shale read --token read b/s",
            "a value named like a command"
        );
        assert_eq!(
            reorder("shale read b/s --server h:1"),
            "shale read b/s --server h:1",
            "after the command: as given"
        );
        assert_eq!(reorder("shale --server h:1 serve"), "shale --server h:1 serve", "server commands take none");
        let cli = Cli::try_parse_from(client_flags_after_command(
            "shale --server h:9 streams list b".split(' ').map(OsString::from).collect(),
        ))
        .unwrap();
        let Command::Client(ClientCommand::Streams(streams)) = cli.command else {
            panic!("parsed as {:?}", cli.command)
        };
        assert_eq!(streams.connection.server, "h:9");
    }

    /// A server's settings are loaded once, before the runtime: they choose its workers
    /// (a local directory leaves a core to file work), and a role without the cluster's
    /// store is refused there, before anything starts.
    #[test]
    fn a_servers_settings_are_loaded_and_checked_before_it_runs() {
        let prepare = |line: &str| Cli::try_parse_from(line.split(' ')).unwrap().prepare();
        let dir = tempfile::tempdir().unwrap();
        let local = prepare(&format!("shale serve --data-dir {}", dir.path().display())).unwrap();
        assert!(local.writes_local_files());
        assert!(!prepare("shale serve --store memory://").unwrap().writes_local_files());
        assert!(!prepare("shale read b/s").unwrap().writes_local_files(), "a client command");
        let error = prepare("shale gateway --metadata 127.0.0.1:1").err().expect("a role needs a store");
        assert!(error.to_string().contains("needs the cluster's store"), "{error}");
        let error = prepare("shale serve --config /no/such/file.toml").err().expect("a missing config file");
        assert!(error.to_string().contains("/no/such/file.toml"), "{error}");
    }

    /// Every subcommand and every argument says what it is; client commands take the
    /// connection flags and server commands do not; the listen flags name their defaults.
    #[test]
    fn help_documents_every_flag_and_puts_them_where_they_apply() {
        fn walk(command: &clap::Command, path: &str, found: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if !matches!(id, "help" | "version") && arg.get_help().is_none() {
                    found.push(format!("{path} {id}: no help"));
                }
            }
            for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
                if sub.get_about().is_none() {
                    found.push(format!("{path} {}: no about", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), found);
            }
        }
        let mut cli = Cli::command();
        cli.build();
        let mut missing = Vec::new();
        walk(&cli, "shale", &mut missing);
        assert!(missing.is_empty(), "{missing:#?}");

        let has = |path: &[&str], flag: &str| {
            let mut command = &cli;
            for name in path {
                command = command.find_subcommand(name).unwrap();
            }
            command.get_arguments().any(|a| a.get_long() == Some(flag))
        };
        for server in ["serve", "metadata", "gateway", "reader", "compactor"] {
            assert!(!has(&[server], "server"), "{server} offers --server");
        }
        for client in [
            &["read"][..],
            &["append"],
            &["tail"],
            &["check-tail"],
            &["basins", "list"],
            &["streams", "create"],
            &["tokens", "issue"],
        ] {
            assert!(has(client, "server") && has(client, "token"), "{client:?} lacks --server");
        }
        // The help says what a client command's --log-format is for, and that the json
        // format leaves empty headers and bodies out.
        let read = cli.find_subcommand("read").unwrap();
        let log_format = read.get_arguments().find(|a| a.get_long() == Some("log-format")).unwrap();
        assert!(!log_format.get_help().unwrap().to_string().contains("How server logs"), "{log_format:?}");
        let mut help = Vec::new();
        cli.find_subcommand_mut("read").unwrap().write_long_help(&mut help).unwrap();
        let help = String::from_utf8(help).unwrap();
        assert!(help.contains("empty headers and body are left out"), "{help}");
        let serve = cli.find_subcommand("serve").unwrap();
        for flag in ["http", "grpc"] {
            let arg = serve.get_arguments().find(|a| a.get_long() == Some(flag)).unwrap();
            let help = arg.get_help().unwrap().to_string();
            assert!(help.contains("default") && help.contains("8080") == (flag == "http"), "{flag}: {help}");
        }
    }
}
