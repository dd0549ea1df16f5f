//! SASL over access tokens (SaslHandshake v1, SaslAuthenticate): PLAIN, where the
//! password is a token's secret (or the root token; the user name is not checked), and
//! SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802), where the user name is a token's id and
//! the password its secret, checked against the keys the token keeps (tokens issued
//! before SCRAM keys were kept can use PLAIN only). One [`Login`] per connection.

use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use shale_service::auth::{Access, Authenticator, ScramHash, ScramKeys};

const PLAIN: &str = "PLAIN";
const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
const SCRAM_SHA_512: &str = "SCRAM-SHA-512";
const MECHANISMS: [&str; 3] = [PLAIN, SCRAM_SHA_256, SCRAM_SHA_512];
/// Random bytes the server adds to a SCRAM nonce.
const NONCE_BYTES: usize = 18;

/// Where one connection's login stands.
#[derive(Default)]
pub struct Login {
    state: State,
}

#[derive(Default)]
enum State {
    #[default]
    Start,
    Plain,
    Scram(ScramHash),
    /// The server's first message was sent; the client's proof comes next.
    ScramChallenged {
        hash: ScramHash,
        keys: ScramKeys,
        access: Access,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Failed,
}

/// What one SaslAuthenticate did.
pub enum Step {
    /// Answer and wait for the client's next message.
    Continue(SaslAuthenticateResponse),
    /// Answer; the connection now acts for this caller.
    Done(SaslAuthenticateResponse, Access),
    /// Answer with the error; the connection is then closed.
    Failed(SaslAuthenticateResponse),
}

impl Login {
    pub fn handshake(&mut self, request: SaslHandshakeRequest) -> SaslHandshakeResponse {
        let mechanisms = MECHANISMS.iter().map(|m| StrBytes::from_static_str(m)).collect();
        let response = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
        self.state = match &*request.mechanism {
            PLAIN => State::Plain,
            SCRAM_SHA_256 => State::Scram(ScramHash::Sha256),
            SCRAM_SHA_512 => State::Scram(ScramHash::Sha512),
            _ => {
                self.state = State::Failed;
                return response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
            }
        };
        response
    }

    pub async fn authenticate(&mut self, auth: &Authenticator, request: SaslAuthenticateRequest) -> Step {
        match self.advance(auth, &request.auth_bytes).await {
            Ok((bytes, None)) => Step::Continue(SaslAuthenticateResponse::default().with_auth_bytes(bytes)),
            Ok((bytes, Some(access))) => Step::Done(SaslAuthenticateResponse::default().with_auth_bytes(bytes), access),
            Err(message) => {
                self.state = State::Failed;
                tracing::info!(reason = %message, "kafka sasl authentication failed");
                Step::Failed(
                    SaslAuthenticateResponse::default()
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(Some(StrBytes::from_string(message))),
                )
            }
        }
    }

    async fn advance(&mut self, auth: &Authenticator, bytes: &[u8]) -> Result<(Bytes, Option<Access>), String> {
        match std::mem::take(&mut self.state) {
            State::Start | State::Failed => Err("SaslAuthenticate before a SaslHandshake chose a mechanism".into()),
            State::Plain => {
                let secret = plain_password(bytes)?;
                let access = auth.authenticate_secret(secret).await.map_err(|e| e.to_string())?;
                Ok((Bytes::new(), Some(access)))
            }
            State::Scram(hash) => {
                let first = ClientFirst::parse(bytes)?;
                let (keys, access) = auth.scram_keys(&first.user, hash).await.map_err(|e| e.to_string())?;
                let mut random = [0u8; NONCE_BYTES];
                shale_storage::ids::fill_secret(&mut random);
                let nonce = format!("{}{}", first.nonce, base64::engine::general_purpose::STANDARD.encode(random));
                let salt = base64::engine::general_purpose::STANDARD.encode(&keys.salt);
                let server_first = format!("r={nonce},s={salt},i={}", keys.iterations);
                let reply = Bytes::from(server_first.clone().into_bytes());
                self.state =
                    State::ScramChallenged { hash, keys, access, client_first_bare: first.bare, server_first, nonce };
                Ok((reply, None))
            }
            State::ScramChallenged { hash, keys, access, client_first_bare, server_first, nonce } => {
                let text = std::str::from_utf8(bytes).map_err(|_| "SCRAM client-final is not UTF-8".to_string())?;
                let (without_proof, proof) = text.rsplit_once(",p=").ok_or("SCRAM client-final has no proof (p=)")?;
                if attribute(without_proof, "r") != Some(nonce.as_str()) {
                    return Err("SCRAM client-final has another nonce".into());
                }
                if attribute(without_proof, "c") != Some("biws") {
                    return Err("SCRAM channel binding is not supported (c= must be biws)".into());
                }
                let proof = base64::engine::general_purpose::STANDARD
                    .decode(proof)
                    .map_err(|_| "SCRAM proof is not base64".to_string())?;
                let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
                if !hash.verify(&keys, auth_message.as_bytes(), &proof) {
                    return Err("SCRAM proof does not match the token".into());
                }
                let signature = hash.server_signature(&keys, auth_message.as_bytes());
                let server_final = format!("v={}", base64::engine::general_purpose::STANDARD.encode(signature));
                Ok((Bytes::from(server_final.into_bytes()), Some(access)))
            }
        }
    }
}

/// The password of a PLAIN message: `authzid NUL authcid NUL password`.
fn plain_password(bytes: &[u8]) -> Result<&str, String> {
    let mut parts = bytes.split(|&b| b == 0);
    let (Some(_authzid), Some(_authcid), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("PLAIN message is not authzid NUL user NUL password".into());
    };
    std::str::from_utf8(password).map_err(|_| "PLAIN password is not UTF-8".to_string())
}

/// A SCRAM client-first message: `n,,n=<user>,r=<nonce>`.
struct ClientFirst {
    user: String,
    nonce: String,
    /// Without the GS2 header: what the auth message starts with.
    bare: String,
}

impl ClientFirst {
    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "SCRAM client-first is not UTF-8".to_string())?;
        let bare = text
            .strip_prefix("n,,")
            .or_else(|| text.strip_prefix("y,,"))
            .ok_or("SCRAM client-first must start with `n,,` (no channel binding, no authzid)")?;
        let user = attribute(bare, "n").ok_or("SCRAM client-first has no user name (n=)")?;
        let nonce = attribute(bare, "r").filter(|r| !r.is_empty()).ok_or("SCRAM client-first has no nonce (r=)")?;
        // RFC 5802's escapes in a user name.
        let user = user.replace("=2C", ",").replace("=3D", "=");
        Ok(Self { user, nonce: nonce.to_string(), bare: bare.to_string() })
    }
}

/// The value of `key=` in a comma-separated SCRAM message.
fn attribute<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    message.split(',').find_map(|part| part.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages_give_their_password() {
        assert_eq!(plain_password(b"\0user\0secret").unwrap(), "secret");
        assert_eq!(plain_password(b"admin\0user\0s").unwrap(), "s");
        assert!(plain_password(b"user\0secret").is_err());
        assert!(plain_password(b"a\0b\0c\0d").is_err());
    }

    #[test]
    fn client_first_messages_parse_with_escapes_and_refuse_channel_binding() {
        let first = ClientFirst::parse(b"n,,n=team=2Ca,r=abc").unwrap();
        assert_eq!(
            (first.user.as_str(), first.nonce.as_str(), first.bare.as_str()),
            ("team,a", "abc", "n=team=2Ca,r=abc")
        );
        assert!(ClientFirst::parse(b"p=tls-unique,,n=u,r=x").is_err());
        assert!(ClientFirst::parse(b"n,,n=u").is_err());
    }

    #[test]
    fn an_unknown_mechanism_is_refused_with_the_list() {
        let mut login = Login::default();
        let response =
            login.handshake(SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("GSSAPI")));
        assert_eq!(response.error_code, ResponseError::UnsupportedSaslMechanism.code());
        assert_eq!(response.mechanisms.len(), 3);
        let ok =
            login.handshake(SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(SCRAM_SHA_512)));
        assert_eq!(ok.error_code, 0);
    }
}
