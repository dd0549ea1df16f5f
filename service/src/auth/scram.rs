//! SCRAM (RFC 5802, RFC 7677) keys for access tokens, so Kafka clients can authenticate
//! with SASL/SCRAM-SHA-256 or -512 using a token's id as user name and its secret as
//! password without the secret crossing the wire. Each token stores, per hash, a salt,
//! an iteration count and the two keys derived from its secret (never the secret).
//! The message exchange itself is the transport's (`shale-kafka`'s `sasl`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};

/// Iterations of the key derivation (RFC 7677's minimum, Kafka's default).
pub const SCRAM_ITERATIONS: u32 = 4096;
/// Random bytes of a salt.
const SALT_BYTES: usize = 16;

/// The hashes SCRAM runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

/// What a server keeps to check a SCRAM client: enough to verify a proof and sign the
/// answer, not enough to authenticate as the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramKeys {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// A token's keys for both hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramSecrets {
    pub sha256: ScramKeys,
    pub sha512: ScramKeys,
}

impl ScramSecrets {
    /// Keys for `secret` under fresh random salts.
    pub fn derive(secret: &str) -> Self {
        let salt = || {
            let mut salt = vec![0u8; SALT_BYTES];
            shale_storage::ids::fill_secret(&mut salt);
            salt
        };
        Self {
            sha256: ScramHash::Sha256.keys(secret, &salt(), SCRAM_ITERATIONS),
            sha512: ScramHash::Sha512.keys(secret, &salt(), SCRAM_ITERATIONS),
        }
    }

    pub fn for_hash(&self, hash: ScramHash) -> &ScramKeys {
        match hash {
            ScramHash::Sha256 => &self.sha256,
            ScramHash::Sha512 => &self.sha512,
        }
    }
}

impl ScramHash {
    fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
            let mut mac = <M as KeyInit>::new_from_slice(key).expect("HMAC takes a key of any length");
            for part in parts {
                mac.update(part);
            }
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            ScramHash::Sha256 => run::<Hmac<Sha256>>(key, parts),
            ScramHash::Sha512 => run::<Hmac<Sha512>>(key, parts),
        }
    }

    fn digest(self, bytes: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(bytes).to_vec(),
            ScramHash::Sha512 => Sha512::digest(bytes).to_vec(),
        }
    }

    /// PBKDF2 with this hash's HMAC, one block long (RFC 5802's `Hi`).
    fn salted_password(self, secret: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut block = self.hmac(secret.as_bytes(), &[salt, &1u32.to_be_bytes()]);
        let mut out = block.clone();
        for _ in 1..iterations {
            block = self.hmac(secret.as_bytes(), &[&block]);
            out.iter_mut().zip(&block).for_each(|(o, b)| *o ^= b);
        }
        out
    }

    /// The keys a server keeps for `secret`.
    pub fn keys(self, secret: &str, salt: &[u8], iterations: u32) -> ScramKeys {
        let salted = self.salted_password(secret, salt, iterations);
        let client_key = self.hmac(&salted, &[b"Client Key"]);
        ScramKeys {
            salt: salt.to_vec(),
            iterations,
            stored_key: self.digest(&client_key),
            server_key: self.hmac(&salted, &[b"Server Key"]),
        }
    }

    /// Whether `proof` proves knowledge of the secret behind `keys` for `auth_message`
    /// (compared in constant time).
    pub fn verify(self, keys: &ScramKeys, auth_message: &[u8], proof: &[u8]) -> bool {
        let signature = self.hmac(&keys.stored_key, &[auth_message]);
        if proof.len() != signature.len() {
            return false;
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let stored = self.digest(&client_key);
        stored.iter().zip(&keys.stored_key).fold(0u8, |diff, (a, b)| diff | (a ^ b)) == 0
            && stored.len() == keys.stored_key.len()
    }

    /// The server's signature over `auth_message`, which proves to the client that the
    /// server knew its keys.
    pub fn server_signature(self, keys: &ScramKeys, auth_message: &[u8]) -> Vec<u8> {
        self.hmac(&keys.server_key, &[auth_message])
    }

    /// The proof a client computes (for tests and the fuzz-free check of `verify`).
    pub fn client_proof(self, secret: &str, keys: &ScramKeys, auth_message: &[u8]) -> Vec<u8> {
        let salted = self.salted_password(secret, &keys.salt, keys.iterations);
        let client_key = self.hmac(&salted, &[b"Client Key"]);
        let signature = self.hmac(&keys.stored_key, &[auth_message]);
        client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use base64::Engine;

    fn b64(s: &str) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD.decode(s).unwrap()
    }

    /// RFC 7677's SCRAM-SHA-256 example exchange (user `user`, password `pencil`).
    #[test]
    fn the_rfc_7677_example_verifies_and_signs_as_published() {
        let keys = ScramHash::Sha256.keys("pencil", &b64("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
            r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
            c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let proof = b64("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
        assert!(ScramHash::Sha256.verify(&keys, auth_message.as_bytes(), &proof));
        assert_eq!(
            ScramHash::Sha256.server_signature(&keys, auth_message.as_bytes()),
            b64("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
        );
        let mut wrong = proof.clone();
        wrong[0] ^= 1;
        assert!(!ScramHash::Sha256.verify(&keys, auth_message.as_bytes(), &wrong));
    }

    #[test]
    fn a_proof_from_the_secret_verifies_under_both_hashes_and_no_other_secret_does() {
        let secrets = ScramSecrets::derive("s3cret");
        for hash in [ScramHash::Sha256, ScramHash::Sha512] {
            let keys = secrets.for_hash(hash);
            let proof = hash.client_proof("s3cret", keys, b"message");
            assert!(hash.verify(keys, b"message", &proof));
            assert!(!hash.verify(keys, b"other message", &proof));
            assert!(!hash.verify(keys, b"message", &hash.client_proof("guess", keys, b"message")));
        }
    }
}
