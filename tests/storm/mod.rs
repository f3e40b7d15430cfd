//! A write storm with a crash in the middle: the fault suite's durability harness.
//!
//! `clients` tasks create, replace (with and without a resourceVersion) and delete ConfigMaps, each in its
//! own namespace, recording every acknowledged write and the one write each has in flight; one watcher
//! records what it receives. At a random moment the [`Target`] crashes (SIGKILL), then restarts on the same
//! data, and the harness checks:
//!
//! - every key holds its last acknowledged write, or the write that was in flight after it (an
//!   acknowledged delete stays deleted unless an in-flight create came after it);
//! - an object present is exactly one write's content (no half write, nothing refused or lost coming back);
//! - an in-flight write the watcher had already seen is there (a reader only ever sees durable writes);
//! - resourceVersions never go back: the list's is at least every acknowledged one, and the first write
//!   after the restart gets one above them;
//! - a watch resumed from the last resourceVersion the watcher saw either delivers exactly the events it
//!   missed (its state then equals a fresh list) or ends with 410 Gone (HTTP or an in-stream ERROR).
//!
//! The target is a trait so that the same storm runs against `kubeling apiserver` killed with `kill -9`
//! (`tests/fault_storm.rs`) and against other crashes (an external store killed under a running API server).
//! Clients make each request once (kube's retry layer is off), so an answer is never a retried write's.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The label every storm object carries (the watcher and the checks select on it).
const LABEL: &str = "kubeling.io/storm";
/// The namespace of the sentinel objects written after each restart.
const SENTINEL_NS: &str = "storm-sentinel";
/// How long a client or a check may wait on one request before the write counts as in flight.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a storm may take to end after the crash, and a resumed watch to reach the sentinel.
const BOUND: Duration = Duration::from_secs(30);

/// What the storm crashes and restarts.
pub trait Target {
    /// The kubeconfig of the API server as it runs now (read again after each restart: its port may change).
    fn kubeconfig(&self) -> PathBuf;
    /// Kill what must survive the storm, at once. Called from the storm while the clients write.
    fn crash(&mut self);
    /// Start again what [`Target::crash`] killed, on the same data; return once the API server serves.
    fn restart(&mut self);
}

/// The shape of a storm.
#[derive(Clone, Debug)]
pub struct Options {
    /// Storms, each ending in a crash and a restart.
    pub runs: usize,
    /// Concurrent writers, each in its namespace `storm-<i>`.
    pub clients: usize,
    /// ConfigMaps per writer (`cm-<j>`), kept from run to run.
    pub keys_per_client: usize,
    /// When the crash comes after the writers start (uniform in the range).
    pub crash_after: Range<Duration>,
    /// Seed of every random choice but the scheduler's (the writers' operations, the crash moments).
    pub seed: u64,
}

impl Options {
    /// 20 runs of 8 writers over 6 keys each, crashing 100-800 ms in, seeded from `STORM_SEED` or the clock.
    pub fn standard() -> Options {
        let seed = std::env::var("STORM_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0)
            });
        Options {
            runs: 20,
            clients: 8,
            keys_per_client: 6,
            crash_after: Duration::from_millis(100)..Duration::from_millis(800),
            seed,
        }
    }
}

/// What the storms did and found.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Crashes survived.
    pub runs: usize,
    /// Writes acknowledged (creates, replaces, deletes).
    pub acknowledged: usize,
    /// Replaces with a stale resourceVersion, answered 409 as they must be.
    pub refused: usize,
    /// Keys checked after the restarts (keys × runs).
    pub keys_checked: usize,
    /// Keys holding their last acknowledged write (or its absence, after a delete).
    pub found: usize,
    /// Keys whose last acknowledged write was overwritten by the write in flight.
    pub superseded: usize,
    /// Writes in flight at the crash that are there after the restart.
    pub in_flight_found: usize,
    /// Writes in flight at the crash that are not.
    pub in_flight_absent: usize,
    /// In-flight writes the watcher had received before the crash (each must be found).
    pub in_flight_seen: usize,
    /// How the writes in flight ended, by answer: an error status (`503 ServiceUnavailable`) or `no answer`
    /// (the connection refused or broken, or no answer within the client's timeout).
    pub in_flight_answers: BTreeMap<String, usize>,
    /// Resumed watches that delivered exactly the missed events.
    pub watch_exact: usize,
    /// Events those exact resumes delivered before the sentinel.
    pub watch_missed_events: usize,
    /// Resumed watches answered 410 Gone.
    pub watch_expired: usize,
    /// Events the storm watcher received.
    pub watched: usize,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "runs (crash + restart): {}", self.runs)?;
        writeln!(
            f,
            "writes acknowledged: {} (plus {} stale replaces refused with 409)",
            self.acknowledged, self.refused
        )?;
        writeln!(
            f,
            "keys checked after the restarts: {}: last acknowledged write found {}, overwritten by the write in \
             flight {}",
            self.keys_checked, self.found, self.superseded
        )?;
        let answers: Vec<String> = self
            .in_flight_answers
            .iter()
            .map(|(answer, n)| format!("{answer} {n}"))
            .collect();
        writeln!(
            f,
            "writes in flight at the crash: found {}, absent {} ({} seen by the watcher before the crash, all found); \
             answered: {}",
            self.in_flight_found,
            self.in_flight_absent,
            self.in_flight_seen,
            answers.join(", ")
        )?;
        write!(
            f,
            "watch resumed from its last resourceVersion: exact {} ({} missed events delivered), 410 Gone {}; \
             {} events watched during the storms",
            self.watch_exact, self.watch_missed_events, self.watch_expired, self.watched
        )
    }
}

/// Runs `opts.runs` storms against `target`, panicking on the first broken promise, and returns the figures.
pub fn run(target: &mut dyn Target, opts: &Options) -> Figures {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let mut figures = Figures::default();
    let mut history = History::default();
    let mut keys = rt.block_on(async {
        let client = client(&target.kubeconfig()).await;
        ensure_namespaces(&client, opts.clients).await;
        let observed = list(&client).await.objects;
        (0..opts.clients)
            .map(|c| {
                (0..opts.keys_per_client)
                    .map(|k| observed.get(&key(c, k)).cloned().into())
                    .collect()
            })
            .collect::<Vec<Vec<State>>>()
    });
    for run in 0..opts.runs {
        let crash_after = rng.random_range(opts.crash_after.clone());
        let kubeconfig = target.kubeconfig();
        let storm = rt.block_on(storm(&kubeconfig, run, opts, &keys, crash_after, || {
            target.crash()
        }));
        target.restart();
        keys = rt.block_on(check(
            &target.kubeconfig(),
            run,
            storm,
            &mut history,
            &mut figures,
        ));
        figures.runs += 1;
    }
    figures
}

/// A ConfigMap's state as the harness knows it: absent, or present at a resourceVersion with this `data`.
#[derive(Clone, PartialEq, Eq)]
enum State {
    Absent,
    Present { rv: u64, data: BTreeMap<String, String> },
}

impl From<Option<(u64, BTreeMap<String, String>)>> for State {
    fn from(o: Option<(u64, BTreeMap<String, String>)>) -> State {
        match o {
            None => State::Absent,
            Some((rv, data)) => State::Present { rv, data },
        }
    }
}

/// The data by its token and the other values' sizes (the padding would fill the screen).
fn brief(data: &BTreeMap<String, String>) -> String {
    let sizes: Vec<String> = data
        .iter()
        .filter(|(k, _)| *k != "token")
        .map(|(k, v)| format!("{k}: {} bytes", v.len()))
        .collect();
    format!("{:?} ({})", data.get("token"), sizes.join(", "))
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Absent => write!(f, "absent"),
            State::Present { rv, data } => write!(f, "at {rv}: {}", brief(data)),
        }
    }
}

impl State {
    fn token(&self) -> Option<&str> {
        match self {
            State::Absent => None,
            State::Present { data, .. } => data.get("token").map(String::as_str),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    /// PUT with the current resourceVersion.
    Replace,
    /// PUT without a resourceVersion (an unconditional update).
    ReplaceBlind,
    /// PUT with a resourceVersion that is not the current one: must be refused with 409.
    ReplaceStale,
    Delete,
}

/// A write whose answer never came.
#[derive(Clone, Debug)]
struct InFlight {
    key: usize,
    op: Op,
    /// The content it writes (none for a delete).
    data: Option<BTreeMap<String, String>>,
    /// Why it is not known: the client's error.
    error: String,
    /// The error in short, for the figures: its status code and reason, or `no answer`.
    answer: String,
}

/// One writer's record of a storm.
#[derive(Debug)]
struct Writer {
    /// Last acknowledged state of each key (at the start: as observed after the previous restart).
    keys: Vec<State>,
    /// resourceVersions of the acknowledged creates and replaces, in order.
    acked_rvs: Vec<u64>,
    acknowledged: usize,
    refused: usize,
    /// Tokens of the refused writes: never to be seen.
    refused_tokens: Vec<String>,
    in_flight: Option<InFlight>,
}

/// What the watcher received during the storm.
#[derive(Debug, Default)]
struct Watched {
    /// The storm objects as of `last_rv` (from the list, then every event).
    objects: BTreeMap<(String, String), (u64, BTreeMap<String, String>)>,
    last_rv: u64,
    events: usize,
    /// Tokens of the objects in ADDED/MODIFIED events, and the keys of DELETED events with their rv.
    tokens: BTreeSet<String>,
    deleted: Vec<((String, String), u64)>,
}

/// Everything one storm produced, handed to [`check`].
struct Storm {
    writers: Vec<Writer>,
    watched: Watched,
}

/// What must hold from run to run.
#[derive(Default)]
struct History {
    /// Highest resourceVersion any write was acknowledged with (the sentinels included).
    max_acked: u64,
    /// Tokens that must never be seen again: refused writes, and in-flight writes found absent.
    gone: BTreeSet<String>,
}

fn key(client: usize, k: usize) -> (String, String) {
    (format!("storm-{client}"), format!("cm-{k}"))
}

async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("a client config from the kubeconfig");
    // One attempt per request: a retried write could be acknowledged twice or answered for another attempt.
    cfg.default_retry = false;
    cfg.read_timeout = Some(REQUEST_TIMEOUT);
    kube::Client::try_from(cfg).expect("a client")
}

async fn ensure_namespaces(client: &kube::Client, clients: usize) {
    let api: Api<Namespace> = Api::all(client.clone());
    let names = (0..clients)
        .map(|c| format!("storm-{c}"))
        .chain([SENTINEL_NS.to_string()]);
    for name in names {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("creating namespace {name}: {e}"),
        }
    }
}

struct Listed {
    rv: u64,
    /// Storm objects by (namespace, name), the sentinels left out.
    objects: BTreeMap<(String, String), (u64, BTreeMap<String, String>)>,
}

async fn list(client: &kube::Client) -> Listed {
    let api: Api<ConfigMap> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default().labels(LABEL))
        .await
        .expect("listing the storm's ConfigMaps");
    let rv = parse_rv(list.metadata.resource_version.as_deref());
    let objects = list
        .items
        .into_iter()
        .filter(|cm| cm.metadata.namespace.as_deref() != Some(SENTINEL_NS))
        .map(|cm| {
            let (k, rv, data) = parts(&cm);
            (k, (rv, data))
        })
        .collect();
    Listed { rv, objects }
}

fn parse_rv(rv: Option<&str>) -> u64 {
    rv.and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("resourceVersion {rv:?} is not a number"))
}

fn parts(cm: &ConfigMap) -> ((String, String), u64, BTreeMap<String, String>) {
    let m = &cm.metadata;
    (
        (
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        ),
        parse_rv(m.resource_version.as_deref()),
        cm.data.clone().unwrap_or_default(),
    )
}

fn config_map(name: &str, rv: Option<u64>, data: &BTreeMap<String, String>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([(LABEL.to_string(), "1".to_string())].into()),
            resource_version: rv.map(|r| r.to_string()),
            ..Default::default()
        },
        data: Some(data.clone()),
        ..Default::default()
    }
}

/// One storm: the watcher and the writers start, the target crashes after `crash_after`, and once every
/// writer has stopped (each at its first unanswered request) their records are returned.
async fn storm(
    kubeconfig: &std::path::Path,
    run: usize,
    opts: &Options,
    keys: &[Vec<State>],
    crash_after: Duration,
    crash: impl FnOnce(),
) -> Storm {
    let client = client(kubeconfig).await;
    let watched = Arc::new(Mutex::new(Watched::default()));
    let watcher = start_watcher(&client, watched.clone()).await;
    let writers: Vec<_> = keys
        .iter()
        .enumerate()
        .map(|(c, keys)| {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), &format!("storm-{c}"));
            let rng = StdRng::seed_from_u64(opts.seed ^ ((run as u64) << 32) ^ (c as u64 + 1));
            tokio::spawn(write(api, run, c, keys.clone(), rng))
        })
        .collect();
    tokio::time::sleep(crash_after).await;
    crash();
    let mut records = Vec::new();
    for w in writers {
        let w = tokio::time::timeout(BOUND, w)
            .await
            .expect("a writer went on after the crash")
            .expect("a writer panicked");
        records.push(w);
    }
    watcher.abort();
    if let Err(e) = watcher.await
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
    let watched = std::mem::take(&mut *watched.lock().unwrap());
    Storm {
        writers: records,
        watched,
    }
}

/// Lists the storm objects, then watches from the list's resourceVersion in a task recording every event.
/// Returns once the watch is established, so that it sees the storm from its first write.
async fn start_watcher(client: &kube::Client, watched: Arc<Mutex<Watched>>) -> tokio::task::JoinHandle<()> {
    let listed = list(client).await;
    {
        let mut w = watched.lock().unwrap();
        w.objects = listed.objects;
        w.last_rv = listed.rv;
    }
    let api: Api<ConfigMap> = Api::all(client.clone());
    let stream = api
        .watch(
            &WatchParams::default().labels(LABEL).timeout(290),
            &listed.rv.to_string(),
        )
        .await
        .expect("starting the storm watch");
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(ev)) = stream.next().await {
            let mut w = watched.lock().unwrap();
            let (cm, deleted) = match ev {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => (cm, false),
                WatchEvent::Deleted(cm) => (cm, true),
                WatchEvent::Bookmark(_) => continue,
                // Fallen too far behind: the watcher stops where it is, and resumes from there after the
                // restart like any other.
                WatchEvent::Error(e) if e.code == 410 => break,
                WatchEvent::Error(e) => panic!("the storm watch got an error event: {e:?}"),
            };
            let (k, rv, data) = parts(&cm);
            assert!(
                rv > w.last_rv,
                "watch event for {k:?} at {rv} after {}: out of order",
                w.last_rv
            );
            w.last_rv = rv;
            w.events += 1;
            if k.0 == SENTINEL_NS {
                continue;
            }
            if deleted {
                w.objects.remove(&k);
                w.deleted.push((k, rv));
            } else {
                if let Some(t) = data.get("token") {
                    w.tokens.insert(t.clone());
                }
                w.objects.insert(k, (rv, data));
            }
        }
    })
}

/// One writer: random operations on its keys until a request goes unanswered (the crash).
async fn write(api: Api<ConfigMap>, run: usize, client: usize, keys: Vec<State>, mut rng: StdRng) -> Writer {
    let mut w = Writer {
        keys,
        acked_rvs: Vec::new(),
        acknowledged: 0,
        refused: 0,
        refused_tokens: Vec::new(),
        in_flight: None,
    };
    let pp = PostParams::default();
    for seq in 0u64.. {
        let k = rng.random_range(0..w.keys.len());
        let name = format!("cm-{k}");
        let op = match &w.keys[k] {
            State::Absent => Op::Create,
            State::Present { .. } => match rng.random_range(0..100) {
                0..35 => Op::Replace,
                35..60 => Op::ReplaceBlind,
                60..85 => Op::Delete,
                _ => Op::ReplaceStale,
            },
        };
        let token = format!("r{run}-c{client}-{seq}");
        // Sizes from a few bytes to a few KiB, so that writes span sled's pages differently.
        let pad = "x".repeat(rng.random_range(0..4096));
        let data: BTreeMap<String, String> =
            [("token".to_string(), token.clone()), ("pad".to_string(), pad)].into();
        let current_rv = match &w.keys[k] {
            State::Present { rv, .. } => Some(*rv),
            State::Absent => None,
        };
        let answer = match op {
            Op::Create => api.create(&pp, &config_map(&name, None, &data)).await.map(Some),
            Op::Replace => api
                .replace(&name, &pp, &config_map(&name, current_rv, &data))
                .await
                .map(Some),
            Op::ReplaceBlind => api
                .replace(&name, &pp, &config_map(&name, None, &data))
                .await
                .map(Some),
            Op::ReplaceStale => api
                .replace(&name, &pp, &config_map(&name, current_rv.map(|rv| rv - 1), &data))
                .await
                .map(Some),
            Op::Delete => api.delete(&name, &DeleteParams::default()).await.map(|_| None),
        };
        match answer {
            Ok(_) if op == Op::ReplaceStale => {
                panic!("storm-{client}/{name}: a replace at a stale resourceVersion was accepted")
            }
            Ok(Some(cm)) => {
                let (_, rv, stored) = parts(&cm);
                assert!(
                    stored == data,
                    "storm-{client}/{name}: answered with {}, sent {}",
                    brief(&stored),
                    brief(&data)
                );
                if let Some(last) = w.acked_rvs.last() {
                    assert!(
                        rv > *last,
                        "storm-{client}/{name}: acknowledged at {rv} after {last}"
                    );
                }
                w.acked_rvs.push(rv);
                w.acknowledged += 1;
                w.keys[k] = State::Present { rv, data };
            }
            Ok(None) => {
                w.acknowledged += 1;
                w.keys[k] = State::Absent;
            }
            Err(kube::Error::Api(s)) if op == Op::ReplaceStale && s.code == 409 => {
                w.refused += 1;
                w.refused_tokens.push(token);
            }
            Err(kube::Error::Api(s)) if (400..500).contains(&s.code) => {
                panic!("storm-{client}/{name}: {op:?} refused: {s:?}")
            }
            // No answer, a 5xx, a broken connection: the write may or may not have happened.
            Err(e) => {
                w.in_flight = Some(InFlight {
                    key: k,
                    op,
                    data: (op != Op::Delete).then_some(data),
                    answer: match &e {
                        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
                        _ => "no answer".to_string(),
                    },
                    error: e.to_string(),
                });
                return w;
            }
        }
    }
    unreachable!("the loop only ends by returning")
}

/// After the restart: every promise of the module's doc. Returns each writer's keys as found, for the next storm.
async fn check(
    kubeconfig: &std::path::Path,
    run: usize,
    storm: Storm,
    history: &mut History,
    figures: &mut Figures,
) -> Vec<Vec<State>> {
    let client = client(kubeconfig).await;
    let listed = list(&client).await;
    let Storm { writers, watched } = storm;
    let max_acked = writers
        .iter()
        .flat_map(|w| w.acked_rvs.iter().copied())
        .max()
        .unwrap_or(0)
        .max(history.max_acked);
    if let Some(first) = writers.iter().filter_map(|w| w.acked_rvs.first()).min() {
        assert!(
            *first > history.max_acked,
            "run {run}: a write was acknowledged at {first}, not above {} acknowledged before the last restart",
            history.max_acked
        );
    }
    assert!(
        listed.rv >= max_acked,
        "run {run}: the list's resourceVersion {} is below the highest acknowledged {max_acked}",
        listed.rv
    );
    assert!(
        watched.last_rv <= listed.rv,
        "run {run}: the watcher saw resourceVersion {} before the crash; the restarted server lists at {}",
        watched.last_rv,
        listed.rv
    );

    let mut known = BTreeSet::new();
    let mut next = Vec::new();
    for (c, w) in writers.iter().enumerate() {
        figures.acknowledged += w.acknowledged;
        figures.refused += w.refused;
        history.gone.extend(w.refused_tokens.iter().cloned());
        let mut found_keys = Vec::new();
        for (k, acked) in w.keys.iter().enumerate() {
            let key = key(c, k);
            known.insert(key.clone());
            let found: State = listed.objects.get(&key).cloned().into();
            if let (State::Present { rv, .. }, Some(t)) = (&found, found.token()) {
                assert!(
                    !history.gone.contains(t),
                    "run {run}: {key:?} holds {t}, a write that was refused or lost"
                );
                assert!(
                    *rv <= listed.rv,
                    "run {run}: {key:?} at {rv} above the list's {}",
                    listed.rv
                );
            }
            figures.keys_checked += 1;
            let in_flight = w.in_flight.as_ref().filter(|f| f.key == k);
            let outcome = match in_flight {
                None => {
                    assert_eq!(
                        &found, acked,
                        "run {run}: {key:?} lost its last acknowledged write (no write in flight)"
                    );
                    figures.found += 1;
                    None
                }
                Some(f) => {
                    let landed = match (&f.data, &found) {
                        (None, State::Absent) => true,
                        // A stale replace is refused whenever it arrives: it never lands.
                        (Some(data), State::Present { rv, data: d })
                            if d == data && f.op != Op::ReplaceStale =>
                        {
                            if let State::Present { rv: before, .. } = acked {
                                assert!(
                                    rv > before,
                                    "run {run}: {key:?}: the in-flight write at {rv} <= {before}"
                                );
                            }
                            true
                        }
                        _ => false,
                    };
                    if landed {
                        figures.superseded += 1;
                    } else {
                        assert_eq!(
                            &found,
                            acked,
                            "run {run}: {key:?} is neither its last acknowledged write nor the {:?} in flight \
                             ({}; its data {})",
                            f.op,
                            f.error,
                            f.data.as_ref().map(brief).unwrap_or_default()
                        );
                        figures.found += 1;
                    }
                    Some(landed)
                }
            };
            if let (Some(landed), Some(f)) = (outcome, in_flight) {
                *figures.in_flight_answers.entry(f.answer.clone()).or_default() += 1;
                let seen = match &f.data {
                    Some(data) => data.get("token").is_some_and(|t| watched.tokens.contains(t)),
                    None => {
                        let since = match acked {
                            State::Present { rv, .. } => *rv,
                            State::Absent => u64::MAX,
                        };
                        watched.deleted.iter().any(|(dk, drv)| *dk == key && *drv > since)
                    }
                };
                if seen {
                    figures.in_flight_seen += 1;
                    assert!(
                        landed,
                        "run {run}: {key:?}: the watcher saw the {:?} in flight before the crash, but it is gone",
                        f.op
                    );
                }
                if landed {
                    figures.in_flight_found += 1;
                } else {
                    figures.in_flight_absent += 1;
                    if let Some(t) = f.data.as_ref().and_then(|d| d.get("token")) {
                        history.gone.insert(t.clone());
                    }
                }
            }
            found_keys.push(found);
        }
        next.push(found_keys);
    }
    let phantoms: Vec<_> = listed.objects.keys().filter(|k| !known.contains(*k)).collect();
    assert!(
        phantoms.is_empty(),
        "run {run}: objects no writer made: {phantoms:?}"
    );
    for t in &watched.tokens {
        assert!(
            !history.gone.contains(t),
            "run {run}: the watcher saw {t}, a write that was refused or is lost"
        );
    }
    figures.watched += watched.events;

    let sentinel_rv = resume_watch(&client, run, watched, &listed, figures).await;
    assert!(
        sentinel_rv > max_acked,
        "run {run}: the first write after the restart got resourceVersion {sentinel_rv}, not above the \
         acknowledged {max_acked}"
    );
    history.max_acked = sentinel_rv;
    next
}

/// Resumes the storm watch from the last resourceVersion it saw, writes a sentinel, and checks that the
/// events before the sentinel bring the watcher's state to `listed`, unless the answer is 410 Gone. Returns
/// the sentinel's resourceVersion.
async fn resume_watch(
    client: &kube::Client,
    run: usize,
    mut watched: Watched,
    listed: &Listed,
    figures: &mut Figures,
) -> u64 {
    let api: Api<ConfigMap> = Api::all(client.clone());
    let sentinels: Api<ConfigMap> = Api::namespaced(client.clone(), SENTINEL_NS);
    let name = format!("sentinel-{run}");
    let sentinel = config_map(&name, None, &[("run".to_string(), run.to_string())].into());
    let params = WatchParams::default().labels(LABEL).timeout(60);
    let stream = match api.watch(&params, &watched.last_rv.to_string()).await {
        Err(kube::Error::Api(s)) if s.code == 410 => None,
        Err(e) => panic!("run {run}: resuming the watch from {}: {e}", watched.last_rv),
        Ok(stream) => Some(stream),
    };
    let created = sentinels
        .create(&PostParams::default(), &sentinel)
        .await
        .unwrap_or_else(|e| panic!("run {run}: writing the sentinel: {e}"));
    let sentinel_rv = parse_rv(created.metadata.resource_version.as_deref());
    let Some(stream) = stream else {
        figures.watch_expired += 1;
        return sentinel_rv;
    };
    let mut stream = std::pin::pin!(stream);
    let mut missed = 0;
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let ev = tokio::time::timeout_at(deadline, stream.next())
            .await
            .unwrap_or_else(|_| panic!("run {run}: the resumed watch never delivered the sentinel"))
            .unwrap_or_else(|| panic!("run {run}: the resumed watch ended before the sentinel"))
            .unwrap_or_else(|e| panic!("run {run}: the resumed watch failed: {e}"));
        let (cm, deleted) = match ev {
            WatchEvent::Error(e) if e.code == 410 && missed == 0 => {
                figures.watch_expired += 1;
                return sentinel_rv;
            }
            WatchEvent::Error(e) => panic!("run {run}: the resumed watch answered {e:?}"),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Added(cm) | WatchEvent::Modified(cm) => (cm, false),
            WatchEvent::Deleted(cm) => (cm, true),
        };
        let (k, rv, data) = parts(&cm);
        assert!(
            rv > watched.last_rv,
            "run {run}: the resumed watch sent {k:?} at {rv}, not after {}",
            watched.last_rv
        );
        watched.last_rv = rv;
        if k.0 == SENTINEL_NS {
            if k.1 == name {
                break;
            }
            continue;
        }
        missed += 1;
        if deleted {
            watched.objects.remove(&k);
        } else {
            watched.objects.insert(k, (rv, data));
        }
    }
    let differ: Vec<String> = watched
        .objects
        .keys()
        .chain(listed.objects.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|k| watched.objects.get(*k) != listed.objects.get(*k))
        .map(|k| {
            let state =
                |o: Option<&(u64, BTreeMap<String, String>)>| format!("{:?}", State::from(o.cloned()));
            format!(
                "{k:?}: watched {}, listed {}",
                state(watched.objects.get(k)),
                state(listed.objects.get(k))
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "run {run}: the resumed watch's events do not bring the watcher to the listed state:\n{}",
        differ.join("\n")
    );
    figures.watch_exact += 1;
    figures.watch_missed_events += missed;
    sentinel_rv
}
