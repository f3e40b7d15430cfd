//! Container garbage collection (upstream `pkg/kubelet/kuberuntime/kuberuntime_gc.go` with the kubelet's
//! defaults: `MinAge` 0, `MaxPerPodContainer` 1, `MaxContainers` -1), run every minute
//! (`ContainerGCPeriod`) on what Docker holds:
//! - of a pod that still exists, the newest dead instance of each container is kept (for
//!   `kubectl logs --previous`) and older ones are removed, and every sandbox but the newest that is not
//!   running and no container refers to;
//! - of a pod that is gone for good, every dead container and every stopped sandbox.
//!
//! Running containers are never removed here (an orphan is housekeeping's). The decision ([`collect`]) is
//! pure; [`collect_garbage`] lists, decides and removes.

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;

use crate::runtime::{ContainerInfo, ContainerKind, ContainerRuntime, ContainerStatus, ListFilter};

/// upstream `ContainerGCPeriod`.
pub const CONTAINER_GC_PERIOD: std::time::Duration = std::time::Duration::from_secs(60);
/// upstream `--maximum-dead-containers-per-container` default.
pub const MAX_PER_POD_CONTAINER: usize = 1;

/// One container as the collector sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Runtime ID.
    pub id: String,
    /// Its pod's UID.
    pub pod_uid: String,
    /// The container name (`POD` for a sandbox).
    pub name: String,
    /// Sandbox or container.
    pub kind: ContainerKind,
    /// Running (a sandbox: ready).
    pub running: bool,
    /// Creation time, to tell old from new.
    pub created: Timestamp,
    /// For containers, the sandbox they belong to.
    pub sandbox_id: Option<String>,
    /// For containers, the restart count they were created with.
    pub restart_count: Option<u32>,
}

impl Entry {
    /// From a `list` entry; `None` for containers without kubelet labels.
    pub fn from_info(c: &ContainerInfo) -> Option<Entry> {
        Some(Entry {
            id: c.id.clone(),
            pod_uid: c.pod_uid()?.to_owned(),
            name: c.container_name().unwrap_or("").to_owned(),
            kind: c.kind()?,
            running: matches!(
                c.state,
                ContainerStatus::Running | ContainerStatus::Paused | ContainerStatus::Restarting
            ),
            created: c.created,
            sandbox_id: c.sandbox_id().map(str::to_owned),
            restart_count: c.restart_count(),
        })
    }
}

/// The IDs to remove: containers first, then sandboxes (a sandbox a kept container refers to stays).
/// `alive` holds the UIDs of the pods that still exist on this node.
pub fn collect(entries: &[Entry], alive: &HashSet<String>, max_per_container: usize) -> Vec<String> {
    let mut remove = Vec::new();
    // Dead containers by (pod, name), newest first.
    let mut units: BTreeMap<(&str, &str), Vec<&Entry>> = BTreeMap::new();
    for e in entries
        .iter()
        .filter(|e| e.kind == ContainerKind::Container && !e.running)
    {
        units.entry((&e.pod_uid, &e.name)).or_default().push(e);
    }
    for ((uid, _), mut dead) in units {
        dead.sort_by(newest_first);
        let keep = if alive.contains(uid) { max_per_container } else { 0 };
        remove.extend(dead.into_iter().skip(keep).map(|e| e.id.clone()));
    }
    let removed: HashSet<&str> = remove.iter().map(String::as_str).collect();
    let referenced: HashSet<&str> = entries
        .iter()
        .filter(|e| e.kind == ContainerKind::Container && !removed.contains(e.id.as_str()))
        .filter_map(|e| e.sandbox_id.as_deref())
        .collect();
    let mut pods: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in entries.iter().filter(|e| e.kind == ContainerKind::Sandbox) {
        pods.entry(&e.pod_uid).or_default().push(e);
    }
    for (uid, mut sandboxes) in pods {
        sandboxes.sort_by(newest_first);
        // upstream keeps the newest sandbox of an existing pod, whatever its state.
        let keep = usize::from(alive.contains(uid));
        for s in sandboxes.into_iter().skip(keep) {
            if !s.running && !referenced.contains(s.id.as_str()) {
                remove.push(s.id.clone());
            }
        }
    }
    remove
}

/// Newest first: by creation time (whole seconds in Docker's list), then by restart count (two instances
/// made within one second), then by ID.
fn newest_first(a: &&Entry, b: &&Entry) -> std::cmp::Ordering {
    b.created
        .cmp(&a.created)
        .then(b.restart_count.cmp(&a.restart_count))
        .then(a.id.cmp(&b.id))
}

/// One collection: list this node's containers, remove what [`collect`] says, and return the removed
/// entries (so the caller can drop files kept for them).
///
/// `alive` is asked only after the list: a pod's containers are created after its worker exists, so
/// every container listed belongs to a pod that the answer knows, if it is alive.
pub async fn collect_garbage(
    runtime: &dyn ContainerRuntime,
    alive: impl FnOnce() -> HashSet<String>,
) -> Vec<Entry> {
    let Ok(list) = runtime.list(&ListFilter::all()).await else {
        return Vec::new();
    };
    let alive = alive();
    let alive = &alive;
    let entries: Vec<Entry> = list.iter().filter_map(Entry::from_info).collect();
    let doomed: HashSet<String> = collect(&entries, alive, MAX_PER_POD_CONTAINER)
        .into_iter()
        .collect();
    let mut removed = Vec::new();
    for e in entries.into_iter().filter(|e| doomed.contains(&e.id)) {
        match runtime.remove_container(&e.id).await {
            Ok(()) => removed.push(e),
            Err(err) => tracing::debug!(container = %e.id, error = %err, "container gc"),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::FakeRuntime;
    use std::sync::Arc;

    fn e(id: &str, uid: &str, name: &str, running: bool, created: i64, sandbox: Option<&str>) -> Entry {
        Entry {
            id: id.into(),
            pod_uid: uid.into(),
            name: name.into(),
            kind: if name == "POD" {
                ContainerKind::Sandbox
            } else {
                ContainerKind::Container
            },
            running,
            created: Timestamp::from_second(created).unwrap(),
            sandbox_id: sandbox.map(str::to_owned),
            restart_count: None,
        }
    }

    #[test]
    fn the_newest_dead_instance_of_a_living_pod_is_kept_and_a_gone_pods_dead_are_removed() {
        let entries = [
            // Living pod a: sandbox s2 replaced s1; app restarted twice, runs now; init exited once.
            e("s1", "a", "POD", false, 1, None),
            e("s2", "a", "POD", true, 5, None),
            e("app0", "a", "app", false, 2, Some("s1")),
            e("app1", "a", "app", false, 3, Some("s1")),
            e("app2", "a", "app", true, 6, Some("s2")),
            e("init0", "a", "init", false, 5, Some("s2")),
            // Gone pod b: dead app, stopped sandbox, and a container still running (not GC's).
            e("sb", "b", "POD", false, 1, None),
            e("b0", "b", "app", false, 2, Some("sb")),
            e("b1", "b", "side", true, 2, Some("sb")),
        ];
        let alive = HashSet::from(["a".to_owned()]);
        let mut got = collect(&entries, &alive, 1);
        got.sort();
        // app0 goes (app1 is the newest dead one); s1 stays while app1 refers to it; b's sandbox stays while
        // its side container runs.
        assert_eq!(got, ["app0", "b0"]);
        // With app1 gone too (a later collection after another restart), s1 is free.
        let later: Vec<Entry> = entries
            .iter()
            .filter(|x| x.id != "app0" && x.id != "app1")
            .cloned()
            .collect();
        let mut got = collect(&later, &alive, 1);
        got.sort();
        assert_eq!(got, ["b0", "s1"]);
    }

    #[test]
    fn instances_made_in_the_same_second_are_ordered_by_restart_count() {
        let mut old = e("zzz", "a", "app", false, 7, Some("s"));
        old.restart_count = Some(1);
        let mut new = e("aaa", "a", "app", false, 7, Some("s"));
        new.restart_count = Some(2);
        let alive = HashSet::from(["a".to_owned()]);
        assert_eq!(collect(&[old, new], &alive, 1), ["zzz"]);
    }

    #[test]
    fn a_living_pods_newest_sandbox_stays_even_when_stopped() {
        let entries = [
            e("s1", "a", "POD", false, 1, None),
            e("s2", "a", "POD", false, 2, None),
        ];
        let alive = HashSet::from(["a".to_owned()]);
        assert_eq!(collect(&entries, &alive, 1), ["s1"]);
        assert_eq!(collect(&entries, &HashSet::new(), 1).len(), 2);
    }

    #[tokio::test]
    async fn a_collection_removes_from_the_runtime() {
        use crate::runtime::{ContainerConfig, PullPolicy, SandboxConfig};
        let fake = FakeRuntime::new();
        let runtime: Arc<dyn ContainerRuntime> = Arc::new(fake.clone());
        runtime
            .ensure_image("img", PullPolicy::IfNotPresent)
            .await
            .unwrap();
        let sandbox = runtime
            .create_sandbox(&SandboxConfig {
                pod_name: "p".into(),
                namespace: "ns".into(),
                uid: "gone".into(),
                image: "img".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let app = runtime
            .create_container(&ContainerConfig {
                pod_name: "p".into(),
                namespace: "ns".into(),
                uid: "gone".into(),
                name: "app".into(),
                sandbox_id: sandbox.clone(),
                image: "img".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let removed = collect_garbage(runtime.as_ref(), HashSet::new).await;
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(fake.container(&app).is_none());
        assert!(fake.container(&sandbox).is_none());
    }
}
