use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::prefix::PrefixStore;
use object_store::ObjectStore;

use crate::SyncedDir;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid store url `{url}`: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot open store `{url}`: {source}")]
    Open { url: String, source: Box<dyn std::error::Error + Send + Sync> },
}

/// Opens the object store a URL names:
/// - `memory://`: in process, lost on exit (tests);
/// - `file:///abs/path` or `file://rel/path`: a local directory, created if missing;
///   every write is fsynced (with the directory entries naming it) before it returns;
/// - `s3://bucket[/prefix]`: S3 or any S3-compatible server. Credentials, region and
///   endpoint come from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
///   `AWS_ENDPOINT_URL` and friends; an `http://` endpoint allows plain HTTP.
pub fn open_store(url: &str) -> Result<Arc<dyn ObjectStore>, StoreError> {
    open_store_with(url, true)
}

/// [`open_store`], choosing whether a `file://` store fsyncs its writes (`fsync: false`
/// is faster and loses recent acked writes on a power loss; a crash of the process
/// alone loses nothing either way).
pub fn open_store_with(url: &str, fsync: bool) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let invalid = |reason: &str| StoreError::InvalidUrl { url: url.to_string(), reason: reason.to_string() };
    let open_err = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Open { url: url.to_string(), source };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("expected scheme://"))?;
    match scheme {
        "memory" => Ok(Arc::new(InMemory::new())),
        "file" => {
            if rest.is_empty() {
                return Err(invalid("file:// needs a path"));
            }
            std::fs::create_dir_all(rest).map_err(|e| open_err(Box::new(e)))?;
            let root = std::fs::canonicalize(rest).map_err(|e| open_err(Box::new(e)))?;
            let store = LocalFileSystem::new_with_prefix(&root).map_err(|e| open_err(Box::new(e)))?;
            if !fsync {
                // Conditional updates (SlateDB's collector, table commits) still work.
                return Ok(Arc::new(SyncedDir::without_fsync(Arc::new(store), root)));
            }
            // Acked means on disk: every file written is fsynced before the write returns.
            Ok(Arc::new(SyncedDir::new(Arc::new(store), root)))
        }
        "s3" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(invalid("s3:// needs a bucket"));
            }
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            let endpoint = std::env::var("AWS_ENDPOINT_URL_S3")
                .or_else(|_| std::env::var("AWS_ENDPOINT_URL"))
                .or_else(|_| std::env::var("AWS_ENDPOINT"));
            if let Ok(endpoint) = endpoint {
                if endpoint.starts_with("http://") {
                    builder = builder.with_allow_http(true);
                }
                builder = builder.with_endpoint(endpoint);
            }
            if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
                builder = builder.with_region("us-east-1");
            }
            let s3: Arc<dyn ObjectStore> = Arc::new(builder.build().map_err(|e| open_err(Box::new(e)))?);
            let prefix = prefix.trim_matches('/');
            if prefix.is_empty() {
                Ok(s3)
            } else {
                Ok(Arc::new(PrefixStore::new(s3, prefix.to_string())))
            }
        }
        other => Err(invalid(&format!("unsupported scheme `{other}` (use memory://, file:// or s3://)"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_urls() {
        assert!(matches!(open_store("nope"), Err(StoreError::InvalidUrl { .. })));
        assert!(matches!(open_store("gs://bucket"), Err(StoreError::InvalidUrl { .. })));
        assert!(matches!(open_store("s3://"), Err(StoreError::InvalidUrl { .. })));
        assert!(matches!(open_store("file://"), Err(StoreError::InvalidUrl { .. })));
        assert!(open_store("memory://").is_ok());
    }
}
