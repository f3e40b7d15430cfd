//! kuttl suites: the `TestSuite`, test case directories, step files and their order, with kuttl's
//! semantics and defaults (`../shared/reference/fixture-runners.md` section 1).
//!
//! A suite: wait for `default/default` ServiceAccount (60 s), apply `crdDir` and `manifestDirs`, run the
//! suite `commands` (background ones live until the suite ends), then the test cases (direct
//! subdirectories) in parallel up to `parallel`, each in its own namespace (`kuttl-<adjective>-<noun>-xxxx`):
//! steps in index order, the rest skipped after a failure; then clean-up (created objects deleted, then the
//! namespace with a bounded wait) unless `skipDelete`.
//!
//! Deliberate differences from kuttl: assertions are evaluated on watch events rather than every second;
//! after creating a namespace the runner waits (up to 10 s) for its `default` ServiceAccount, so a Pod in
//! the first step does not race it (kuttl#162); commands get `KUBECONFIG` pointing at the cluster's
//! kubeconfig instead of a `./kubeconfig` written into the working directory; `.gotmpl.yaml` supports
//! `{{ .Namespace }}` only.

pub mod cel_assert;
pub mod config;
pub mod files;
pub mod step;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::SuiteContext;
use crate::engine::namespace::generate_name;
use crate::engine::subset::kuttl_subset;
use crate::engine::{Cluster, Selector, WriteOptions, command};
use crate::report::{Status, StepResult, SuiteResult, TestResult};
use config::TestSuite;
use step::{CommandEnv, Timeouts};

/// kuttl's defaults: `timeout: 30`, `parallel: 8`.
const DEFAULT_TIMEOUT: u64 = 30;
const DEFAULT_PARALLEL: usize = 8;
/// How long a new namespace's `default` ServiceAccount is waited for.
const SERVICE_ACCOUNT_WAIT: Duration = Duration::from_secs(10);

/// The settings of one suite run, resolved from the flags and the TestSuite.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The step timeout.
    pub timeout: Duration,
    /// Whether `timeout` was written (file or flag).
    pub timeout_set: bool,
    /// Tests at once.
    pub parallel: usize,
    /// Keep namespaces and objects.
    pub skip_delete: bool,
    /// A shared namespace.
    pub namespace: Option<String>,
    /// Files skipped in test directories.
    pub ignore: Vec<String>,
    /// No event dump.
    pub suppress_events: bool,
}

/// Resolves a suite's settings: explicit flags win over the TestSuite, then kuttl's defaults (pure).
pub fn settings(suite: &TestSuite, opts: &crate::RunOptions) -> Settings {
    let file_timeout = (suite.timeout > 0).then_some(suite.timeout as u64);
    let timeout = opts.timeout.or(file_timeout);
    Settings {
        timeout: Duration::from_secs(timeout.unwrap_or(DEFAULT_TIMEOUT)),
        timeout_set: timeout.is_some(),
        parallel: opts
            .parallel
            .or((suite.parallel > 0).then_some(suite.parallel as usize))
            .unwrap_or(DEFAULT_PARALLEL)
            .max(1),
        skip_delete: opts.skip_delete || suite.skip_delete,
        namespace: (!suite.namespace.is_empty()).then(|| suite.namespace.clone()),
        ignore: suite
            .ignore_files
            .clone()
            .unwrap_or_else(|| vec!["README*".into()]),
        suppress_events: suite.suppress.iter().any(|s| s.eq_ignore_ascii_case("events")),
    }
}

/// The TestSuite for a directory: `--config`, else the directory's `kuttl-test.yaml`, else
/// `./kuttl-test.yaml`, else defaults.
fn suite_config(opts: &crate::RunOptions, dir: &Path) -> Result<TestSuite, String> {
    let candidates = [
        opts.config.clone(),
        Some(dir.join("kuttl-test.yaml")),
        Some(PathBuf::from("kuttl-test.yaml")),
    ];
    match candidates.into_iter().flatten().find(|p| p.is_file()) {
        Some(p) => config::load(&p).map_err(|e| e.to_string()),
        None => {
            if let Some(c) = &opts.config {
                return Err(format!("{}: no such file", c.display()));
            }
            Ok(TestSuite::default())
        }
    }
}

/// The files of a directory as grouping entries.
fn entries(dir: &Path) -> std::io::Result<Vec<files::Entry>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let dir_files = if e.path().is_dir() {
            Some(
                std::fs::read_dir(e.path())?
                    .flatten()
                    .filter(|f| f.path().is_file())
                    .map(|f| f.file_name().to_string_lossy().into_owned())
                    .collect(),
            )
        } else {
            None
        };
        out.push(files::Entry { name, dir_files });
    }
    Ok(out)
}

/// Applies every `.yaml`/`.yml`/`.json` file under a directory, recursively (`crdDir`, `manifestDirs`);
/// objects without a namespace go to `default`.
async fn apply_dir(cluster: &Cluster, dir: &Path, timeout: Duration) -> Result<(), String> {
    let mut paths = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
            {
                paths.push(p);
            }
        }
    }
    paths.sort();
    let deadline = tokio::time::Instant::now() + timeout;
    for p in paths {
        for doc in config::read_documents(&p).map_err(|e| e.to_string())? {
            cluster
                .apply(&doc, "default", WriteOptions::default(), deadline)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Runs a kuttl test directory (its direct subdirectories are the tests), or, with `single`, one test case
/// directory.
pub async fn run_suite(ctx: Arc<SuiteContext>, dir: &Path, single: bool) -> SuiteResult {
    let start = jiff::Timestamp::now();
    let started = std::time::Instant::now();
    let name = dir.display().to_string();
    let fail = |e: String| SuiteResult {
        duration: started.elapsed(),
        ..SuiteResult::failed(&name, e)
    };
    let suite = match suite_config(&ctx.opts, dir) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let set = settings(&suite, &ctx.opts);
    let cluster = ctx.cluster.clone();
    // kuttl's waitForFunctionalCluster: the default ServiceAccount of `default`.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "default"}});
    if let Err(e) = cluster
        .assert_eventually(&sa, "default", crate::CLUSTER_READY_TIMEOUT, &kuttl_subset)
        .await
    {
        return fail(format!(
            "the cluster is not ready (no default/default ServiceAccount): {e}"
        ));
    }
    let base = std::env::current_dir().unwrap_or_default();
    if !suite.crd_dir.is_empty()
        && let Err(e) = apply_dir(&cluster, &base.join(&suite.crd_dir), set.timeout).await
    {
        return fail(format!("crdDir: {e}"));
    }
    for m in &suite.manifest_dirs {
        if let Err(e) = apply_dir(&cluster, &base.join(m), set.timeout).await {
            return fail(format!("manifestDirs: {e}"));
        }
    }
    // Suite commands: NAMESPACE=default; a timeout only if the file sets one; background ones end with the suite.
    let env = CommandEnv {
        namespace: "default".into(),
        kubeconfig: cluster.kubeconfig().map(Path::to_path_buf),
        cwd: base,
    };
    let suite_timeout = (suite.timeout > 0).then(|| Duration::from_secs(suite.timeout as u64));
    let mut background = Vec::new();
    for c in &suite.commands {
        if c.background {
            match step::process(c, &env, suite_timeout)
                .and_then(|p| command::spawn_background(&p).map_err(|e| e.to_string()))
            {
                Ok(b) => background.push(b),
                Err(e) => return fail(e),
            }
        } else if let Err(e) = step::run_command(c, &env, suite_timeout, &mut Vec::new()).await {
            return fail(e);
        }
    }
    let cases: Vec<PathBuf> = if single {
        vec![dir.to_path_buf()]
    } else {
        let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect(),
            Err(e) => return fail(format!("{name}: {e}")),
        };
        v.sort();
        v
    };
    let pattern = ctx.opts.test.as_deref().and_then(|t| regex::Regex::new(t).ok());
    let cases: Vec<PathBuf> = cases
        .into_iter()
        .filter(|c| pattern.as_ref().is_none_or(|re| re.is_match(&case_name(c))))
        .collect();
    let sem = Arc::new(Semaphore::new(set.parallel));
    let set = Arc::new(set);
    let mut tasks = Vec::new();
    for case in cases {
        let (ctx, sem, set, suite_name) = (ctx.clone(), sem.clone(), set.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.expect("semaphore");
            let r = if ctx.should_stop() {
                skipped(&case)
            } else {
                run_case(&ctx, &set, &case).await
            };
            if r.status == Status::Failed {
                ctx.mark_failed();
            }
            ctx.progress.test_done(&suite_name, &r);
            r
        }));
    }
    let mut tests = Vec::new();
    for t in tasks {
        match t.await {
            Ok(r) => tests.push(r),
            Err(e) => return fail(format!("a test task ended abnormally: {e}")),
        }
    }
    drop(background);
    tests.sort_by(|a, b| a.name.cmp(&b.name));
    SuiteResult {
        name,
        tests,
        start,
        duration: started.elapsed(),
        error: None,
    }
}

fn case_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

fn skipped(dir: &Path) -> TestResult {
    TestResult {
        name: case_name(dir),
        status: Status::Skipped,
        start: jiff::Timestamp::now(),
        duration: Duration::ZERO,
        namespace: None,
        steps: vec![],
        message: Some("skipped after a failure (--fail-fast)".into()),
        failure: None,
    }
}

/// Adds lines (stamped by [`step::at`], or now) to a test's log as kuttl prints them:
/// `HH:MM:SS | <case>/<index>-<step> | <message>`.
fn stamp(log: &mut Vec<String>, case: &str, step: &str, lines: Vec<String>) {
    for l in lines {
        let l = if l.get(8..11) == Some(" | ") {
            l
        } else {
            step::at(l)
        };
        let (time, msg) = l.split_at(8);
        log.push(format!("{time} | {case}/{step} | {}", &msg[3..]));
    }
}

/// Runs one test case: namespace, steps, clean-up.
async fn run_case(ctx: &SuiteContext, set: &Settings, dir: &Path) -> TestResult {
    let cluster = &ctx.cluster;
    let name = case_name(dir);
    let start = jiff::Timestamp::now();
    let started = std::time::Instant::now();
    let mut log: Vec<String> = Vec::new();
    let mut steps: Vec<StepResult> = Vec::new();
    let mut failed: Option<(String, String)> = None;
    // setup: the namespace.
    let ns = set
        .namespace
        .clone()
        .unwrap_or_else(|| generate_name("kuttl", true));
    let setup_start = jiff::Timestamp::now();
    let setup_t = std::time::Instant::now();
    stamp(&mut log, &name, "", vec![format!("Creating namespace {ns:?}")]);
    let created_ns = match cluster.create_namespace(&ns).await {
        Ok(created) => {
            let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
            if cluster
                .assert_eventually(&sa, &ns, SERVICE_ACCOUNT_WAIT, &kuttl_subset)
                .await
                .is_err()
            {
                stamp(
                    &mut log,
                    &name,
                    "",
                    vec!["the namespace's default ServiceAccount did not appear".into()],
                );
            }
            Some(created)
        }
        Err(e) => {
            failed = Some(("failed in setup".into(), e.to_string()));
            None
        }
    };
    // Step files.
    let loaded: Result<Vec<step::Step>, String> = if failed.is_some() {
        Ok(vec![])
    } else {
        entries(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))
            .and_then(|es| {
                let (groups, skipped) = files::group(dir, &es, &set.ignore);
                stamp(&mut log, &name, "", skipped);
                groups
                    .iter()
                    .map(|g| step::load(dir, g, &ns, &ctx.opts.test_run_labels))
                    .collect()
            })
    };
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            failed = Some(("failed in setup".into(), e));
            vec![]
        }
    };
    steps.push(StepResult {
        name: "setup".into(),
        status: if failed.is_some() {
            Status::Failed
        } else {
            Status::Passed
        },
        start: setup_start,
        duration: setup_t.elapsed(),
        assertions: 0,
        message: failed.as_ref().map(|f| f.0.clone()),
        failure: failed.as_ref().map(|f| f.1.clone()),
    });
    let env = CommandEnv {
        namespace: ns.clone(),
        kubeconfig: cluster.kubeconfig().map(Path::to_path_buf),
        cwd: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
    };
    let timeouts_for = |s: &step::Step| Timeouts {
        suite: set.timeout,
        step: if s.assert.timeout > 0 {
            Duration::from_secs(s.assert.timeout as u64)
        } else {
            set.timeout
        },
    };
    let mut created: Vec<Value> = Vec::new();
    for s in &loaded {
        if failed.is_some() {
            break;
        }
        let label = s.label();
        let st = jiff::Timestamp::now();
        let t = std::time::Instant::now();
        let mut lines = vec![step::at(format!("starting test step {label}"))];
        let out = step::run(cluster, s, &env, timeouts_for(s), &mut created, &mut lines).await;
        let ok = out.errors.is_empty();
        lines.push(format!(
            "test step {} {label}",
            if ok { "completed" } else { "failed" }
        ));
        stamp(&mut log, &name, &label, lines);
        let message = format!("failed in step {label}");
        if !ok {
            failed = Some((message.clone(), out.errors.join("\n")));
        }
        steps.push(StepResult {
            name: format!("step {label}"),
            status: if ok { Status::Passed } else { Status::Failed },
            start: st,
            duration: t.elapsed(),
            assertions: out.assertions,
            message: (!ok).then_some(message),
            failure: (!ok).then(|| out.errors.join("\n")),
        });
    }
    // The failure report: events and failing pods' logs.
    let mut report = String::new();
    if failed.is_some() && created_ns.is_some() && !set.suppress_events {
        report = cluster.failure_report(&ns).await;
    }
    // Clean-up: created objects (no wait), then the namespace if this case created it.
    if !set.skip_delete {
        for o in created.iter().rev() {
            if let Ok(sel) = Selector::of_object(o) {
                let _ = cluster.delete(&sel, &ns, None, None).await;
            }
        }
        if created_ns == Some(true)
            && let Err(e) = cluster.delete_namespace(&ns, set.timeout).await
        {
            stamp(&mut log, &name, "", vec![e.to_string()]);
            if failed.is_none() {
                failed = Some(("failed in cleanup".into(), e.to_string()));
            }
        }
    }
    let status = if failed.is_some() {
        Status::Failed
    } else {
        Status::Passed
    };
    let failure = failed.as_ref().map(|(_, errors)| {
        let mut text = format!("namespace: {ns}\n{errors}\n");
        if !report.is_empty() {
            text.push_str(&report);
        }
        text.push_str("log:\n");
        for l in &log {
            text.push_str(&format!("  {l}\n"));
        }
        text
    });
    TestResult {
        name,
        status,
        start,
        duration: started.elapsed(),
        namespace: Some(ns),
        steps,
        message: failed.map(|f| f.0),
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_read_as_kuttls() {
        let mut log = Vec::new();
        stamp(
            &mut log,
            "pod",
            "0-install",
            vec!["12:00:01 | Pod:ns/p created".into(), "é".into()],
        );
        assert_eq!(log[0], "12:00:01 | pod/0-install | Pod:ns/p created");
        assert!(
            log[1].ends_with(" | pod/0-install | é") && log[1].len() == 8 + " | pod/0-install | é".len(),
            "{}",
            log[1]
        );
    }

    #[test]
    fn flags_win_over_the_test_suite_then_kuttl_defaults() {
        let suite = TestSuite {
            timeout: 120,
            parallel: 4,
            ..Default::default()
        };
        let s = settings(&suite, &crate::RunOptions::default());
        assert_eq!(
            (s.timeout, s.parallel, s.skip_delete),
            (Duration::from_secs(120), 4, false)
        );
        assert_eq!(s.ignore, vec!["README*".to_string()]);
        let opts = crate::RunOptions {
            timeout: Some(5),
            parallel: Some(2),
            skip_delete: true,
            ..Default::default()
        };
        let s = settings(&suite, &opts);
        assert_eq!(
            (s.timeout, s.parallel, s.skip_delete),
            (Duration::from_secs(5), 2, true)
        );
        let s = settings(&TestSuite::default(), &crate::RunOptions::default());
        assert_eq!(
            (s.timeout, s.parallel, s.timeout_set),
            (Duration::from_secs(30), 8, false)
        );
        let s = settings(
            &TestSuite {
                ignore_files: Some(vec![]),
                ..Default::default()
            },
            &crate::RunOptions::default(),
        );
        assert!(s.ignore.is_empty(), "setting ignoreFiles replaces the default");
    }
}
