use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use shale_storage::object_store::aws::AmazonS3Builder;
use shale_storage::object_store::ObjectStore;
use tokio::sync::OnceCell;

/// A moto S3 server on a loopback port, shared by every test in one test binary. A
/// watchdog shell kills it when the test process exits.
#[derive(Debug)]
pub struct Moto {
    pub endpoint: String,
}

static MOTO: OnceCell<Moto> = OnceCell::const_new();

const INSTALL_HINT: &str = "moto_server not found: run `bash localstack/s3-local.sh install` (creates .venv with \
     `pip install 'moto[s3]' flask flask-cors`) or set SHALE_MOTO_SERVER to a moto_server binary";

fn moto_binary() -> PathBuf {
    if let Ok(path) = std::env::var("SHALE_MOTO_SERVER") {
        return PathBuf::from(path);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/moto_server");
    if venv.exists() {
        return venv;
    }
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join("moto_server")).find(|p| p.exists()));
    on_path.unwrap_or_else(|| panic!("{INSTALL_HINT}"))
}

impl Moto {
    /// The shared server, started on first use.
    pub async fn shared() -> &'static Moto {
        MOTO.get_or_init(|| async { tokio::task::spawn_blocking(Moto::start).await.unwrap() }).await
    }

    fn start() -> Moto {
        let binary = moto_binary();
        assert!(binary.exists(), "{INSTALL_HINT} (looked at {})", binary.display());
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let script = format!(
            "'{}' -H 127.0.0.1 -p {port} >/dev/null 2>&1 & m=$!; \
             while kill -0 {} 2>/dev/null && kill -0 $m 2>/dev/null; do sleep 1; done; kill $m 2>/dev/null",
            binary.display(),
            std::process::id()
        );
        crate::watchdog(&script).unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let endpoint = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "moto did not listen on {endpoint} within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        Moto { endpoint }
    }

    /// Creates a fresh bucket and returns an object store on it.
    pub async fn bucket(&self, name: &str) -> Arc<dyn ObjectStore> {
        let response = reqwest::Client::new().put(format!("{}/{name}", self.endpoint)).send().await.unwrap();
        assert!(response.status().is_success(), "create bucket {name}: {}", response.status());
        self.store(name)
    }

    /// An object store on an existing bucket.
    pub fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_endpoint(&self.endpoint)
                .with_allow_http(true)
                .with_bucket_name(bucket)
                .with_region("us-east-1")
                .with_access_key_id("test")
                .with_secret_access_key("test")
                .build()
                .unwrap(),
        )
    }

    /// Environment that points `s3://` URLs at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }
}
