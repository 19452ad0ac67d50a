//! The web configuration file (`gpuscope export --web.config.file`): TLS and basic auth in the format of the Prometheus exporter-toolkit
//! (<https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>),
//! the part of it gpuscope supports: `tls_server_config` with `cert_file` and `key_file`, and
//! `basic_auth_users` with bcrypt hashes. Any other key is refused at start, naming the file
//! and the key, rather than silently ignored: an operator who asks for client certificates must
//! not get a server that does not check them.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpu_backend::files;
use gpu_devices::text::Escaped;
use serde::Deserialize;
use tokio_rustls::rustls;

/// A web configuration file that cannot be used: which file, and what in it (the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", shown(path))]
pub struct WebConfigError {
    /// The file, as given (shown escaped: a file name may hold a line break or a bidi
    /// control).
    pub path: PathBuf,
    /// What is wrong, naming the key (`tls_server_config.cert_file: ...`), for people: what
    /// it quotes of the file (keys, user names, the paths it names) is escaped.
    pub message: String,
}

/// A path for people: as `display` writes it, control characters, bidirectional controls and
/// line breaks escaped (an operator's file name or a path in the file is outside text).
fn shown(path: &Path) -> String {
    Escaped(&path.display().to_string()).to_string()
}

/// The file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
}

/// `tls_server_config`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert_file: PathBuf,
    key_file: PathBuf,
}

/// What the server does with the file: TLS, and the users basic auth accepts.
#[derive(Clone)]
pub struct WebConfig {
    /// TLS settings, when `tls_server_config` is given.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// User name to bcrypt hash, when `basic_auth_users` is given (and not empty).
    pub users: Option<Arc<BTreeMap<String, String>>>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field(
                "users",
                &self.users.as_ref().map(|u| u.keys().collect::<Vec<_>>()),
            )
            .finish()
    }
}

impl WebConfig {
    /// Plain HTTP, no auth.
    pub fn none() -> WebConfig {
        WebConfig {
            tls: None,
            users: None,
        }
    }

    /// Reads and checks the file: the YAML, every bcrypt hash, the certificate and the key.
    /// Relative paths are relative to the file's directory, as in the exporter-toolkit.
    ///
    /// # Errors
    ///
    /// A file that cannot be used, naming the file and the key.
    pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
        let err = |message: String| WebConfigError {
            path: path.to_path_buf(),
            message,
        };
        // A regular file of at most 1 MiB: a FIFO, a device or a huge file is refused before
        // it is read (gpu_backend::files).
        let text = files::read_regular_to_string(path, files::MAX_CONFIG_BYTES)
            .map_err(|e| err(e.to_string()))?;
        let file = parse(&text).map_err(err)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            None => None,
            Some(t) => Some(Arc::new(
                tls_config(&dir.join(&t.cert_file), &dir.join(&t.key_file)).map_err(err)?,
            )),
        };
        let users = match file.basic_auth_users {
            None => None,
            Some(users) if users.is_empty() => None,
            Some(users) => {
                for (name, hash) in &users {
                    let name = Escaped(name);
                    if name.0.contains(':') {
                        return Err(err(format!(
                            "basic_auth_users.{name}: a user name cannot hold ':'"
                        )));
                    }
                    bcrypt_cost(hash).map_err(|e| err(format!("basic_auth_users.{name}: {e}")))?;
                }
                Some(Arc::new(users))
            }
        };
        Ok(WebConfig { tls, users })
    }
}

/// The bcrypt costs a user's hash may have: from 4, the least bcrypt allows, to 14. Each step
/// doubles the time of a check; a check at cost 14 takes about a second of a core (cost 10,
/// htpasswd's and the exporter-toolkit's usual choice, some 60 ms), and the first scrape of
/// every scraper pays one, as does every wrong password while the checks are shared out
/// (docs/exporter.md). Above it a scraper would no longer log in within Prometheus's 10 s
/// timeout under a flood, and a hash at bcrypt's own most, 31, takes days.
pub const BCRYPT_COSTS: RangeInclusive<u32> = 4..=14;

/// The cost of a bcrypt hash as the format writes it: `$2a$`, `$2b$`, `$2x$` or `$2y$`, the
/// cost as two digits in [`BCRYPT_COSTS`], `$`, then 53 characters of bcrypt's base64 (22 of
/// salt, 31 of digest). The bcrypt crate's own parser is laxer (`$2y$4$`, `$2y$+9$`, and `$$`
/// runs), and takes costs up to 31.
///
/// # Errors
///
/// What is wrong, in one line that does not repeat the hash.
pub(crate) fn bcrypt_cost(hash: &str) -> Result<u32, String> {
    const SHAPE: &str =
        "not a bcrypt hash ($2y$, two digits of cost, $, 53 characters of salt and digest)";
    let rest = ["$2a$", "$2b$", "$2x$", "$2y$"]
        .iter()
        .find_map(|prefix| hash.strip_prefix(prefix))
        .ok_or_else(|| SHAPE.to_string())?;
    let (cost, tail) = rest.split_once('$').ok_or_else(|| SHAPE.to_string())?;
    let in_range = || format!("{:02} to {:02}", BCRYPT_COSTS.start(), BCRYPT_COSTS.end());
    if cost.len() != 2 || !cost.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "bcrypt cost \"{}\" is not two digits ({})",
            Escaped(cost),
            in_range()
        ));
    }
    let tail_ok = tail.len() == 53
        && tail
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/');
    if !tail_ok {
        return Err(SHAPE.to_string());
    }
    let value: u32 = cost.parse().map_err(|_| SHAPE.to_string())?;
    if !BCRYPT_COSTS.contains(&value) {
        return Err(format!(
            "bcrypt cost {cost} is outside the range gpuscope accepts, {} (each step doubles a check's time)",
            in_range()
        ));
    }
    Ok(value)
}

/// Parses the YAML; an error names the key where it went wrong (escaped, as the parser's
/// message may quote a key or a value of the file).
fn parse(text: &str) -> Result<File, String> {
    if text.trim().is_empty() {
        return Ok(File::default());
    }
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize::<_, File>(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let message = if key.is_empty() || key == "." {
            format!("{inner}")
        } else {
            format!("{key}: {inner}")
        };
        Escaped(&message).to_string()
    })
}

fn tls_config(cert: &Path, key: &Path) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |key: &str, path: &Path, max: u64| {
        files::read_regular(path, max)
            .map_err(|e| format!("tls_server_config.{key} {}: {e}", shown(path)))
    };
    let pem = read("cert_file", cert, files::MAX_CERTIFICATE_BYTES)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "tls_server_config.cert_file: cannot read certificates from {}: {e}",
                shown(cert)
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "tls_server_config.cert_file: no certificate in {}",
            shown(cert)
        ));
    }
    let pem = read("key_file", key, files::MAX_CONFIG_BYTES)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        format!(
            "tls_server_config.key_file: cannot read a private key from {}: {e}",
            shown(key)
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("tls_server_config: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!("tls_server_config.key_file: the key does not fit the certificate: {e}")
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporter_toolkit_example_parses() {
        let f = parse(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
             basic_auth_users:\n  alice: $2y$10$abc\n",
        )
        .unwrap();
        let tls = f.tls_server_config.unwrap();
        assert_eq!(tls.cert_file, PathBuf::from("server.crt"));
        assert_eq!(f.basic_auth_users.unwrap()["alice"], "$2y$10$abc");
    }

    #[test]
    fn unknown_and_missing_keys_are_named() {
        let e = parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n")
            .unwrap_err();
        assert!(
            e.contains("tls_server_config") && e.contains("client_auth_type"),
            "{e}"
        );
        let e = parse("tls_server_config:\n  cert_file: a\n").unwrap_err();
        assert!(
            e.contains("tls_server_config") && e.contains("key_file"),
            "{e}"
        );
        let e = parse("http_server_config:\n  http2: false\n").unwrap_err();
        assert!(e.contains("http_server_config"), "{e}");
        let e = parse("basic_auth_users: [alice]\n").unwrap_err();
        assert!(e.contains("basic_auth_users"), "{e}");
    }

    #[test]
    fn a_key_of_the_file_is_escaped_where_the_message_quotes_it() {
        // An unknown key holding a line feed and a bidi override, quoted by the parser.
        let e = parse("\"evil\\nFORGED \\u202e\": 1\n").unwrap_err();
        assert!(!e.contains('\n') && !e.contains('\u{202e}'), "{e:?}");
        assert!(e.contains("evil\\x0aFORGED \\u{202e}"), "{e:?}");
    }

    #[test]
    fn an_empty_file_means_plain_http() {
        let f = parse("\n").unwrap();
        assert!(f.tls_server_config.is_none() && f.basic_auth_users.is_none());
    }

    #[test]
    fn item_12_bcrypt_costs_outside_4_to_14_and_malformed_costs_are_refused() {
        let tail = "abcdefghijklmnopqrstuvABCDEFGHIJKLMNOPQRSTUVWXYZ01234";
        let hash = |prefix: &str, cost: &str| format!("{prefix}{cost}${tail}");
        for prefix in ["$2a$", "$2b$", "$2x$", "$2y$"] {
            for (cost, value) in [("04", 4), ("10", 10), ("14", 14)] {
                assert_eq!(
                    bcrypt_cost(&hash(prefix, cost)),
                    Ok(value),
                    "{prefix}{cost}"
                );
            }
        }
        for cost in ["03", "00", "15", "16", "31", "99"] {
            let e = bcrypt_cost(&hash("$2y$", cost)).unwrap_err();
            assert!(
                e.contains(&format!("bcrypt cost {cost} is outside")) && e.contains("04 to 14"),
                "{cost}: {e}"
            );
        }
        for cost in ["4", "+9", "010", " 9", "1a", ""] {
            let e = bcrypt_cost(&hash("$2y$", cost)).unwrap_err();
            assert!(e.contains("is not two digits"), "{cost:?}: {e}");
        }
        for bad in [
            "plaintext",
            "$2y$10$short",
            &format!("$2z$10${tail}"),
            &format!("$$2y$$10$${tail}"),
            &format!("$2y$10${tail}x"),
            &format!("$2y$10${}", tail.replace('a', "-")),
        ] {
            let e = bcrypt_cost(bad).unwrap_err();
            assert!(e.starts_with("not a bcrypt hash"), "{bad}: {e}");
            assert!(!e.contains(tail), "the hash is not repeated: {e}");
        }
        // What the bcrypt crate makes is accepted.
        let real = bcrypt::hash("pw", 4).unwrap();
        assert_eq!(bcrypt_cost(&real), Ok(4));
    }

    proptest::proptest! {
        #[test]
        fn any_hash_text_has_a_cost_or_an_error_without_panicking(text in "\\PC{0,80}") {
            if let Ok(cost) = bcrypt_cost(&text) {
                proptest::prop_assert!(BCRYPT_COSTS.contains(&cost));
            }
        }

        #[test]
        fn any_text_parses_or_errs_without_panicking(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }
    }
}
