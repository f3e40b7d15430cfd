//! The cluster's TLS material: a private CA, the API server's serving certificate signed by it, and the
//! admin bearer token, all made on first start under the data directory and reused afterwards.
//!
//! `main` calls [`load_or_create`] before serving, hands [`server_config`] to the HTTPS listener and
//! writes `ca_pem` and `token` into kubeconfigs. Reuse matters: kubeconfigs written on an earlier start
//! keep working only if the CA and the token survive restarts. The serving certificate is derived
//! material and is re-issued from the same CA whenever a requested SAN is missing from it.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Write};
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "apiserver.crt";
const SERVING_KEY: &str = "apiserver.key";
/// The SANs the serving certificate was issued for, one per line. Kept beside the certificate so we need
/// no X.509 parser to know whether a re-issue is due.
const SERVING_SANS: &str = "apiserver.sans";
const TOKEN: &str = "token";

const CA_COMMON_NAME: &str = "kubeling-ca";
const SERVING_COMMON_NAME: &str = "kubeling-apiserver";
/// Always in the serving certificate: what kubeconfigs written by `main` point at, and what in-cluster clients
/// dial (the `kubernetes` Service's ClusterIP and DNS names, as kube-apiserver adds them).
const BASE_SANS: [&str; 8] = [
    "localhost",
    "127.0.0.1",
    "::1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "10.96.0.1",
];

pub(crate) const SECRET_MODE: u32 = 0o600;
const PUBLIC_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o700;

/// The PEM texts and the token, as the HTTPS listener and kubeconfig writers need them.
#[derive(Clone)]
pub struct TlsMaterial {
    /// The CA certificate (clients trust this: `certificate-authority-data`).
    pub ca_pem: String,
    /// The serving certificate (leaf only).
    pub cert_pem: String,
    /// The serving certificate's private key (PKCS#8).
    pub key_pem: String,
    /// The admin bearer token.
    pub token: String,
}

impl std::fmt::Debug for TlsMaterial {
    /// Leaves the secrets out, so the material can sit in logged state.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_pem", &self.ca_pem)
            .finish_non_exhaustive()
    }
}

/// What went wrong while making, loading or serving the TLS material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The data directory could not be created or restricted.
    #[error("cannot create directory {}: {source}", .path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    /// A file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: io::Error },
    /// A file could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write { path: PathBuf, source: io::Error },
    /// An existing CA file does not hold what it should; we refuse to overwrite a CA that kubeconfigs trust.
    #[error("invalid {}: {detail}", .path.display())]
    Invalid { path: PathBuf, detail: String },
    /// rcgen failed to make a key or certificate.
    #[error("cannot generate {what}: {source}")]
    Generate {
        what: &'static str,
        source: rcgen::Error,
    },
    /// The PEM handed to [`server_config`] does not parse.
    #[error("invalid {what} pem: {detail}")]
    Pem { what: &'static str, detail: String },
    /// rustls refused the certificate or key.
    #[error("cannot build tls server config: {0}")]
    Config(#[source] rustls::Error),
}

/// Loads the TLS material from `dir`, creating what is missing.
///
/// `dir` gets mode 0700; `ca.key`, `apiserver.key` and `token` 0600. An existing CA and token are
/// reused; a present but unreadable CA is an error, never silently replaced. The serving certificate is
/// re-issued from the same CA when it is missing or unreadable, when the CA was just made, or when an
/// entry of `extra_sans` (IP addresses or DNS names) is not in it; a re-issue keeps the SANs it had.
/// Unspecified addresses (`0.0.0.0`, `::`) are skipped: no client connects to them.
pub fn load_or_create(dir: &Path, extra_sans: &[String]) -> Result<TlsMaterial, TlsError> {
    fs::create_dir_all(dir).map_err(|source| TlsError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE)).map_err(|source| TlsError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;

    let (ca_pem, ca_key, ca_is_new) = load_or_create_ca(dir)?;
    let issuer = Issuer::new(ca_params(), ca_key);

    let wanted: BTreeSet<String> = BASE_SANS
        .iter()
        .map(|s| s.to_string())
        .chain(extra_sans.iter().filter_map(|s| normalize_san(s)))
        .collect();
    let serving = if ca_is_new { None } else { load_serving(dir)? };
    let (cert_pem, key_pem) = match serving {
        Some((cert, key, have)) if wanted.is_subset(&have) => (cert, key),
        previous => {
            // Keep the SANs the old certificate had, so kubeconfigs pointing at an earlier address still work.
            let sans: BTreeSet<String> = previous
                .map(|(_, _, have)| have)
                .unwrap_or_default()
                .into_iter()
                .chain(wanted)
                .collect();
            issue_serving(dir, &issuer, &sans)?
        }
    };

    let token = load_or_create_token(dir)?;
    Ok(TlsMaterial {
        ca_pem,
        cert_pem,
        key_pem,
        token,
    })
}

/// A rustls server configuration for the HTTPS listener: the ring provider named explicitly (so no
/// process-level default is needed, see dependencies.md §5), ALPN `h2` then `http/1.1`, and no client
/// certificate required (clients authenticate with the bearer token).
pub fn server_config(m: &TlsMaterial) -> Result<rustls::ServerConfig, TlsError> {
    let certs = CertificateDer::pem_slice_iter(m.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what: "serving certificate",
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what: "serving certificate",
            detail: "no certificate found".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes()).map_err(|e| TlsError::Pem {
        what: "serving key",
        detail: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The CA's parameters. Also rebuilds the issuer of a CA loaded from disk: rcgen (without its
/// x509-parser feature) cannot read a certificate back, and signing needs only the subject name, the key
/// identifier method and the key, all of which this reproduces exactly.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, CA_COMMON_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn load_or_create_ca(dir: &Path) -> Result<(String, KeyPair, bool), TlsError> {
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    if let (Some(cert_pem), Some(key_pem)) = (read_optional(&cert_path)?, read_optional(&key_path)?) {
        let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Invalid {
                path: cert_path.clone(),
                detail: e.to_string(),
            })?;
        if certs.is_empty() {
            return Err(TlsError::Invalid {
                path: cert_path,
                detail: "no certificate found".into(),
            });
        }
        let key = KeyPair::from_pem(&key_pem).map_err(|e| TlsError::Invalid {
            path: key_path.clone(),
            detail: e.to_string(),
        })?;
        restrict(&key_path)?;
        return Ok((cert_pem, key, false));
    }

    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: "ca key",
        source,
    })?;
    let cert = ca_params()
        .self_signed(&key)
        .map_err(|source| TlsError::Generate {
            what: "ca certificate",
            source,
        })?;
    let cert_pem = cert.pem();
    // Key first: a crash in between leaves no certificate without its key.
    write_file(&key_path, &key.serialize_pem(), SECRET_MODE)?;
    write_file(&cert_path, &cert_pem, PUBLIC_MODE)?;
    Ok((cert_pem, key, true))
}

/// The serving certificate, key and SAN list if all three are present and the PEM parses.
fn load_serving(dir: &Path) -> Result<Option<(String, String, BTreeSet<String>)>, TlsError> {
    let (Some(cert), Some(key), Some(sans)) = (
        read_optional(&dir.join(SERVING_CERT))?,
        read_optional(&dir.join(SERVING_KEY))?,
        read_optional(&dir.join(SERVING_SANS))?,
    ) else {
        return Ok(None);
    };
    let cert_ok = CertificateDer::pem_slice_iter(cert.as_bytes())
        .next()
        .is_some_and(|c| c.is_ok());
    if !cert_ok || PrivateKeyDer::from_pem_slice(key.as_bytes()).is_err() {
        return Ok(None);
    }
    restrict(&dir.join(SERVING_KEY))?;
    let sans = sans.lines().filter_map(normalize_san).collect();
    Ok(Some((cert, key, sans)))
}

fn issue_serving(
    dir: &Path,
    issuer: &Issuer<'_, KeyPair>,
    sans: &BTreeSet<String>,
) -> Result<(String, String), TlsError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, SERVING_COMMON_NAME);
    params.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => s.clone().try_into().map(SanType::DnsName),
        })
        .collect::<Result<_, _>>()
        .map_err(|source| TlsError::Generate {
            what: "serving certificate",
            source,
        })?;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // OpenSSL's strict verification (Python 3.13's default context) wants an authority key identifier.
    params.use_authority_key_identifier_extension = true;

    let key = KeyPair::generate().map_err(|source| TlsError::Generate {
        what: "serving key",
        source,
    })?;
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|source| TlsError::Generate {
            what: "serving certificate",
            source,
        })?;
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    let san_list: String = sans.iter().map(|s| format!("{s}\n")).collect();
    write_file(&dir.join(SERVING_KEY), &key_pem, SECRET_MODE)?;
    write_file(&dir.join(SERVING_CERT), &cert_pem, PUBLIC_MODE)?;
    // Last, so a crash before it makes the next start issue again rather than trust a stale list.
    write_file(&dir.join(SERVING_SANS), &san_list, PUBLIC_MODE)?;
    Ok((cert_pem, key_pem))
}

fn load_or_create_token(dir: &Path) -> Result<String, TlsError> {
    let path = dir.join(TOKEN);
    if let Some(existing) = read_optional(&path)? {
        let token = existing.trim();
        if !token.is_empty() {
            restrict(&path)?;
            return Ok(token.to_string());
        }
    }
    // 32 random bytes, 43 url-safe base64 characters
    let bytes: [u8; 32] = rand::random();
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    write_file(&path, &format!("{token}\n"), SECRET_MODE)?;
    Ok(token)
}

/// IPs in canonical form (`::1`, not `0:0:0:0:0:0:0:1`), DNS names lower case; blank lines and
/// unspecified addresses dropped.
fn normalize_san(s: &str) -> Option<String> {
    let s = s.trim();
    match s.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() => None,
        Ok(ip) => Some(ip.to_string()),
        Err(_) if s.is_empty() => None,
        Err(_) => Some(s.to_ascii_lowercase()),
    }
}

pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, TlsError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TlsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Tightens a reused secret file that someone loosened.
pub(crate) fn restrict(path: &Path) -> Result<(), TlsError> {
    fs::set_permissions(path, fs::Permissions::from_mode(SECRET_MODE)).map_err(|source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes through a temporary file and a rename, so a crash never leaves half a key behind.
pub(crate) fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), TlsError> {
    let err = |source| TlsError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let _ = fs::remove_file(&tmp);
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        // The umask may have narrowed the mode; set it exactly.
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConnection};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Runs a TLS handshake in memory, a client trusting only our CA dialing `name`; returns the ALPN
    /// protocol the server picked.
    fn handshake(m: &TlsMaterial, name: &str) -> Result<Option<Vec<u8>>, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(m.ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let mut client_config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client_config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let server_name = ServerName::try_from(name.to_string()).unwrap();
        let mut client = ClientConnection::new(Arc::new(client_config), server_name)?;
        let mut server = ServerConnection::new(Arc::new(server_config(m).unwrap()))?;

        for _ in 0..20 {
            let mut wire = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut wire).unwrap();
            }
            let mut rd = &wire[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).unwrap();
                server.process_new_packets()?;
            }
            let mut wire = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut wire).unwrap();
            }
            let mut rd = &wire[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).unwrap();
                client.process_new_packets()?;
            }
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(client.alpn_protocol().map(<[u8]>::to_vec));
            }
        }
        panic!("handshake did not finish");
    }

    #[test]
    fn first_call_creates_material_with_private_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        let m = load_or_create(&dir, &[]).unwrap();

        assert!(m.ca_pem.contains("BEGIN CERTIFICATE"));
        assert!(m.cert_pem.contains("BEGIN CERTIFICATE"));
        assert!(m.key_pem.contains("PRIVATE KEY"));
        assert!(m.token.len() >= 32);
        assert!(
            m.token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(m.ca_pem, m.cert_pem, "the CA is never served as the leaf");

        assert_eq!(mode(&dir), 0o700);
        for secret in [CA_KEY, SERVING_KEY, TOKEN] {
            assert_eq!(mode(&dir.join(secret)), 0o600, "{secret}");
        }
        assert_eq!(fs::read_to_string(dir.join(TOKEN)).unwrap().trim(), m.token);
        assert_eq!(fs::read_to_string(dir.join(CA_CERT)).unwrap(), m.ca_pem);
    }

    #[test]
    fn second_call_reuses_ca_token_and_serving_certificate() {
        let tmp = tempfile::tempdir().unwrap();
        let first = load_or_create(tmp.path(), &[]).unwrap();
        let second = load_or_create(tmp.path(), &["127.0.0.1".into(), "LOCALHOST".into()]).unwrap();
        assert_eq!(first.ca_pem, second.ca_pem);
        assert_eq!(first.token, second.token);
        assert_eq!(first.cert_pem, second.cert_pem);
        assert_eq!(first.key_pem, second.key_pem);
    }

    #[test]
    fn new_san_reissues_serving_certificate_from_the_same_ca() {
        let tmp = tempfile::tempdir().unwrap();
        let first = load_or_create(tmp.path(), &["10.1.2.3".into()]).unwrap();
        assert!(handshake(&first, "example.internal").is_err());

        let second = load_or_create(tmp.path(), &["example.internal".into()]).unwrap();
        assert_eq!(first.ca_pem, second.ca_pem);
        assert_eq!(first.token, second.token);
        assert_ne!(first.cert_pem, second.cert_pem);
        // signed by the CA reloaded from disk, keeping the SAN of the previous certificate
        for name in ["example.internal", "10.1.2.3", "localhost", "127.0.0.1", "::1"] {
            assert!(handshake(&second, name).is_ok(), "{name}");
        }
        assert_eq!(mode(&tmp.path().join(SERVING_KEY)), 0o600);
    }

    #[test]
    fn unspecified_bind_address_is_not_a_san() {
        let tmp = tempfile::tempdir().unwrap();
        let first = load_or_create(tmp.path(), &[]).unwrap();
        let second = load_or_create(tmp.path(), &["0.0.0.0".into(), "::".into()]).unwrap();
        assert_eq!(first.cert_pem, second.cert_pem);
    }

    #[test]
    fn handshake_negotiates_h2_for_loopback_names() {
        let tmp = tempfile::tempdir().unwrap();
        let m = load_or_create(tmp.path(), &[]).unwrap();
        for name in [
            "localhost",
            "127.0.0.1",
            "::1",
            "10.96.0.1",
            "kubernetes.default.svc",
        ] {
            assert_eq!(
                handshake(&m, name).unwrap().as_deref(),
                Some(&b"h2"[..]),
                "{name}"
            );
        }
    }

    #[test]
    fn missing_serving_files_are_reissued_and_loose_key_modes_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        let first = load_or_create(tmp.path(), &[]).unwrap();
        fs::remove_file(tmp.path().join(SERVING_SANS)).unwrap();
        fs::set_permissions(tmp.path().join(CA_KEY), fs::Permissions::from_mode(0o644)).unwrap();
        let second = load_or_create(tmp.path(), &[]).unwrap();
        assert_ne!(first.cert_pem, second.cert_pem);
        assert_eq!(first.ca_pem, second.ca_pem);
        assert_eq!(mode(&tmp.path().join(CA_KEY)), 0o600);
        assert!(handshake(&second, "localhost").is_ok());
    }

    #[test]
    fn corrupt_ca_key_is_an_error_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        load_or_create(tmp.path(), &[]).unwrap();
        fs::write(tmp.path().join(CA_KEY), "garbage").unwrap();
        let err = load_or_create(tmp.path(), &[]).unwrap_err().to_string();
        assert!(err.starts_with("invalid ") && err.contains("ca.key"), "{err}");
    }

    #[test]
    fn blank_token_file_gets_a_new_token() {
        let tmp = tempfile::tempdir().unwrap();
        let first = load_or_create(tmp.path(), &[]).unwrap();
        fs::write(tmp.path().join(TOKEN), "\n").unwrap();
        let second = load_or_create(tmp.path(), &[]).unwrap();
        assert_ne!(first.token, second.token);
        assert!(!second.token.is_empty());
    }

    #[test]
    fn server_config_rejects_bad_pem() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = load_or_create(tmp.path(), &[]).unwrap();
        m.key_pem = "nope".into();
        assert!(
            server_config(&m)
                .unwrap_err()
                .to_string()
                .starts_with("invalid serving key pem")
        );
    }
}
