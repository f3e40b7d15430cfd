//! Step 4 with the real binary, kubectl and Docker: static pods from a manifest directory and a manifest URL, and their mirror pods.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Cluster, eventually, running_containers};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
/// Every cluster here runs with `--node-name n1`, so mirror pods are `<name>-n1`.
const NODE: &str = "n1";
const SLEEP: &[&str] = &["sleep"];

const CONFIG_SOURCE: &str = "kubernetes.io/config.source";
const CONFIG_HASH: &str = "kubernetes.io/config.hash";
const CONFIG_MIRROR: &str = "kubernetes.io/config.mirror";
const CONFIG_SEEN: &str = "kubernetes.io/config.seen";

const LABEL_CLUSTER: &str = "io.kubeling.cluster";
const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
const LABEL_TYPE: &str = "io.kubernetes.docker.type";
/// CRI annotations are Docker labels with the `annotation.` prefix (node/src/runtime/naming.rs).
const LABEL_RESTART_COUNT: &str = "annotation.io.kubernetes.container.restartCount";

// ---- manifests -------------------------------------------------------------------------------------------

/// A Pod with one testbox container `main` running `args`, as JSON.
fn pod_value(name: &str, args: &[&str]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{
            "name": "main",
            "image": testbox_image::ensure_testbox_image(),
            "args": args,
        }]},
    })
}

/// The same Pod as YAML (no namespace: static pods default to `default`).
fn manifest(name: &str, args: &[&str]) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: main\n    image: {}\n    args: {}\n",
        testbox_image::ensure_testbox_image(),
        json!(args)
    )
}

/// A PodList of sleeping pods, as the manifest URL serves it.
fn pod_list(names: &[&str]) -> String {
    let items: Vec<Value> = names.iter().map(|n| pod_value(n, SLEEP)).collect();
    json!({"apiVersion": "v1", "kind": "PodList", "items": items}).to_string()
}

/// Saves `text` as an editor does: a dot file (ignored by the source) in the same directory, renamed over.
fn save_by_rename(path: &Path, text: &str) {
    let name = path.file_name().unwrap().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.swp"));
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// Saves `text` by truncating and rewriting the file itself.
fn save_in_place(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
}

// ---- cluster and API ---------------------------------------------------------------------------------------

/// `kubeling up --node-name n1 <extra>`.
fn up(extra: &[&str]) -> Cluster {
    up_logged(extra, None)
}

fn up_logged(extra: &[&str], log: Option<&Path>) -> Cluster {
    let mut args = vec!["--node-name", NODE];
    args.extend_from_slice(extra);
    Cluster::up_with(&args, log)
}

/// `up`'s default static pod directory.
fn manifests(c: &Cluster) -> PathBuf {
    c.data_dir.join("manifests")
}

fn mirror_name(pod: &str) -> String {
    format!("{pod}-{NODE}")
}

fn phase(v: &Value) -> &str {
    v["status"]["phase"].as_str().unwrap_or("")
}

fn annotation<'a>(v: &'a Value, key: &str) -> &'a str {
    v["metadata"]["annotations"][key].as_str().unwrap_or("")
}

fn uid(v: &Value) -> &str {
    v["metadata"]["uid"].as_str().unwrap_or("")
}

/// Waits for the mirror pod `name` to be Running; returns it.
fn running_mirror(c: &Cluster, name: &str) -> Value {
    c.wait_json(&["pod", name], WAIT, |p| phase(p) == "Running")
}

/// Waits until `kubectl get pod name` answers NotFound.
fn wait_pod_gone(c: &Cluster, name: &str) {
    eventually(WAIT, &format!("pod {name} to be deleted"), || {
        let out = c.kubectl(&["get", "pod", name]);
        (!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("NotFound")).then_some(())
    });
}

/// `kubectl delete` of the mirror pod `name` (uid `old_uid`), then waits for the mirror the node agent makes
/// again (another uid) to be Running; returns it.
fn delete_mirror_and_wait_for_the_next(c: &Cluster, name: &str, old_uid: &str) -> Value {
    c.ok(&["delete", "pod", name, "--timeout=60s"]);
    c.wait_json(&["pod", name], WAIT, |p| {
        uid(p) != old_uid && phase(p) == "Running"
    })
}

/// Waits for a Warning `FailedValidation` event about node n1 whose message contains every one of `needles`.
fn wait_failed_validation(c: &Cluster, needles: &[&str]) -> Value {
    let matches = |e: &Value| {
        e["type"] == "Warning"
            && e["reason"] == "FailedValidation"
            && e["involvedObject"]["kind"] == "Node"
            && e["involvedObject"]["name"] == NODE
            && e["message"]
                .as_str()
                .is_some_and(|m| needles.iter().all(|n| m.contains(n)))
    };
    let events = c.wait_json(&["events", "-A"], WAIT, |v| {
        v["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(matches))
    });
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| matches(e))
        .unwrap()
        .clone()
}

fn cluster_id(data_dir: &Path) -> String {
    fs::read_to_string(data_dir.join("node/cluster-id"))
        .unwrap()
        .trim()
        .to_string()
}

// ---- Docker ------------------------------------------------------------------------------------------------

/// The running containers of the static pod with UID `hash`.
fn pod_containers(hash: &str) -> Vec<String> {
    running_containers(&[(LABEL_POD_UID, hash)])
}

/// The app container of the static pod `hash`.
fn app_container(hash: &str) -> String {
    let ids = running_containers(&[(LABEL_POD_UID, hash), (LABEL_TYPE, "container")]);
    assert_eq!(ids.len(), 1, "app containers of {hash}: {ids:?}");
    ids[0].clone()
}

/// The value of Docker label `key` on container `id` (empty when absent).
fn label(id: &str, key: &str) -> String {
    let out = Command::new("docker")
        .args([
            "inspect",
            "--format",
            &format!("{{{{index .Config.Labels \"{key}\"}}}}"),
            id,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "docker inspect {id}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits until the static pod `hash` has its pause container and `apps` app containers running; returns all
/// their ids.
fn wait_pod_containers(hash: &str, apps: usize) -> Vec<String> {
    eventually(WAIT, &format!("the containers of static pod {hash}"), || {
        let ids = pod_containers(hash);
        let kinds: Vec<String> = ids.iter().map(|id| label(id, LABEL_TYPE)).collect();
        let sandboxes = kinds.iter().filter(|k| *k == "podsandbox").count();
        let containers = kinds.iter().filter(|k| *k == "container").count();
        (sandboxes == 1 && containers == apps && ids.len() == 1 + apps).then_some(ids)
    })
}

fn wait_no_containers(hash: &str) {
    eventually(
        WAIT,
        &format!("the containers of static pod {hash} to stop"),
        || pod_containers(hash).is_empty().then_some(()),
    );
}

/// Polls `ok` for `period` and fails at the first false. For "nothing happens" checks, which can only be
/// watched for a bounded time.
fn holds_for(period: Duration, what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + period;
    while Instant::now() < end {
        assert!(ok(), "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---- the manifest URL ----------------------------------------------------------------------------------------

/// A plain HTTP server on 127.0.0.1 answering every request with the status and body of `reply` (one
/// request per connection, `Connection: close`), and keeping every request head.
struct ManifestServer {
    url: String,
    reply: Arc<Mutex<(u16, String)>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl ManifestServer {
    fn start(status: u16, body: String) -> ManifestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/pods", listener.local_addr().unwrap());
        let reply = Arc::new(Mutex::new((status, body)));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (reply2, requests2) = (reply.clone(), requests.clone());
        // Lives as long as the test process; it only ever blocks in accept.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.is_empty() {
                    continue;
                }
                requests2
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let (status, body) = reply2.lock().unwrap().clone();
                let reason = match status {
                    200 => "OK",
                    500 => "Internal Server Error",
                    _ => "Unknown",
                };
                let response = format!(
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes());
                let _ = stream.flush();
            }
        });
        ManifestServer { url, reply, requests }
    }

    fn set(&self, status: u16, body: String) {
        *self.reply.lock().unwrap() = (status, body);
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until `n` more requests than now have been answered.
    fn wait_requests(&self, n: usize) {
        let target = self.requests().len() + n;
        eventually(WAIT, &format!("{n} more requests to {}", self.url), || {
            (self.requests().len() >= target).then_some(())
        });
    }
}

// ---- the manifest directory ----------------------------------------------------------------------------------

#[test]
fn a_manifest_in_the_default_directory_runs_as_a_static_pod_with_a_mirror_pod_owned_by_the_node() {
    let c = up(&[]);
    let dir = manifests(&c);
    assert!(
        dir.is_dir(),
        "up's default static pod directory {} was not created",
        dir.display()
    );
    fs::write(dir.join("web.yaml"), manifest("web", SLEEP)).unwrap();

    let mirror = running_mirror(&c, "web-n1");
    assert_eq!(mirror["metadata"]["namespace"], "default", "{mirror}");
    assert_eq!(mirror["spec"]["nodeName"], NODE, "{mirror}");
    assert_eq!(annotation(&mirror, CONFIG_SOURCE), "file", "{mirror}");
    let hash = annotation(&mirror, CONFIG_HASH);
    assert!(
        hash.len() == 32 && hash.chars().all(|c| c.is_ascii_hexdigit()),
        "config.hash is not 32 hex characters: {mirror}"
    );
    assert_eq!(annotation(&mirror, CONFIG_MIRROR), hash, "{mirror}");
    let seen = annotation(&mirror, CONFIG_SEEN);
    assert!(
        seen.len() > 10 && seen[..4].chars().all(|c| c.is_ascii_digit()) && seen.contains('T'),
        "config.seen is not a timestamp: {mirror}"
    );
    // The API server gives the mirror pod a UID of its own.
    assert!(!uid(&mirror).is_empty() && uid(&mirror) != hash, "{mirror}");

    let node: Value = serde_json::from_str(&c.ok(&["get", "node", NODE, "-o", "json"])).unwrap();
    let owners = mirror["metadata"]["ownerReferences"]
        .as_array()
        .expect("ownerReferences");
    assert_eq!(owners.len(), 1, "{mirror}");
    let owner = &owners[0];
    assert_eq!(owner["apiVersion"], "v1", "{owner}");
    assert_eq!(owner["kind"], "Node", "{owner}");
    assert_eq!(owner["name"], NODE, "{owner}");
    assert_eq!(owner["uid"], node["metadata"]["uid"], "{owner}");
    assert_eq!(owner["controller"], true, "{owner}");

    // In Docker the static pod goes by its own UID (the hash) and the mirror's name: a pause container and
    // the app container, both running.
    let ids = wait_pod_containers(hash, 1);
    for id in &ids {
        assert_eq!(label(id, LABEL_POD_NAME), "web-n1", "{id}");
        assert_eq!(label(id, LABEL_CLUSTER), cluster_id(&c.data_dir), "{id}");
    }
}

#[test]
fn a_manifest_added_later_is_picked_up_by_the_watch_before_the_periodic_rescan() {
    let c = up(&["--file-check-frequency", "1m"]);
    let dir = manifests(&c);
    // Once `first` is seen, the initial listing is done and the next full one is a minute away.
    fs::write(dir.join("first.yaml"), manifest("first", SLEEP)).unwrap();
    c.wait_json(&["pod", "first-n1"], WAIT, |_| true);
    let t = Instant::now();
    fs::write(dir.join("second.yaml"), manifest("second", SLEEP)).unwrap();
    let within = Duration::from_secs(15);
    eventually(within, "the mirror pod of a manifest added later", || {
        c.kubectl(&["get", "pod", "second-n1"])
            .status
            .success()
            .then_some(())
    });
    assert!(t.elapsed() < within, "took {:?}", t.elapsed());
}

#[test]
fn pod_manifest_path_reads_json_manifests_but_not_dot_files_or_subdirectories() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("static");
    fs::create_dir_all(dir.join("sub")).unwrap();
    fs::write(dir.join(".hidden.yaml"), manifest("hidden", SLEEP)).unwrap();
    fs::write(dir.join("sub/inner.yaml"), manifest("inner", SLEEP)).unwrap();
    fs::write(dir.join("api.json"), pod_value("api", SLEEP).to_string()).unwrap();
    let dir_arg = dir.to_str().unwrap();
    let c = up(&["--pod-manifest-path", dir_arg, "--file-check-frequency", "1s"]);

    let mirror = running_mirror(&c, "api-n1");
    assert_eq!(annotation(&mirror, CONFIG_SOURCE), "file", "{mirror}");
    wait_pod_containers(annotation(&mirror, CONFIG_HASH), 1);
    // The listing that found api.json saw the others too; three more full rescans must not start them.
    let cluster = cluster_id(&c.data_dir);
    holds_for(
        Duration::from_secs(3),
        "a dot file or a subdirectory's manifest was run",
        || {
            ["hidden", "inner"].iter().all(|name| {
                let mirror = mirror_name(name);
                !c.kubectl(&["get", "pod", &mirror]).status.success()
                    && running_containers(&[(LABEL_CLUSTER, &cluster), (LABEL_POD_NAME, &mirror)]).is_empty()
            })
        },
    );
}

#[test]
fn kubectl_logs_exec_and_describe_on_the_mirror_pod_reach_the_static_pod() {
    let c = up(&[]);
    let args = ["sleep", "--stdout", "hello-static"];
    fs::write(manifests(&c).join("talk.yaml"), manifest("talk", &args)).unwrap();
    running_mirror(&c, "talk-n1");
    eventually(WAIT, "the static pod's output in kubectl logs", || {
        let out = c.kubectl(&["logs", "talk-n1"]);
        String::from_utf8_lossy(&out.stdout)
            .contains("hello-static")
            .then_some(())
    });
    let out = c.kubectl(&["exec", "talk-n1", "--", "sh", "-c", "echo from-exec; exit 3"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "from-exec");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The hostname is the pod's name, as for any pod: the container is the static pod's.
    assert_eq!(c.ok(&["exec", "talk-n1", "--", "hostname"]).trim(), "talk-n1");
    // The kubelet's events refer to the static pod's UID, where kubectl describe looks for a mirror pod's
    // events (the config.mirror annotation).
    eventually(WAIT, "the static pod's events in kubectl describe", || {
        c.ok(&["describe", "pod", "talk-n1"])
            .contains("Started container main")
            .then_some(())
    });
}

#[test]
fn deleting_the_mirror_pod_recreates_it_without_restarting_the_static_pod() {
    let c = up(&[]);
    fs::write(manifests(&c).join("web.yaml"), manifest("web", SLEEP)).unwrap();
    let mirror = running_mirror(&c, "web-n1");
    let hash = annotation(&mirror, CONFIG_HASH).to_string();
    let ids = wait_pod_containers(&hash, 1);
    let app = app_container(&hash);
    assert_eq!(label(&app, LABEL_RESTART_COUNT), "0");

    let again = delete_mirror_and_wait_for_the_next(&c, "web-n1", uid(&mirror));
    assert_eq!(annotation(&again, CONFIG_HASH), hash, "{again}");
    assert_eq!(annotation(&again, CONFIG_MIRROR), hash, "{again}");
    assert_eq!(
        again["status"]["containerStatuses"][0]["restartCount"], 0,
        "{again}"
    );
    assert_eq!(
        pod_containers(&hash),
        ids,
        "the static pod's containers were replaced"
    );
    // Same ids, so the same app container, still at restart count 0.
    assert_eq!(label(&app_container(&hash), LABEL_RESTART_COUNT), "0");
}

/// Writes `web`, then saves an edited `web` with `save`: a new static pod UID, so the old containers stop, new
/// ones run, and the mirror pod is replaced.
fn editing_replaces_the_pod_and_its_mirror(save: fn(&Path, &str)) {
    let c = up(&[]);
    let path = manifests(&c).join("web.yaml");
    fs::write(&path, manifest("web", SLEEP)).unwrap();
    let old = running_mirror(&c, "web-n1");
    let old_hash = annotation(&old, CONFIG_HASH).to_string();
    let old_ids = wait_pod_containers(&old_hash, 1);

    save(&path, &manifest("web", &["sleep", "--stdout", "edited"]));
    let new = c.wait_json(&["pod", "web-n1"], WAIT, |p| {
        let hash = annotation(p, CONFIG_HASH);
        !hash.is_empty() && hash != old_hash && phase(p) == "Running"
    });
    let new_hash = annotation(&new, CONFIG_HASH);
    assert_eq!(annotation(&new, CONFIG_MIRROR), new_hash, "{new}");
    assert_ne!(uid(&new), uid(&old), "the mirror pod was not replaced: {new}");
    assert_eq!(
        new["spec"]["containers"][0]["args"],
        json!(["sleep", "--stdout", "edited"]),
        "{new}"
    );

    wait_no_containers(&old_hash);
    let new_ids = wait_pod_containers(new_hash, 1);
    assert!(
        new_ids.iter().all(|id| !old_ids.contains(id)),
        "{old_ids:?} {new_ids:?}"
    );
}

#[test]
fn editing_a_manifest_by_renaming_a_dot_file_over_it_replaces_the_pod_and_its_mirror() {
    editing_replaces_the_pod_and_its_mirror(save_by_rename);
}

#[test]
fn editing_a_manifest_in_place_replaces_the_pod_and_its_mirror() {
    editing_replaces_the_pod_and_its_mirror(save_in_place);
}

#[test]
fn an_edited_manifests_new_pod_starts_only_after_the_old_one_has_stopped() {
    let c = up(&[]);
    let path = manifests(&c).join("web.yaml");
    // The old pod ignores SIGTERM, so stopping it takes its whole grace period (3 s).
    let slow = format!(
        "{}  terminationGracePeriodSeconds: 3\n",
        manifest("web", &["sleep", "--ignore-sigterm"])
    );
    fs::write(&path, slow).unwrap();
    let old = annotation(&running_mirror(&c, "web-n1"), CONFIG_HASH).to_string();
    wait_pod_containers(&old, 1);
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 1;
    save_by_rename(&path, &manifest("web", SLEEP));
    let mirror = c.wait_json(&["pod", "web-n1"], WAIT, |p| {
        !annotation(p, CONFIG_HASH).is_empty() && annotation(p, CONFIG_HASH) != old && phase(p) == "Running"
    });
    let new = annotation(&mirror, CONFIG_HASH).to_string();
    // Docker's own event order: every container of the old pod died before the first of the new was made.
    // `--until` counts in whole seconds: two seconds ahead (the command waits for them) covers everything so
    // far.
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 2;
    let out = Command::new("docker")
        .args([
            "events",
            "--since",
            &since.to_string(),
            "--until",
            &until.to_string(),
        ])
        .args([
            "--filter",
            &format!("label={LABEL_CLUSTER}={}", cluster_id(&c.data_dir)),
        ])
        .args([
            "--format",
            &format!("{{{{.Action}}}} {{{{index .Actor.Attributes \"{LABEL_POD_UID}\"}}}}"),
        ])
        .output()
        .unwrap();
    let events: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    let last_old_death = events.iter().rposition(|e| *e == format!("die {old}"));
    let first_new_create = events.iter().position(|e| *e == format!("create {new}"));
    let (Some(died), Some(created)) = (last_old_death, first_new_create) else {
        panic!("missing events in {events:#?}")
    };
    assert!(
        died < created,
        "the new pod started while the old one was stopping: {events:#?}"
    );
}

#[test]
fn removing_a_manifest_stops_its_containers_and_deletes_its_mirror_pod() {
    let c = up(&[]);
    let path = manifests(&c).join("web.yaml");
    fs::write(&path, manifest("web", SLEEP)).unwrap();
    let mirror = running_mirror(&c, "web-n1");
    let hash = annotation(&mirror, CONFIG_HASH).to_string();
    wait_pod_containers(&hash, 1);

    fs::remove_file(&path).unwrap();
    wait_no_containers(&hash);
    wait_pod_gone(&c, "web-n1");
}

#[test]
fn broken_manifests_are_reported_and_skipped_while_the_others_run_and_a_fixed_one_runs() {
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("kubeling.log");
    let mut c = up_logged(&[], Some(&log));
    let dir = manifests(&c);
    fs::write(dir.join("good.yaml"), manifest("good", SLEEP)).unwrap();
    let broken = dir.join("broken.yaml");
    fs::write(&broken, "{ this is: [not, valid yaml\n").unwrap();
    fs::write(
        dir.join("service.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  ports:\n  - port: 80\n",
    )
    .unwrap();

    running_mirror(&c, "good-n1");
    for file in ["broken.yaml", "service.yaml"] {
        // The message names the file by its absolute path; the file name is enough to tell them apart.
        wait_failed_validation(&c, &[file]);
        eventually(WAIT, &format!("a log line naming {file}"), || {
            fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains(file))
                .then_some(())
        });
    }
    assert!(c.is_running(), "kubeling exited on a broken manifest");

    save_in_place(&broken, &manifest("mended", SLEEP));
    running_mirror(&c, "mended-n1");
    running_mirror(&c, "good-n1");
    assert!(c.is_running(), "kubeling exited");
}

#[test]
fn of_two_manifests_with_the_same_pod_name_only_the_first_runs_and_the_second_is_a_duplicate() {
    let c = up(&["--file-check-frequency", "1s"]);
    let dir = manifests(&c);
    fs::write(
        dir.join("a.yaml"),
        manifest("twin", &["sleep", "--stdout", "first"]),
    )
    .unwrap();
    fs::write(
        dir.join("b.yaml"),
        manifest("twin", &["sleep", "--stdout", "second"]),
    )
    .unwrap();

    let mirror = running_mirror(&c, "twin-n1");
    assert_eq!(
        mirror["spec"]["containers"][0]["args"],
        json!(["sleep", "--stdout", "first"]),
        "{mirror}"
    );
    wait_failed_validation(&c, &["duplicate pod name"]);
    // The rejection is decided on every listing; watch three of them for a second pod of that name.
    let cluster = cluster_id(&c.data_dir);
    holds_for(Duration::from_secs(3), "both twins run", || {
        running_containers(&[
            (LABEL_CLUSTER, &cluster),
            (LABEL_POD_NAME, "twin-n1"),
            (LABEL_TYPE, "container"),
        ])
        .len()
            <= 1
    });
    let apps = running_containers(&[
        (LABEL_CLUSTER, &cluster),
        (LABEL_POD_NAME, "twin-n1"),
        (LABEL_TYPE, "container"),
    ]);
    assert_eq!(apps.len(), 1, "{apps:?}");
    assert_eq!(label(&apps[0], LABEL_POD_UID), annotation(&mirror, CONFIG_HASH));
}

// ---- the manifest URL ----------------------------------------------------------------------------------------

#[test]
fn manifest_url_pods_follow_the_served_list_and_outlive_server_errors() {
    let server = ManifestServer::start(200, pod_list(&["a", "b"]));
    let c = up(&["--manifest-url", &server.url, "--http-check-frequency", "1s"]);

    let a = running_mirror(&c, "a-n1");
    let b = running_mirror(&c, "b-n1");
    for m in [&a, &b] {
        assert_eq!(annotation(m, CONFIG_SOURCE), "http", "{m}");
        assert_eq!(annotation(m, CONFIG_MIRROR), annotation(m, CONFIG_HASH), "{m}");
    }
    let a_hash = annotation(&a, CONFIG_HASH).to_string();
    let b_hash = annotation(&b, CONFIG_HASH).to_string();
    wait_pod_containers(&a_hash, 1);
    wait_pod_containers(&b_hash, 1);
    let b_app = app_container(&b_hash);

    // `a` leaves the list, `c` joins it, `b` is the same pod as before.
    server.set(200, pod_list(&["b", "c"]));
    let c_mirror = running_mirror(&c, "c-n1");
    assert_eq!(annotation(&c_mirror, CONFIG_SOURCE), "http", "{c_mirror}");
    let c_hash = annotation(&c_mirror, CONFIG_HASH).to_string();
    wait_pod_containers(&c_hash, 1);
    wait_pod_gone(&c, "a-n1");
    wait_no_containers(&a_hash);
    let b_now = running_mirror(&c, "b-n1");
    assert_eq!(annotation(&b_now, CONFIG_HASH), b_hash, "{b_now}");
    assert_eq!(app_container(&b_hash), b_app, "b was restarted");
    let c_app = app_container(&c_hash);

    // A failing server keeps the last good list. Three failed fetches are watched (a wrong reading of the
    // first as "no pods" would already be deleting them by the third), then nothing may have changed.
    server.set(500, "boom".to_string());
    server.wait_requests(3);
    for (name, hash, app) in [("b-n1", &b_hash, &b_app), ("c-n1", &c_hash, &c_app)] {
        let m = running_mirror(&c, name);
        assert_eq!(annotation(&m, CONFIG_HASH), hash, "{m}");
        assert_eq!(&app_container(hash), app, "{name} was restarted");
    }
}

#[test]
fn manifest_url_requests_carry_the_given_headers() {
    let server = ManifestServer::start(200, pod_list(&[]));
    let _c = up(&[
        "--manifest-url",
        &server.url,
        "--manifest-url-header",
        "X-Test:yes",
        "--http-check-frequency",
        "1s",
    ]);
    server.wait_requests(1);
    let head = server.requests().remove(0);
    assert!(head.starts_with("GET /pods HTTP/1.1\r\n"), "{head}");
    let has_header = head.lines().any(|l| {
        l.split_once(':')
            .is_some_and(|(name, value)| name.eq_ignore_ascii_case("x-test") && value.trim() == "yes")
    });
    assert!(has_header, "X-Test: yes missing from:\n{head}");
}

// ---- the node agent alone, and restarts -------------------------------------------------------------------

#[test]
fn node_agent_runs_static_pods_while_its_api_server_is_down_and_mirrors_them_once_it_is_back() {
    let tmp = tempfile::tempdir().unwrap();
    let api_dir = tmp.path().join("api");
    let mut api = Cluster::start_in(&api_dir, 0, "apiserver");
    let (port, kubeconfig) = (api.port, api.kubeconfig.clone());
    // terminate() returns once it has exited: the node agent starts with no API server to reach.
    let _ = api.terminate();

    let manifests = tmp.path().join("manifests");
    fs::create_dir_all(&manifests).unwrap();
    fs::write(manifests.join("web.yaml"), manifest("web", SLEEP)).unwrap();
    let node_dir = tmp.path().join("node");
    let manifests_arg = manifests.to_str().unwrap();
    let _node = common::NodeAgent::spawn(
        &kubeconfig,
        &node_dir,
        &["--node-name", "lonely", "--static-pod-path", manifests_arg],
    );

    let cluster = eventually(WAIT, "the node's cluster id", || {
        fs::read_to_string(node_dir.join("cluster-id"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    });
    let app_of_web = || {
        running_containers(&[
            (LABEL_CLUSTER, &cluster),
            (LABEL_POD_NAME, "web-lonely"),
            (LABEL_TYPE, "container"),
        ])
    };
    let before = eventually(WAIT, "web-lonely's container without an API server", || {
        let ids = app_of_web();
        (ids.len() == 1).then(|| ids[0].clone())
    });

    let api = Cluster::start_in(&api_dir, port, "apiserver");
    let mirror = running_mirror(&api, "web-lonely");
    assert_eq!(annotation(&mirror, CONFIG_SOURCE), "file", "{mirror}");
    assert_eq!(
        annotation(&mirror, CONFIG_MIRROR),
        label(&before, LABEL_POD_UID),
        "{mirror}"
    );
    assert_eq!(
        app_of_web(),
        vec![before],
        "the container was replaced once the API server came back"
    );
}

#[test]
fn static_pod_containers_survive_sigterm_and_kill_9_restarts_of_kubeling() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let extra = ["--node-name", NODE];
    let mut first = Cluster::start_with(&dir, 0, "up", &extra, None);
    fs::write(manifests(&first).join("web.yaml"), manifest("web", SLEEP)).unwrap();
    let mut mirror = running_mirror(&first, "web-n1");
    let hash = annotation(&mirror, CONFIG_HASH).to_string();
    let ids = wait_pod_containers(&hash, 1);
    assert_eq!(label(&app_container(&hash), LABEL_RESTART_COUNT), "0");

    // The stored mirror still says Running from before a restart: a fresh mirror, made and given its status
    // by the restarted agent, shows that the agent has synced the static pod; then its containers are compared.
    let mut same_pod_after_restart = |c: &Cluster| {
        mirror = delete_mirror_and_wait_for_the_next(c, "web-n1", uid(&mirror));
        assert_eq!(annotation(&mirror, CONFIG_HASH), hash, "{mirror}");
        assert_eq!(
            mirror["status"]["containerStatuses"][0]["restartCount"], 0,
            "{mirror}"
        );
        assert_eq!(
            pod_containers(&hash),
            ids,
            "containers were replaced after a restart"
        );
        assert_eq!(label(&app_container(&hash), LABEL_RESTART_COUNT), "0");
    };

    // Every cluster stays in scope to the end: dropping one would remove the containers (the label is shared).
    assert!(first.terminate().success(), "kubeling did not exit 0 on SIGTERM");
    let mut second = Cluster::start_with(&dir, 0, "up", &extra, None);
    same_pod_after_restart(&second);
    second.kill9();
    let third = Cluster::start_with(&dir, 0, "up", &extra, None);
    same_pod_after_restart(&third);
}
