//! The service account signing key and JWS compact tokens over it (upstream `pkg/serviceaccount/jwt.go`).
//!
//! ES256 on a P-256 key: ring, already in the tree through rustls, generates and signs with P-256 but
//! cannot generate RSA keys, and the maintained JWT crates have left ring (jsonwebtoken 10+ offers only
//! aws-lc-rs or RustCrypto's `rsa`). A JWS is three base64url parts, so it is written here rather than
//! pulled in. Upstream signs RS256 by default but accepts ES256 keys (`--service-account-key-file`), and
//! clients never look inside. The key is made on first start as `<data_dir>/pki/sa.key` (PKCS#8 PEM,
//! 0600) and reused, so tokens survive restarts.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};

use super::claims::{Claims, Invalid};
use crate::tls::{self, TlsError};

/// The key file under the PKI directory (kubeadm's name).
pub const KEY_FILE: &str = "sa.key";

/// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte uncompressed point: what upstream
/// hashes for the key id.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
    0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    kid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
}

/// Signs and verifies tokens with the cluster's service account key.
pub struct Signer {
    key: EcdsaKeyPair,
    public: Vec<u8>,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// Load `<pki_dir>/sa.key`, or make it. A present but unreadable key is an error, never replaced:
    /// replacing it would end every token in use.
    pub fn load_or_create(pki_dir: &Path) -> Result<Signer, TlsError> {
        std::fs::create_dir_all(pki_dir).map_err(|source| TlsError::CreateDir {
            path: pki_dir.to_path_buf(),
            source,
        })?;
        let path = pki_dir.join(KEY_FILE);
        let rng = SystemRandom::new();
        let invalid = |detail: String| TlsError::Invalid {
            path: path.clone(),
            detail,
        };
        let pkcs8 = match tls::read_optional(&path)? {
            Some(pem) => {
                tls::restrict(&path)?;
                match PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| invalid(e.to_string()))? {
                    PrivateKeyDer::Pkcs8(der) => der.secret_pkcs8_der().to_vec(),
                    _ => return Err(invalid("not a PKCS#8 private key".into())),
                }
            }
            None => {
                let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                    .map_err(|_| invalid("cannot generate a P-256 key".into()))?;
                tls::write_file(&path, &pem("PRIVATE KEY", doc.as_ref()), tls::SECRET_MODE)?;
                doc.as_ref().to_vec()
            }
        };
        Signer::from_pkcs8(&pkcs8, rng).map_err(invalid)
    }

    fn from_pkcs8(pkcs8: &[u8], rng: SystemRandom) -> Result<Signer, String> {
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
            .map_err(|e| format!("not a P-256 key: {e}"))?;
        let public = key.public_key().as_ref().to_vec();
        // upstream keyIDFromPublicKey: base64url(sha256(DER of the PKIX public key)).
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&public);
        let kid = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Ok(Signer {
            key,
            public,
            kid,
            rng,
        })
    }

    /// A fresh key that lives in memory only (tests).
    pub fn ephemeral() -> Signer {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("the system RNG works");
        Signer::from_pkcs8(doc.as_ref(), rng).expect("a key ring just made")
    }

    /// The key id in every token's header.
    pub fn key_id(&self) -> &str {
        &self.kid
    }

    /// The signed token.
    pub fn sign(&self, claims: &Claims) -> Result<String, String> {
        let header = Header {
            alg: "ES256".into(),
            kid: self.kid.clone(),
            typ: None,
        };
        let encode = |v: &[u8]| URL_SAFE_NO_PAD.encode(v);
        let head = encode(&serde_json::to_vec(&header).map_err(|e| e.to_string())?);
        let body = encode(&serde_json::to_vec(claims).map_err(|e| e.to_string())?);
        let input = format!("{head}.{body}");
        let sig = self
            .key
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| "signing failed".to_string())?;
        Ok(format!("{input}.{}", encode(sig.as_ref())))
    }

    /// The claims of a token this key signed. Only the signature and the shape are checked here; see
    /// [`super::claims::check_claims`] for the rest.
    pub fn verify(&self, token: &str) -> Result<Claims, Invalid> {
        let mut parts = token.split('.');
        let (Some(head), Some(body), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Invalid::Malformed("not three parts"));
        };
        let decode = |p: &str| {
            URL_SAFE_NO_PAD
                .decode(p)
                .map_err(|_| Invalid::Malformed("not base64url"))
        };
        let header: Header =
            serde_json::from_slice(&decode(head)?).map_err(|_| Invalid::Malformed("header is not JSON"))?;
        if header.alg != "ES256" {
            return Err(Invalid::Malformed("not ES256"));
        }
        if !header.kid.is_empty() && header.kid != self.kid {
            return Err(Invalid::Signature);
        }
        let signed = &token[..head.len() + 1 + body.len()];
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &self.public)
            .verify(signed.as_bytes(), &decode(sig)?)
            .map_err(|_| Invalid::Signature)?;
        serde_json::from_slice(&decode(body)?).map_err(|_| Invalid::Malformed("claims are not JSON"))
    }
}

/// A PEM block, 64 columns, as every PEM reader expects.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::super::claims::{self, ObjectRef, Subject};
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn claims() -> Claims {
        let subject = Subject {
            namespace: "ns".into(),
            service_account: ObjectRef::new("sa", "uid"),
            ..Default::default()
        };
        let plan = claims::plan(&[], 600, false, &claims::api_audiences());
        claims::build(&subject, &plan, 1000, "j".into())
    }

    #[test]
    fn a_signed_token_verifies_and_returns_its_claims() {
        let s = Signer::ephemeral();
        let token = s.sign(&claims()).unwrap();
        assert_eq!(token.split('.').count(), 3);
        assert_eq!(s.verify(&token).unwrap(), claims());
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap())
                .unwrap();
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["kid"], s.key_id());
    }

    #[test]
    fn tampered_foreign_and_malformed_tokens_are_rejected() {
        let s = Signer::ephemeral();
        let token = s.sign(&claims()).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let mut other = claims();
        other.sub = "system:serviceaccount:kube-system:admin".into();
        let forged_body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&other).unwrap());
        let forged = format!("{}.{forged_body}.{}", parts[0], parts[2]);
        assert_eq!(s.verify(&forged), Err(Invalid::Signature));
        let foreign = Signer::ephemeral().sign(&claims()).unwrap();
        assert_eq!(s.verify(&foreign), Err(Invalid::Signature));
        let none_alg = format!("{}.{}.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), parts[1]);
        assert!(matches!(s.verify(&none_alg), Err(Invalid::Malformed(_))));
        for bad in ["", "abc", "a.b", "a.b.c.d", "!!.??.**"] {
            assert!(matches!(s.verify(bad), Err(Invalid::Malformed(_))), "{bad}");
        }
    }

    #[test]
    fn the_key_is_made_once_and_reused_across_starts() {
        let dir = tempfile::tempdir().unwrap();
        let first = Signer::load_or_create(dir.path()).unwrap();
        let token = first.sign(&claims()).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let second = Signer::load_or_create(dir.path()).unwrap();
        assert_eq!(second.key_id(), first.key_id());
        assert_eq!(second.verify(&token).unwrap(), claims());
        std::fs::write(dir.path().join(KEY_FILE), "garbage").unwrap();
        assert!(Signer::load_or_create(dir.path()).is_err());
    }
}
