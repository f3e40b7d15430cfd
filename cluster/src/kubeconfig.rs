//! Kubeconfig files for the cluster: the one `kubeling` writes into its data directory, and the entry
//! it merges into the user's own kubeconfig so plain `kubectl`, kube-rs and the Python client reach the
//! cluster with no flags.
//!
//! `main` calls this once the TLS material exists (CA and token from `apiserver::tls`). Merging works
//! like kind's `WriteMerged`: the cluster, user and context entries named after the cluster are
//! replaced or appended, `current-context` is switched, and everything else (other clusters, unknown
//! keys, `preferences`, extensions) is kept. The document is handled as an untyped YAML value for that.
//! Comments and anchors in the user's file do not survive a merge, as with kind and `kubectl config`.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_norway::{Mapping, Value};

/// A kubeconfig (YAML) with one cluster, user and context, all named `name`; `current-context` is
/// `name`, the context's namespace `default`. The CA goes in as `certificate-authority-data` (base64 of
/// the PEM), the token as `user.token`.
pub fn render(name: &str, server_url: &str, ca_pem: &str, token: &str) -> String {
    let mut doc = Mapping::new();
    // A fresh mapping has no entries of the wrong shape, so merging cannot fail.
    let _ = merge_into(&mut doc, name, server_url, ca_pem, token);
    to_yaml(&doc)
}

/// Writes [`render`]'s output to `path` with mode 0600, atomically (temporary file and rename).
pub fn write(path: &Path, name: &str, server_url: &str, ca_pem: &str, token: &str) -> io::Result<()> {
    write_atomic(path, &render(name, server_url, ca_pem, token))
}

/// The user's kubeconfig, where kubectl would write: with `$KUBECONFIG` set and non-empty, its only
/// entry, else the first entry that exists, else the last one (client-go's and kind's rule); otherwise
/// `~/.kube/config`. `None` without `$KUBECONFIG` and `$HOME`.
pub fn user_kubeconfig_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    kubeconfig_path_from(std::env::var_os("KUBECONFIG").as_deref(), home.as_deref())
}

fn kubeconfig_path_from(kubeconfig: Option<&std::ffi::OsStr>, home: Option<&Path>) -> Option<PathBuf> {
    let entries: Vec<PathBuf> = kubeconfig
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    match entries.as_slice() {
        [] => home.map(|h| h.join(".kube").join("config")),
        [only] => Some(only.clone()),
        many => Some(
            many.iter()
                .find(|p| p.exists())
                .unwrap_or(&many[many.len() - 1])
                .clone(),
        ),
    }
}

/// Merges the cluster into the kubeconfig at `path` as kind does: replaces the cluster, user and context
/// entries named `name` (or appends them), keeps every other entry and every unknown key, and sets
/// `current-context` to `name`. A missing file (and its directory) is created; the file is written with
/// mode 0600 through a temporary file and a rename (through a symlink, to its target). A file that does
/// not parse is an `InvalidData` error naming it and is left untouched. Like client-go, the merge holds
/// `<path>.lock` so it does not race a `kubectl config` command.
pub fn merge(path: &Path, name: &str, server_url: &str, ca_pem: &str, token: &str) -> io::Result<()> {
    let target = resolve_symlink(path)?;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        // client-go creates ~/.kube with 0755
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| annotate(e, "cannot create directory", dir))?;
    }
    let _lock = FileLock::acquire(&target)?;

    let mut doc = match fs::read_to_string(&target) {
        Ok(text) => parse(&text).map_err(|detail| invalid(&target, &detail))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Mapping::new(),
        Err(e) => return Err(annotate(e, "cannot read kubeconfig", &target)),
    };
    merge_into(&mut doc, name, server_url, ca_pem, token).map_err(|detail| invalid(&target, &detail))?;
    write_atomic(&target, &to_yaml(&doc))
}

fn parse(text: &str) -> Result<Mapping, String> {
    if text.trim().is_empty() {
        return Ok(Mapping::new());
    }
    match serde_norway::from_str::<Value>(text).map_err(|e| e.to_string())? {
        Value::Null => Ok(Mapping::new()),
        Value::Mapping(m) => Ok(m),
        _ => Err("the top level is not a mapping".to_string()),
    }
}

/// Upserts the three named entries and points `current-context` at them. Fails only if a list key holds
/// something other than a list, which we refuse to clobber.
fn merge_into(
    doc: &mut Mapping,
    name: &str,
    server_url: &str,
    ca_pem: &str,
    token: &str,
) -> Result<(), String> {
    // kind adds these when missing: some clients (the JavaScript one) insist on them.
    for (key, value) in [("apiVersion", "v1"), ("kind", "Config")] {
        if doc.get(key).is_none_or(Value::is_null) {
            doc.insert(key.into(), value.into());
        }
    }

    let cluster = mapping([
        ("server", server_url.into()),
        (
            "certificate-authority-data",
            base64_encode(ca_pem.as_bytes()).into(),
        ),
    ]);
    let context = mapping([
        ("cluster", name.into()),
        ("user", name.into()),
        ("namespace", "default".into()),
    ]);
    let user = mapping([("token", token.into())]);
    upsert(doc, "clusters", name, "cluster", cluster)?;
    upsert(doc, "contexts", name, "context", context)?;
    upsert(doc, "users", name, "user", user)?;
    doc.insert("current-context".into(), name.into());
    Ok(())
}

/// Replaces every entry of `list` named `name` (kind replaces all duplicates) or appends one.
fn upsert(doc: &mut Mapping, list: &str, name: &str, body_key: &str, body: Value) -> Result<(), String> {
    let entry = mapping([("name", name.into()), (body_key, body)]);
    let slot = doc.entry(list.into()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Sequence(Vec::new());
    }
    let Value::Sequence(items) = slot else {
        return Err(format!("{list} is not a list"));
    };
    let mut replaced = false;
    for item in items
        .iter_mut()
        .filter(|i| i.get("name").and_then(Value::as_str) == Some(name))
    {
        *item = entry.clone();
        replaced = true;
    }
    if !replaced {
        items.push(entry);
    }
    Ok(())
}

fn mapping<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Mapping(pairs.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
}

fn to_yaml(doc: &Mapping) -> String {
    // A mapping of strings, sequences and mappings always serializes.
    serde_norway::to_string(doc).unwrap_or_default()
}

/// Standard base64 with padding. Hand-written because the binary crate has no base64 dependency and this
/// is its only use.
fn base64_encode(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Writes to the target of a symlinked kubeconfig (dotfile setups) instead of replacing the link.
fn resolve_symlink(path: &Path) -> io::Result<PathBuf> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(|e| annotate(e, "cannot resolve kubeconfig symlink", path))
        }
        _ => Ok(path.to_path_buf()),
    }
}

/// Temporary file in the same directory, mode 0600, synced, then renamed over `path`.
fn write_atomic(path: &Path, contents: &str) -> io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(|e| annotate(e, "cannot write kubeconfig", path))
}

/// client-go's kubeconfig lock: `<path>.lock`, created exclusively, removed when dropped.
struct FileLock {
    path: PathBuf,
}

impl FileLock {
    fn acquire(target: &Path) -> io::Result<FileLock> {
        let mut lock = target.as_os_str().to_owned();
        lock.push(".lock");
        let path = PathBuf::from(lock);
        // A concurrent kubectl holds it for milliseconds; wait up to a second before giving up.
        for _ in 0..20 {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(_) => return Ok(FileLock { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => return Err(annotate(e, "cannot lock kubeconfig", &path)),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "kubeconfig is locked: {} exists (remove it if no kubectl is running)",
                path.display()
            ),
        ))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn annotate(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

fn invalid(path: &Path, detail: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("cannot merge into kubeconfig {}: {detail}", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn load(path: &Path) -> Value {
        serde_norway::from_str(&fs::read_to_string(path).unwrap()).unwrap()
    }

    fn names(doc: &Value, list: &str) -> Vec<String> {
        doc[list]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn render_has_one_cluster_user_and_context() {
        let doc: Value =
            serde_norway::from_str(&render("kubeling", "https://127.0.0.1:6443", CA, "tok")).unwrap();
        assert_eq!(doc["apiVersion"], "v1");
        assert_eq!(doc["kind"], "Config");
        assert_eq!(doc["current-context"], "kubeling");
        assert_eq!(doc["clusters"][0]["name"], "kubeling");
        assert_eq!(doc["clusters"][0]["cluster"]["server"], "https://127.0.0.1:6443");
        assert_eq!(
            doc["clusters"][0]["cluster"]["certificate-authority-data"],
            base64_encode(CA.as_bytes()).as_str()
        );
        assert_eq!(doc["users"][0]["name"], "kubeling");
        assert_eq!(doc["users"][0]["user"]["token"], "tok");
        let ctx = &doc["contexts"][0];
        assert_eq!(ctx["name"], "kubeling");
        assert_eq!(ctx["context"]["cluster"], "kubeling");
        assert_eq!(ctx["context"]["user"], "kubeling");
        assert_eq!(ctx["context"]["namespace"], "default");
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(input.as_bytes()), want, "{input}");
        }
        assert_eq!(base64_encode(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn write_creates_a_private_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("kubeconfig");
        write(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&path)["users"][0]["user"]["token"], "tok");
        // overwriting works too, and leaves no temporary files behind
        write(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok2").unwrap();
        assert_eq!(load(&path)["users"][0]["user"]["token"], "tok2");
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn merge_creates_missing_file_and_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("home/.kube/config");
        merge(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap();
        let doc = load(&path);
        assert_eq!(doc["current-context"], "kubeling");
        assert_eq!(names(&doc, "clusters"), ["kubeling"]);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!path.with_file_name("config.lock").exists());
    }

    const EXISTING: &str = r#"
apiVersion: v1
kind: Config
preferences:
  colors: true
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
    insecure-skip-tls-verify: true
- name: kubeling
  cluster:
    server: https://127.0.0.1:1111
    certificate-authority-data: c3RhbGU=
contexts:
- name: prod
  context: {cluster: prod, user: prod-admin, namespace: web}
- name: kubeling
  context: {cluster: kubeling, user: kubeling}
current-context: prod
users:
- name: prod-admin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: aws
- name: kubeling
  user:
    token: stale
extensions:
- name: something
  extension: {a: 1}
"#;

    #[test]
    fn merge_keeps_other_entries_and_unknown_keys_and_replaces_stale_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config");
        fs::write(&path, EXISTING).unwrap();
        merge(&path, "kubeling", "https://127.0.0.1:6443", CA, "fresh").unwrap();
        let doc = load(&path);

        assert_eq!(doc["current-context"], "kubeling");
        assert_eq!(names(&doc, "clusters"), ["prod", "kubeling"]);
        assert_eq!(names(&doc, "contexts"), ["prod", "kubeling"]);
        assert_eq!(names(&doc, "users"), ["prod-admin", "kubeling"]);

        assert_eq!(doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"], true);
        assert_eq!(doc["contexts"][0]["context"]["namespace"], "web");
        assert_eq!(doc["users"][0]["user"]["exec"]["command"], "aws");
        assert_eq!(doc["preferences"]["colors"], true);
        assert_eq!(doc["extensions"][0]["extension"]["a"], 1);

        let ours = &doc["clusters"][1]["cluster"];
        assert_eq!(ours["server"], "https://127.0.0.1:6443");
        assert_eq!(
            ours["certificate-authority-data"],
            base64_encode(CA.as_bytes()).as_str()
        );
        assert_eq!(doc["users"][1]["user"]["token"], "fresh");
        assert_eq!(doc["contexts"][1]["context"]["namespace"], "default");
    }

    #[test]
    fn merge_appends_to_a_config_without_our_entries() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config");
        fs::write(
            &path,
            "clusters:\n- name: other\n  cluster: {server: https://x}\nusers: null\n",
        )
        .unwrap();
        merge(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap();
        let doc = load(&path);
        assert_eq!(names(&doc, "clusters"), ["other", "kubeling"]);
        assert_eq!(names(&doc, "users"), ["kubeling"]);
        assert_eq!(doc["apiVersion"], "v1");
        assert_eq!(doc["kind"], "Config");
    }

    #[test]
    fn merge_into_empty_file_works() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config");
        fs::write(&path, "").unwrap();
        merge(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap();
        assert_eq!(load(&path)["current-context"], "kubeling");
    }

    #[test]
    fn unparsable_kubeconfig_is_invalid_data_and_left_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        for text in [
            "clusters: [unclosed\n",
            "- just\n- a list\n",
            "clusters: {not: a list}\n",
        ] {
            let path = tmp.path().join("config");
            fs::write(&path, text).unwrap();
            let err = merge(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{text}");
            assert!(err.to_string().contains(&path.display().to_string()), "{err}");
            assert_eq!(fs::read_to_string(&path).unwrap(), text);
            assert!(!tmp.path().join("config.lock").exists());
        }
    }

    #[test]
    fn merge_through_a_symlink_updates_the_target() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("dotfiles-config");
        fs::write(&real, "apiVersion: v1\nkind: Config\n").unwrap();
        let link = tmp.path().join("config");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        merge(&link, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap();
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(load(&real)["current-context"], "kubeling");
    }

    #[test]
    fn held_lock_makes_merge_fail_without_writing() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("config");
        fs::write(tmp.path().join("config.lock"), "").unwrap();
        let err = merge(&path, "kubeling", "https://127.0.0.1:6443", CA, "tok").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(!path.exists());
    }

    #[test]
    fn kubeconfig_path_follows_client_go_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        assert_eq!(
            kubeconfig_path_from(None, Some(&home)),
            Some(home.join(".kube/config"))
        );
        assert_eq!(
            kubeconfig_path_from(Some("".as_ref()), Some(&home)),
            Some(home.join(".kube/config"))
        );
        assert_eq!(kubeconfig_path_from(None, None), None);
        assert_eq!(
            kubeconfig_path_from(Some("/a/one".as_ref()), None),
            Some(PathBuf::from("/a/one"))
        );

        let exists = tmp.path().join("exists");
        fs::write(&exists, "").unwrap();
        let list = format!("/nope/a:{}:/nope/b", exists.display());
        assert_eq!(kubeconfig_path_from(Some(list.as_ref()), None), Some(exists));
        assert_eq!(
            kubeconfig_path_from(Some("/nope/a::/nope/b".as_ref()), None),
            Some(PathBuf::from("/nope/b"))
        );
    }

    // --- properties: no kubeconfig text makes parsing, merging or reading panic (the fault suite) ---------

    mod properties {
        use proptest::collection::vec;
        use proptest::prelude::*;
        use proptest::sample::{Index, select};

        use super::*;

        const KEYS: &[&str] = &[
            "apiVersion",
            "kind",
            "clusters",
            "contexts",
            "users",
            "current-context",
            "name",
            "cluster",
            "context",
            "user",
            "server",
            "certificate-authority-data",
            "certificate-authority",
            "token",
            "namespace",
            "preferences",
            "kubeling",
        ];

        /// YAML values with a kubeconfig's vocabulary.
        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                select(vec![
                    "kubeling",
                    "other",
                    "https://127.0.0.1:6443",
                    "bm90IGEgY2E=",
                    "!!",
                    ""
                ])
                .prop_map(Value::from),
                "\\PC{0,10}".prop_map(Value::from),
            ];
            leaf.prop_recursive(4, 32, 4, |inner| {
                prop_oneof![
                    vec(inner.clone(), 0..4).prop_map(Value::Sequence),
                    vec((select(KEYS), inner), 0..5).prop_map(|entries| {
                        Value::Mapping(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
                    }),
                ]
            })
        }

        /// A kubeconfig text: random, random YAML, or a valid one with lines dropped or characters changed.
        fn text() -> impl Strategy<Value = String> {
            let valid = render("kubeling", "https://127.0.0.1:6443", CA, "token");
            prop_oneof![
                "\\PC{0,200}",
                value().prop_map(|v| serde_norway::to_string(&v).unwrap_or_default()),
                vec((any::<Index>(), any::<char>(), any::<bool>()), 1..5).prop_map(move |edits| {
                    let mut lines: Vec<String> = valid.lines().map(String::from).collect();
                    for (at, c, drop) in edits {
                        if lines.is_empty() {
                            break;
                        }
                        let i = at.index(lines.len());
                        if drop {
                            lines.remove(i);
                        } else {
                            let line = &mut lines[i];
                            let mut chars: Vec<char> = line.chars().collect();
                            let j = at.index(chars.len() + 1);
                            chars.insert(j, c);
                            *line = chars.into_iter().collect();
                        }
                    }
                    lines.join("\n")
                }),
            ]
        }

        proptest! {
            #[test]
            fn kubeconfigs_parse_merge_and_read_or_fail_without_panicking(text in text()) {
                if let Ok(mut doc) = parse(&text)
                    && merge_into(&mut doc, "kubeling", "https://127.0.0.1:1", CA, "t").is_ok()
                {
                    // A merged document reads back with our context current.
                    let merged = parse(&to_yaml(&doc)).expect("a merged kubeconfig parses");
                    prop_assert_eq!(merged.get("current-context").and_then(Value::as_str), Some("kubeling"));
                }
                let dir = tempfile::tempdir().expect("a temp dir");
                let path = dir.path().join("config");
                fs::write(&path, &text).expect("written");
                let _ = crate::kubeconfig_ca(&path);
                let _ = crate::kubeconfig_token(&path);
                let _ = merge(&path, "kubeling", "https://127.0.0.1:1", CA, "t");
            }
        }
    }
}
