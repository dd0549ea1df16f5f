//! What a failed store request tells a client: its kind, never the error's own text,
//! which for the local-filesystem store names absolute paths on the server's disk. The
//! full error goes to the server's log.

use object_store::Error;

/// A summary of `error` fit for a client: the kind of failure only.
pub fn describe(error: &Error) -> &'static str {
    match error {
        Error::NotFound { .. } => "not found in the store",
        Error::AlreadyExists { .. } => "already exists in the store",
        Error::Precondition { .. } => "store precondition failed",
        Error::NotModified { .. } => "not modified",
        Error::PermissionDenied { .. } => "store permission denied",
        Error::Unauthenticated { .. } => "store credentials refused",
        Error::NotSupported { .. } | Error::NotImplemented { .. } => "operation not supported by the store",
        _ => "store request failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_name_no_path() {
        let source: Box<dyn std::error::Error + Send + Sync> =
            Box::new(std::io::Error::new(std::io::ErrorKind::NotFound, "/srv/data/segments/x: no such file"));
        let not_found = Error::NotFound { path: "/srv/data/segments/x".into(), source };
        assert_eq!(describe(&not_found), "not found in the store");
        let generic = Error::Generic { store: "LocalFileSystem", source: "/srv/data/x: disk full".into() };
        assert!(!describe(&generic).contains('/'));
    }
}
