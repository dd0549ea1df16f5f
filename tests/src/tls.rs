//! A throwaway certificate authority and a server certificate for `localhost` and
//! `127.0.0.1`, written as PEM files, for TLS tests.

use std::path::PathBuf;

pub struct TestCerts {
    pub dir: tempfile::TempDir,
    /// The CA certificate clients trust.
    pub ca: PathBuf,
    /// The server's certificate (signed by the CA) and key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCerts {
    pub fn new() -> anyhow::Result<TestCerts> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir()?;
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "shale test CA");
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);
        let server_key = KeyPair::generate()?;
        let server_params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
        let server_cert = server_params.signed_by(&server_key, &issuer)?;
        let write = |name: &str, pem: String| -> anyhow::Result<PathBuf> {
            let path = dir.path().join(name);
            std::fs::write(&path, pem)?;
            Ok(path)
        };
        Ok(TestCerts {
            ca: write("ca.pem", ca_cert.pem())?,
            cert: write("server.pem", server_cert.pem())?,
            key: write("server.key", server_key.serialize_pem())?,
            dir,
        })
    }
}
