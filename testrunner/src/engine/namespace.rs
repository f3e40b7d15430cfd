//! Test namespaces (generated names, create, bounded delete) and the failure report of a namespace (its
//! events, the logs of its failing pods).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use rand::Rng;
use tokio::time::Instant;

use super::{Cluster, Error};

// The word lists of kuttl's `petname` names (a short subset; the shape is what suites depend on).
const ADJECTIVES: &[&str] = &[
    "able", "apt", "brave", "bright", "calm", "clean", "cool", "crisp", "daring", "eager", "fair", "fast",
    "fine", "fond", "free", "glad", "grand", "great", "happy", "hip", "humble", "just", "keen", "kind",
    "lucky", "merry", "neat", "nice", "noble", "open", "proud", "quick", "quiet", "rapid", "ready", "sharp",
    "shy", "smart", "solid", "stable", "sunny", "sure", "swift", "tidy", "true", "vast", "warm", "wise",
    "witty", "young",
];
const NOUNS: &[&str] = &[
    "ant", "bass", "bat", "bear", "bee", "bird", "bison", "boar", "cat", "cod", "colt", "crab", "crow",
    "deer", "dog", "dove", "duck", "eagle", "eel", "elk", "emu", "falcon", "fish", "fox", "frog", "gnu",
    "goat", "hare", "hawk", "heron", "ibex", "jay", "koala", "lamb", "lark", "lion", "lynx", "mole", "moose",
    "mule", "newt", "owl", "panda", "pig", "pony", "quail", "ram", "seal", "swan", "wolf",
];

/// A generated namespace name: `<prefix>-<adjective>-<noun>`, plus `-<4 random [a-z0-9]>` when `suffix`
/// (kuttl since v0.26.0: `kuttl-<adjective>-<noun>-<4 chars>`; chainsaw: `chainsaw-<adjective>-<noun>`).
pub fn generate_name(prefix: &str, suffix: bool) -> String {
    let mut rng = rand::rng();
    let adj = ADJECTIVES[rng.random_range(0..ADJECTIVES.len())];
    let noun = NOUNS[rng.random_range(0..NOUNS.len())];
    if suffix {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let tail: String = (0..4)
            .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
            .collect();
        format!("{prefix}-{adj}-{noun}-{tail}")
    } else {
        format!("{prefix}-{adj}-{noun}")
    }
}

/// What a clean-up left behind.
#[derive(Debug, thiserror::Error)]
#[error("waiting for namespace \"{name}\" to be deleted timed out after {secs:.1}s ({left})")]
pub struct NamespaceLeft {
    /// The namespace.
    pub name: String,
    /// The bound.
    pub secs: f64,
    /// What is known of why (its phase and conditions).
    pub left: String,
}

impl Cluster {
    /// Creates a namespace; `Ok(false)` when it already existed (so it is not the caller's to delete).
    /// On Forbidden, an existing namespace is used (kuttl).
    pub async fn create_namespace(&self, name: &str) -> Result<bool, Error> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.to_string());
        let what = format!("Namespace:{name}");
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(kube::Error::Api(s)) if s.code == 403 => match api.get_opt(name).await {
                Ok(Some(_)) => Ok(false),
                _ => Err(Error::Api {
                    op: "create",
                    what,
                    source: kube::Error::Api(s),
                }),
            },
            Err(source) => Err(Error::Api {
                op: "create",
                what,
                source,
            }),
        }
    }

    /// Deletes a namespace and waits, polling every 100 ms (kuttl), up to `timeout` for it to be gone.
    /// A namespace that stays (finalizers) is reported, never waited for beyond the bound.
    pub async fn delete_namespace(&self, name: &str, timeout: Duration) -> Result<(), NamespaceLeft> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let deadline = Instant::now() + timeout;
        let left = |why: String| NamespaceLeft {
            name: name.to_string(),
            secs: timeout.as_secs_f64(),
            left: why,
        };
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(left(e.to_string())),
        }
        loop {
            let state = match api.get_opt(name).await {
                Ok(None) => return Ok(()),
                Ok(Some(ns)) => describe_terminating(&ns),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(left(state));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The failure report of a namespace: its events sorted by time, then the last lines of the logs of
    /// every container of its failing pods (not ready, failed, restarted or waiting).
    pub async fn failure_report(&self, ns: &str) -> String {
        let mut out = String::new();
        let events: Api<Event> = Api::namespaced(self.client.clone(), ns);
        match events.list(&ListParams::default()).await {
            Ok(list) => {
                let mut items = list.items;
                items.sort_by_key(event_time);
                if !items.is_empty() {
                    out.push_str(&format!("events in namespace {ns}:\n"));
                }
                for e in &items {
                    let obj = &e.involved_object;
                    out.push_str(&format!(
                        "  {} {} {} {}/{}: {}\n",
                        event_time(e).map(|t| t.to_string()).unwrap_or_default(),
                        e.type_.as_deref().unwrap_or(""),
                        e.reason.as_deref().unwrap_or(""),
                        obj.kind.as_deref().unwrap_or(""),
                        obj.name.as_deref().unwrap_or(""),
                        e.message.as_deref().unwrap_or("").trim_end()
                    ));
                }
            }
            Err(e) => out.push_str(&format!("events of namespace {ns} could not be listed: {e}\n")),
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let Ok(list) = pods.list(&ListParams::default()).await else {
            return out;
        };
        for pod in list.items.iter().filter(|p| pod_is_failing(p)) {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let containers = pod
                .spec
                .as_ref()
                .map(|s| s.containers.clone())
                .unwrap_or_default();
            for c in containers {
                let lp = LogParams {
                    container: Some(c.name.clone()),
                    tail_lines: Some(30),
                    ..Default::default()
                };
                match pods.logs(&name, &lp).await {
                    Ok(text) if !text.is_empty() => {
                        out.push_str(&format!("logs of pod {ns}/{name} container {}:\n", c.name));
                        for line in text.lines() {
                            out.push_str(&format!("  {line}\n"));
                        }
                    }
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 400 => {
                        out.push_str(&format!(
                            "logs of pod {ns}/{name} container {}: {}\n",
                            c.name, s.message
                        ));
                    }
                    Err(e) => out.push_str(&format!("logs of pod {ns}/{name} container {}: {e}\n", c.name)),
                }
            }
        }
        out
    }
}

fn event_time(e: &Event) -> Option<jiff::Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or(e.event_time.as_ref().map(|t| t.0))
        .or(e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn describe_terminating(ns: &Namespace) -> String {
    let status = ns.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let conds: Vec<String> = status
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .filter(|c| c.status == "True")
                .map(|c| format!("{}: {}", c.type_, c.message.as_deref().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if conds.is_empty() {
        format!("phase {phase}")
    } else {
        format!("phase {phase}; {}", conds.join("; "))
    }
}

/// Whether a pod's logs belong in a failure report: failed, or a container not ready, waiting or restarted.
pub fn pod_is_failing(p: &Pod) -> bool {
    let Some(st) = &p.status else { return false };
    if st.phase.as_deref() == Some("Failed") {
        return true;
    }
    if st.phase.as_deref() == Some("Succeeded") {
        return false;
    }
    st.container_statuses
        .as_ref()
        .is_some_and(|cs| cs.iter().any(|c| !c.ready || c.restart_count > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_have_the_tools_shape() {
        let re = regex::Regex::new("^kuttl-[a-z]+-[a-z]+-[a-z0-9]{4}$").unwrap();
        let n = generate_name("kuttl", true);
        assert!(re.is_match(&n), "{n}");
        let n = generate_name("chainsaw", false);
        assert!(
            regex::Regex::new("^chainsaw-[a-z]+-[a-z]+$")
                .unwrap()
                .is_match(&n),
            "{n}"
        );
    }

    #[test]
    fn failing_pods_are_those_not_ready_failed_or_restarted() {
        let pod = |v: serde_json::Value| serde_json::from_value::<Pod>(v).unwrap();
        let cs = |ready: bool, restarts: i32| {
            serde_json::json!({"status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "i",
                "imageID": "", "ready": ready, "restartCount": restarts}]}})
        };
        assert!(!pod_is_failing(&pod(cs(true, 0))));
        assert!(pod_is_failing(&pod(cs(false, 0))));
        assert!(pod_is_failing(&pod(cs(true, 2))));
        assert!(pod_is_failing(&pod(
            serde_json::json!({"status": {"phase": "Failed"}})
        )));
        assert!(!pod_is_failing(&pod(
            serde_json::json!({"status": {"phase": "Succeeded"}})
        )));
    }
}
