//! One configuration tree, layered: defaults, then an optional TOML file, then
//! `SHALE_*` environment variables and flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;
use shale_compactor::CompactorConfig;
use shale_gateway::GatewayConfig;
use shale_metadata::{ClusterTiming, ClusterToken, MetadataConfig, RemoteConfig};
use shale_reader::ReaderConfig;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TOML file with any of the settings below, plus [gateway] and [reader] sections.
    #[arg(long, env = "SHALE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Directory for the local filesystem store (ignored when --store is given).
    #[arg(long, env = "SHALE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Object store URL: file:///path, s3://bucket/prefix or memory://.
    #[arg(long, env = "SHALE_STORE")]
    pub store: Option<String>,
    /// Address for the HTTP API (S2's REST API, /health, /metrics) [default: 127.0.0.1
    /// and 8080 for serve, 8081 metadata, 8082 gateway, 8083 reader, 8084 compactor].
    #[arg(long, env = "SHALE_HTTP")]
    pub http: Option<SocketAddr>,
    /// Address for the gRPC API [default: 127.0.0.1 and 50051 for serve, 50061 metadata,
    /// 50052 gateway, 50053 reader].
    #[arg(long, env = "SHALE_GRPC")]
    pub grpc: Option<SocketAddr>,
    /// Address for Kafka's protocol (`shale serve` only), e.g. `127.0.0.1:9092`; off
    /// unless given here or as `[kafka] listen`.
    #[arg(long, env = "SHALE_KAFKA")]
    pub kafka: Option<SocketAddr>,
    /// Added latency per object-store request, e.g. `30ms` (benchmarks at S3-like latency).
    #[arg(long, env = "SHALE_STORE_DELAY", value_parser = humantime::parse_duration)]
    pub store_delay: Option<Duration>,
    /// Certificate chain (PEM) for TLS on this process's listeners (with --tls-key).
    #[arg(long, env = "SHALE_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, env = "SHALE_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CA certificate (PEM) that metadata's certificate chains to: roles reach metadata
    /// over TLS.
    #[arg(long, env = "SHALE_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// `shale serve` on a local directory another server holds: ask it to stop (it
    /// drains and closes), then take over. Without it, such a start is refused.
    #[arg(long)]
    pub takeover: bool,
    /// No CORS headers: browser pages on other origins cannot call the HTTP API
    /// (`[cors] enabled = false`).
    #[arg(long)]
    pub no_cors: bool,
    /// A JSON file of basins and streams created or reconciled at every start
    /// (`docs/operations.md`); a bad file stops the start with the line at fault.
    #[arg(long, env = "SHALE_INIT_FILE")]
    pub init_file: Option<PathBuf>,
}

/// `shale gateway` and `shale reader`: the server settings plus where metadata runs.
#[derive(Debug, clap::Args)]
pub struct RoleArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Metadata gRPC addresses, comma-separated (`host:port` or `http://host:port`); calls
    /// go to whichever holds the leader lease.
    #[arg(long, env = "SHALE_METADATA", value_delimiter = ',', required = true)]
    pub metadata: Vec<String>,
}

/// `shale metadata`: the server settings plus the address others reach it at.
#[derive(Debug, clap::Args)]
pub struct MetadataArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Address written to the leader record for gateways and readers (default: --grpc).
    #[arg(long, env = "SHALE_ADVERTISE")]
    pub advertise: Option<String>,
}

/// `[auth]`: access control. With a root token, every API call needs a token (S2's
/// `Authorization: Bearer`), and metadata's internal API needs the cluster token.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthSettings {
    /// File holding the root token (`SHALE_ROOT_TOKEN` takes precedence). Every process
    /// serving the client API needs the same one.
    pub root_token_file: Option<PathBuf>,
    /// File holding the token gateways, readers and compactors present to metadata, and
    /// metadata requires (`SHALE_CLUSTER_TOKEN` takes precedence); default: the root token.
    pub cluster_token_file: Option<PathBuf>,
    /// How long a process trusts a token it looked up: a revoked token stops working on
    /// every process within this long.
    #[serde(with = "humantime_serde")]
    pub revocation_bound: Duration,
    /// Resolved from the environment or the files at load.
    #[serde(skip)]
    pub root_token: Option<ClusterToken>,
    #[serde(skip)]
    pub cluster_token: Option<ClusterToken>,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            root_token_file: None,
            cluster_token_file: None,
            revocation_bound: shale_api::auth::DEFAULT_REVOCATION_BOUND,
            root_token: None,
            cluster_token: None,
        }
    }
}

impl AuthSettings {
    /// Reads the tokens: the environment variable, else the file (trimmed).
    fn resolve(&mut self) -> anyhow::Result<()> {
        self.root_token = secret("SHALE_ROOT_TOKEN", self.root_token_file.as_deref())?;
        self.cluster_token =
            secret("SHALE_CLUSTER_TOKEN", self.cluster_token_file.as_deref())?.or_else(|| self.root_token.clone());
        Ok(())
    }

    /// The root token the client API checks, once resolved.
    pub fn root_token(&self) -> Option<&str> {
        self.root_token.as_ref().map(|t| t.0.as_str())
    }
}

fn secret(env: &str, file: Option<&std::path::Path>) -> anyhow::Result<Option<ClusterToken>> {
    let value = match (std::env::var(env).ok(), file) {
        (Some(value), _) => value,
        (None, Some(path)) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        (None, None) => return Ok(None),
    };
    let value = value.trim();
    anyhow::ensure!(!value.is_empty(), "{env} (or its file) is empty");
    Ok(Some(ClusterToken(value.to_string())))
}

/// `[tls]`: TLS on every listener of the process (`cert` and `key`), and the CA that
/// metadata's certificate chains to, for roles that call it (`ca`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsSettings {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub ca: Option<PathBuf>,
}

impl TlsSettings {
    /// The listeners' acceptor, when a certificate is configured.
    pub fn acceptor(&self) -> anyhow::Result<Option<shale_api::TlsAcceptor>> {
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Ok(Some(shale_api::tls_acceptor(cert, key).map_err(anyhow::Error::msg)?)),
            (None, None) => Ok(None),
            _ => anyhow::bail!("TLS needs both a certificate (--tls-cert) and its key (--tls-key)"),
        }
    }

    fn ca_pem(&self) -> anyhow::Result<Option<Vec<u8>>> {
        self.ca
            .as_ref()
            .map(|path| std::fs::read(path).with_context(|| format!("reading {}", path.display())))
            .transpose()
    }
}

/// Everything the server commands need.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    pub data_dir: PathBuf,
    pub store: Option<String>,
    /// Latency added to every object-store request (0: none). For benchmarks and tests
    /// that must see the system as it runs against S3 (30 ms per request there).
    #[serde(with = "humantime_serde")]
    pub store_delay: Duration,
    /// Whether a local-directory store fsyncs each write before it is acked (the
    /// default). Off, appends are faster and a power loss (not a crash) can lose the
    /// last acked writes.
    pub store_fsync: bool,
    /// Fault injection for tests: a seeded fraction of chosen store requests fails, e.g.
    /// `seed=7,put:segments/=0.05,get=0.01` (see `shale_storage::FaultyStore`). Never in
    /// production.
    pub store_faults: Option<String>,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    /// Kafka's protocol over the same streams (`shale serve`); off unless `listen` is set.
    pub kafka: shale_kafka::KafkaConfig,
    pub gateway: GatewayConfig,
    pub reader: ReaderConfig,
    pub metadata: MetadataConfig,
    /// Compaction, in `shale serve`, `shale metadata` (unless turned off there because
    /// `shale compactor` processes do it) and `shale compactor`.
    pub compactor: CompactorConfig,
    /// The table tier's passes, which run with compaction.
    pub tables: shale_tables::TieringConfig,
    pub cluster: ClusterTiming,
    /// Limits of the HTTP listeners.
    pub connections: shale_api::ConnectionLimits,
    /// Browser access to the HTTP listeners (on for any origin unless turned off).
    pub cors: shale_api::CorsConfig,
    /// Basins and streams to create or reconcile at start (`shale serve`, gateways and
    /// agents): `--init-file`, `SHALE_INIT_FILE`.
    pub init_file: Option<PathBuf>,
    pub auth: AuthSettings,
    pub tls: TlsSettings,
    /// `--takeover` (a command-line choice, not a setting).
    #[serde(skip)]
    pub takeover: bool,
    /// Where the settings came from (the TOML file, or the defaults), for the start line.
    #[serde(skip)]
    pub source: String,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("shale-data"),
            store: None,
            store_delay: Duration::ZERO,
            store_fsync: true,
            store_faults: None,
            http: SocketAddr::from(([127, 0, 0, 1], 8080)),
            grpc: SocketAddr::from(([127, 0, 0, 1], 50051)),
            kafka: shale_kafka::KafkaConfig::default(),
            gateway: GatewayConfig::default(),
            reader: ReaderConfig::default(),
            metadata: MetadataConfig::default(),
            compactor: CompactorConfig::default(),
            tables: shale_tables::TieringConfig::default(),
            cluster: ClusterTiming::default(),
            connections: shale_api::ConnectionLimits::default(),
            cors: shale_api::CorsConfig::default(),
            init_file: None,
            auth: AuthSettings::default(),
            tls: TlsSettings::default(),
            takeover: false,
            source: "defaults".to_string(),
        }
    }
}

/// The ports a server command listens on unless told otherwise: each command has its
/// own, so every role can run on one host with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultPorts {
    pub http: u16,
    pub grpc: u16,
}

impl DefaultPorts {
    pub const SERVE: Self = Self { http: 8080, grpc: 50051 };
    pub const METADATA: Self = Self { http: 8081, grpc: 50061 };
    pub const GATEWAY: Self = Self { http: 8082, grpc: 50052 };
    pub const READER: Self = Self { http: 8083, grpc: 50053 };
    pub const COMPACTOR: Self = Self { http: 8084, grpc: 50054 };
    pub const AGENT: Self = Self { http: 8085, grpc: 50055 };
}

impl ServeConfig {
    /// The settings of a server command whose default ports are `ports`.
    pub fn load(args: &ServeArgs, ports: DefaultPorts) -> anyhow::Result<Self> {
        let mut config = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                let mut config: ServeConfig =
                    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
                let keys: toml::Table = toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
                config.default_ports(ports, |key| keys.contains_key(key));
                config
            }
            None => {
                let mut config = ServeConfig::default();
                config.default_ports(ports, |_| false);
                config
            }
        };
        if let Some(dir) = &args.data_dir {
            config.data_dir = dir.clone();
        }
        if let Some(store) = &args.store {
            config.store = Some(store.clone());
        }
        if let Some(http) = args.http {
            config.http = http;
        }
        if let Some(grpc) = args.grpc {
            config.grpc = grpc;
        }
        if let Some(kafka) = args.kafka {
            config.kafka.listen = Some(kafka);
        }
        if let Some(delay) = args.store_delay {
            config.store_delay = delay;
        }
        for (flag, setting) in [
            (&args.tls_cert, &mut config.tls.cert),
            (&args.tls_key, &mut config.tls.key),
            (&args.tls_ca, &mut config.tls.ca),
        ] {
            if flag.is_some() {
                setting.clone_from(flag);
            }
        }
        config.takeover = args.takeover;
        if args.no_cors {
            config.cors.enabled = false;
        }
        if args.init_file.is_some() {
            config.init_file.clone_from(&args.init_file);
        }
        if let Some(path) = &args.config {
            config.source = path.display().to_string();
        }
        config.auth.resolve()?;
        config.gateway.validate().map_err(|e| anyhow::anyhow!("invalid [gateway] config: {e}"))?;
        if config.reader.chunk_bytes.is_none() {
            // Chunked reads save store round trips; a local directory without added
            // latency has none to save, and the copies would only cost CPU.
            let local = config.reads_local_files();
            config.reader.chunk_bytes = Some(if local { 0 } else { shale_reader::DEFAULT_CHUNK_BYTES });
        }
        Ok(config)
    }

    /// Whether reads go to files on this machine at their own speed: a local directory
    /// without `store_delay` (which stands in for an object store's latency).
    /// (Without calling `store_url`, which makes the data directory.)
    pub fn reads_local_files(&self) -> bool {
        self.stores_in_a_directory() && self.store_delay.is_zero()
    }

    /// Whether the store is a local directory (the default, or a `file://` URL), with or
    /// without `store_delay`.
    pub fn stores_in_a_directory(&self) -> bool {
        self.store.as_deref().is_none_or(|url| url.starts_with("file://"))
    }

    /// Puts the command's default ports on the addresses the file did not set.
    fn default_ports(&mut self, ports: DefaultPorts, file_sets: impl Fn(&str) -> bool) {
        if !file_sets("http") {
            self.http.set_port(ports.http);
        }
        if !file_sets("grpc") {
            self.grpc.set_port(ports.grpc);
        }
    }

    /// The metadata client's settings: the cluster's timing and token.
    pub fn remote_config(&self) -> anyhow::Result<RemoteConfig> {
        Ok(RemoteConfig {
            token: self.auth.cluster_token.clone(),
            ca_pem: self.tls.ca_pem()?,
            timing: self.cluster,
            ..RemoteConfig::default()
        })
    }

    /// The store URL: `--store`, or the data directory on the local filesystem.
    pub fn store_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.store {
            return Ok(url.clone());
        }
        std::fs::create_dir_all(&self.data_dir).with_context(|| format!("creating {}", self.data_dir.display()))?;
        let dir = self.data_dir.canonicalize()?;
        Ok(format!("file://{}", dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_layers_over_defaults_and_rejects_unknown_keys() {
        let config: ServeConfig = toml::from_str("http = \"127.0.0.1:9000\"\n[gateway]\nlinger = \"5ms\"\n").unwrap();
        assert_eq!(config.http.port(), 9000);
        assert_eq!(config.gateway.linger, std::time::Duration::from_millis(5));
        assert_eq!(config.gateway.max_segment_bytes, GatewayConfig::default().max_segment_bytes);
        assert!(toml::from_str::<ServeConfig>("bogus = 1").is_err());
    }

    /// A command line that names only its config file, if any.
    fn no_flags(config: Option<PathBuf>) -> ServeArgs {
        ServeArgs {
            config,
            data_dir: None,
            store: None,
            http: None,
            grpc: None,
            kafka: None,
            store_delay: None,
            tls_cert: None,
            tls_key: None,
            tls_ca: None,
            takeover: false,
            no_cors: false,
            init_file: None,
        }
    }

    /// Each server command has its own default ports; an address the file or a flag sets
    /// wins over them.
    #[test]
    fn roles_default_to_ports_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shale.toml");
        std::fs::write(&file, "http = \"127.0.0.1:9000\"\n").unwrap();
        let args = |config: Option<PathBuf>, grpc: Option<SocketAddr>| ServeArgs { grpc, ..no_flags(config) };
        let ports = [
            DefaultPorts::SERVE,
            DefaultPorts::METADATA,
            DefaultPorts::GATEWAY,
            DefaultPorts::READER,
            DefaultPorts::COMPACTOR,
        ];
        let mut taken = std::collections::HashSet::new();
        for ports in ports {
            let config = ServeConfig::load(&args(None, None), ports).unwrap();
            assert_eq!((config.http.port(), config.grpc.port()), (ports.http, ports.grpc));
            assert!(config.http.ip().is_loopback() && config.grpc.ip().is_loopback());
            assert!(taken.insert(ports.http) && taken.insert(ports.grpc), "{ports:?} collides");
        }
        let flag = SocketAddr::from(([127, 0, 0, 1], 7000));
        let config = ServeConfig::load(&args(Some(file), Some(flag)), DefaultPorts::GATEWAY).unwrap();
        assert_eq!((config.http.port(), config.grpc.port()), (9000, 7000), "the file's and the flag's");
    }

    /// Reads at a local directory's own speed (no delay standing in for an object
    /// store's) read each block alone; elsewhere through chunks; a value the file sets stays.
    #[test]
    fn reads_are_set_up_for_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let load = |toml: &str, store: Option<&str>, delay: Option<&str>| {
            let file = dir.path().join("shale.toml");
            std::fs::write(&file, toml).unwrap();
            let args = ServeArgs {
                store: store.map(str::to_string),
                store_delay: delay.map(|d| humantime::parse_duration(d).unwrap()),
                ..no_flags(Some(file))
            };
            let config = ServeConfig::load(&args, DefaultPorts::SERVE).unwrap();
            (config.reads_local_files(), config.reader.chunk_bytes)
        };
        assert_eq!(load("", None, None), (true, Some(0)), "the default data directory");
        assert_eq!(load("", Some("file:///somewhere"), None), (true, Some(0)));
        let chunked = (false, Some(shale_reader::DEFAULT_CHUNK_BYTES));
        assert_eq!(load("", Some("s3://bucket"), None), chunked);
        assert_eq!(load("", None, Some("30ms")), chunked, "a delayed directory reads as an object store would");
        assert_eq!(load("[reader]\nchunk_bytes = 2048\n", None, None), (true, Some(2048)));
    }
}
