//! Running chainsaw tests (reference 2.4): steps in order, each `try` then (on failure) `catch` (the
//! configuration's, the test's, the step's), then `finally`; the objects a step created and its `cleanup`
//! deferred to the end of the test, last step first, objects in reverse creation order; then the test
//! namespace, if the test created it. Tests with `concurrent: false` first, one by one, then the others in
//! parallel up to `parallel`; `failFast` skips tests not yet started after a failure.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::bindings::Bindings;
use super::config::{ResolvedTimeouts, Settings, load_settings};
use super::discovery::{Discovered, discover};
use super::model::{Operation, Scenario, Step, Test};
use super::ops::{self, OpCtx, bind_all};
use super::output::{Log, summary};
use super::template::template;
use crate::engine::{Cluster, Selector};
use crate::report::{RunResult, Status, StepResult, SuiteResult, TestResult};

/// What `kubeling test` passes for chainsaw suites (command-line flags win over the Configuration).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub dirs: Vec<PathBuf>,
    pub settings: Settings,
    /// `--test`: a regex on test names.
    pub test_regex: Option<String>,
    /// `$values`.
    pub values: Value,
    pub quiet: bool,
    /// The suite name progress lines use (`<suite>/<test>`); the test's directory when unset.
    pub label: Option<String>,
}

/// One test to run: a discovered test and its scenario.
#[derive(Clone)]
struct Job {
    suite: usize,
    discovered: Discovered,
    scenario: Option<(usize, Scenario)>,
}

/// `kubeling test`'s entry for a chainsaw suite directory: the Configuration is `--config` when it is one,
/// else the suite's own `.chainsaw.yaml`, else `./.chainsaw.yaml`, else chainsaw's defaults; then the
/// command line's `--parallel`, `--timeout` (all six timeouts, as `chainsaw migrate kuttl config` maps
/// kuttl's), `--skip-delete`, `--fail-fast`, `--test` win.
pub async fn run_suite(ctx: Arc<crate::SuiteContext>, dir: &Path) -> SuiteResult {
    let suite_name = dir.display().to_string();
    let settings = match suite_settings(&ctx.opts, dir) {
        Ok(s) => s,
        Err(e) => return SuiteResult::failed(&suite_name, e),
    };
    let opts = Options {
        dirs: vec![dir.to_path_buf()],
        settings,
        test_regex: ctx.opts.test.clone(),
        values: Value::Null,
        quiet: false,
        label: Some(suite_name.clone()),
    };
    let run = run_with(ctx.cluster.clone(), opts, Some(ctx.clone())).await;
    let mut suite = SuiteResult {
        name: suite_name,
        tests: vec![],
        start: jiff::Timestamp::now() - run.duration,
        duration: run.duration,
        error: None,
    };
    for s in run.suites {
        if suite.error.is_none() {
            suite.error = s.error;
        }
        suite.tests.extend(s.tests);
    }
    suite.tests.sort_by(|a, b| a.name.cmp(&b.name));
    suite
}

/// The settings of a suite directory (see [`run_suite`]).
pub fn suite_settings(opts: &crate::RunOptions, dir: &Path) -> Result<Settings, String> {
    let own = dir.join(".chainsaw.yaml");
    let mut settings = match &opts.config {
        Some(c) if is_configuration(c) => load_settings(Some(c), Path::new("."))?,
        _ if own.is_file() => load_settings(Some(&own), dir)?,
        _ => load_settings(None, Path::new("."))?,
    };
    if let Some(p) = opts.parallel {
        settings.parallel = Some(p);
    }
    if let Some(t) = opts.timeout {
        let d = Duration::from_secs(t);
        settings.timeouts = ResolvedTimeouts {
            apply: d,
            assert: d,
            cleanup: d,
            delete: d,
            error: d,
            exec: d,
        };
    }
    settings.skip_delete |= opts.skip_delete;
    settings.fail_fast |= opts.fail_fast;
    Ok(settings)
}

fn is_configuration(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_norway::from_str::<Value>(&t).ok())
        .is_some_and(|v| v.get("kind").and_then(Value::as_str) == Some("Configuration"))
}

/// Runs the chainsaw tests under `opts.dirs`; prints chainsaw's lines and summary.
pub async fn run(cluster: Arc<Cluster>, opts: Options) -> RunResult {
    run_with(cluster, opts, None).await
}

async fn run_with(cluster: Arc<Cluster>, opts: Options, ctx: Option<Arc<crate::SuiteContext>>) -> RunResult {
    let started = Instant::now();
    let start = jiff::Timestamp::now();
    let log = Arc::new(Log::new(opts.quiet));
    if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
        let reader = ops::Reader {
            cluster: cluster.clone(),
            handle: tokio::runtime::Handle::current(),
        };
        super::functions::set_global_cluster(Some(Arc::new(reader)));
    }
    let settings = Arc::new(opts.settings.clone());
    let found = match discover(&opts.dirs, &settings.test_file) {
        Ok(f) => f,
        Err(e) => {
            log.text(&format!("Error: {e}"));
            log.text(&summary(0, 0, 0, true));
            return RunResult {
                name: "chainsaw-report".into(),
                suites: vec![SuiteResult::failed(&display_dirs(&opts.dirs), e)],
                duration: started.elapsed(),
            };
        }
    };
    let filters = [opts.test_regex.as_deref(), settings.include_test_regex.as_deref()];
    let include: Vec<regex::Regex> = filters
        .iter()
        .flatten()
        .filter_map(|r| regex::Regex::new(r).ok())
        .collect();
    let exclude = settings
        .exclude_test_regex
        .as_deref()
        .and_then(|r| regex::Regex::new(r).ok());
    let mut suite_names: Vec<String> = Vec::new();
    let mut jobs: Vec<(bool, Job)> = Vec::new();
    for d in found {
        let name = d.name();
        if include.iter().any(|r| !r.is_match(&name)) || exclude.as_ref().is_some_and(|r| r.is_match(&name)) {
            continue;
        }
        let suite_name = d.base_path.display().to_string();
        let suite = match suite_names.iter().position(|s| *s == suite_name) {
            Some(i) => i,
            None => {
                suite_names.push(suite_name);
                suite_names.len() - 1
            }
        };
        let concurrent = d
            .result
            .as_ref()
            .map(|t| t.spec.concurrent.unwrap_or(true))
            .unwrap_or(true);
        let scenarios: Vec<Option<(usize, Scenario)>> = match &d.result {
            Ok(t) if !t.spec.scenarios.is_empty() => t
                .spec
                .scenarios
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, s)| Some((i + 1, s)))
                .collect(),
            _ => vec![None],
        };
        for scenario in scenarios {
            jobs.push((
                concurrent,
                Job {
                    suite,
                    discovered: d.clone(),
                    scenario,
                },
            ));
        }
    }
    let failed = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Shared {
        cluster,
        settings: settings.clone(),
        log: log.clone(),
        values: opts.values.clone(),
        failed: failed.clone(),
        ctx,
        label: opts.label.clone(),
    });
    let mut results: Vec<(usize, TestResult)> = Vec::new();
    let mut id = 0usize;
    for (_, job) in jobs.iter().filter(|(c, _)| !c) {
        id += 1;
        results.push((job.suite, run_job(shared.clone(), job.clone(), id).await));
    }
    let parallel = settings
        .parallel
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
        .max(1);
    let sem = Arc::new(tokio::sync::Semaphore::new(parallel));
    let mut set = tokio::task::JoinSet::new();
    for (_, job) in jobs.into_iter().filter(|(c, _)| *c) {
        id += 1;
        let (shared, sem) = (shared.clone(), sem.clone());
        set.spawn(async move {
            let _permit = sem.acquire_owned().await;
            let suite = job.suite;
            (suite, run_job(shared, job, id).await)
        });
    }
    while let Some(r) = set.join_next().await {
        match r {
            Ok(r) => results.push(r),
            Err(e) => log.text(&format!("Error: a test task failed: {e}")),
        }
    }
    let mut suites: Vec<SuiteResult> = suite_names
        .iter()
        .map(|n| SuiteResult {
            name: n.clone(),
            tests: vec![],
            start,
            duration: Duration::ZERO,
            error: None,
        })
        .collect();
    for (s, t) in results {
        suites[s].tests.push(t);
    }
    for s in &mut suites {
        s.tests.sort_by(|a, b| a.name.cmp(&b.name));
        s.duration = s.tests.iter().map(|t| t.duration).max().unwrap_or_default();
    }
    let run = RunResult {
        name: settings
            .report
            .as_ref()
            .map(|r| r.name.clone())
            .unwrap_or_else(|| "chainsaw-report".into()),
        suites,
        duration: started.elapsed(),
    };
    let (p, f, s) = run.counts();
    // Under `kubeling test` the run's summary prints the failures.
    for suite in run.suites.iter().filter(|_| shared.ctx.is_none()) {
        for t in suite.tests.iter().filter(|t| t.status == Status::Failed) {
            log.text(&format!(
                "=== ERROR {}\n{}",
                t.name,
                t.failure.as_deref().unwrap_or("failed").trim_end()
            ));
        }
    }
    log.text(&summary(p, f, s, false));
    run
}

fn display_dirs(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

struct Shared {
    cluster: Arc<Cluster>,
    settings: Arc<Settings>,
    log: Arc<Log>,
    values: Value,
    failed: Arc<AtomicBool>,
    /// `kubeling test`'s run-wide context (progress lines, run-wide fail-fast).
    ctx: Option<Arc<crate::SuiteContext>>,
    label: Option<String>,
}

impl Shared {
    fn should_stop(&self) -> bool {
        (self.settings.fail_fast && self.failed.load(Ordering::SeqCst))
            || self.ctx.as_ref().is_some_and(|c| c.should_stop())
    }

    fn mark_failed(&self) {
        self.failed.store(true, Ordering::SeqCst);
        if let Some(c) = &self.ctx {
            c.mark_failed();
        }
    }

    fn done(&self, suite: &str, t: &TestResult) {
        if let Some(c) = &self.ctx {
            c.progress.test_done(suite, t);
        }
    }
}

async fn run_job(shared: Arc<Shared>, job: Job, id: usize) -> TestResult {
    let suite = shared
        .label
        .clone()
        .unwrap_or_else(|| job.discovered.base_path.display().to_string());
    let t = run_job_inner(shared.clone(), job, id).await;
    if t.status == Status::Failed {
        shared.mark_failed();
    }
    shared.done(&suite, &t);
    t
}

async fn run_job_inner(shared: Arc<Shared>, job: Job, id: usize) -> TestResult {
    let started = Instant::now();
    let start = jiff::Timestamp::now();
    let name = match &job.scenario {
        Some((i, s)) => format!(
            "{}[{}]",
            job.discovered.name(),
            s.name.clone().unwrap_or_else(|| i.to_string())
        ),
        None => job.discovered.name(),
    };
    let mut result = TestResult {
        name: name.clone(),
        status: Status::Passed,
        start,
        duration: Duration::ZERO,
        namespace: None,
        steps: vec![],
        message: None,
        failure: None,
    };
    let test = match &job.discovered.result {
        Ok(t) => t.clone(),
        Err(e) => {
            result.status = Status::Failed;
            result.message = Some("the test could not be loaded".into());
            result.failure = Some(e.clone());
            shared.log.op(&name, "@load", "load", "ERROR", e);
            return result;
        }
    };
    if test.spec.skip == Some(true) || shared.should_stop() {
        result.status = Status::Skipped;
        shared.log.op(&name, "@skip", "test", "SKIP", "");
        return result;
    }
    let runner = TestRun {
        shared: shared.clone(),
        test: &test,
        name: name.clone(),
        base: job.discovered.base_path.clone(),
    };
    let outcome = runner.run(id, job.scenario.as_ref().map(|(i, s)| (*i, s))).await;
    result.namespace = outcome.namespace;
    result.steps = outcome.steps;
    if !outcome.errors.is_empty() {
        result.status = Status::Failed;
        result.message = Some(outcome.errors[0].lines().next().unwrap_or("failed").to_string());
        let mut failure = outcome.errors.join("\n");
        if let Some(r) = outcome.report {
            failure.push_str("\n\n");
            failure.push_str(&r);
        }
        result.failure = Some(failure);
    }
    result.duration = started.elapsed();
    result
}

struct TestRun<'a> {
    shared: Arc<Shared>,
    test: &'a Test,
    name: String,
    base: PathBuf,
}

#[derive(Default)]
struct TestOutcome {
    namespace: Option<String>,
    steps: Vec<StepResult>,
    errors: Vec<String>,
    /// The namespace's events and failing pods' logs, for a failed test.
    report: Option<String>,
}

/// What a step leaves for the end of the test.
struct Deferred {
    step: String,
    timeouts: ResolvedTimeouts,
    bindings: Bindings,
    created: Vec<Value>,
    cleanup: Vec<Operation>,
    templating: bool,
    propagation: String,
}

fn step_name(step: &Step, i: usize) -> String {
    step.name.clone().unwrap_or_else(|| format!("step-{}", i + 1))
}

impl TestRun<'_> {
    fn log(&self) -> &Log {
        &self.shared.log
    }

    async fn run(&self, id: usize, scenario: Option<(usize, &Scenario)>) -> TestOutcome {
        let mut out = TestOutcome::default();
        let spec = &self.test.spec;
        let settings = &self.shared.settings;
        let timeouts = match settings.timeouts.overlay(&spec.timeouts) {
            Ok(t) => t,
            Err(e) => {
                out.errors.push(format!("spec.timeouts: {e}"));
                return out;
            }
        };
        // A literal `metadata.name` in the namespace template names the namespace.
        let template_name = spec
            .namespace_template
            .as_ref()
            .or(settings.namespace_template.as_ref())
            .and_then(|t| t.pointer("/metadata/name"))
            .and_then(Value::as_str)
            .filter(|n| super::expr::parse(n).is_none())
            .map(str::to_string);
        let namespace = spec
            .namespace
            .clone()
            .or(template_name)
            .or_else(|| settings.namespace.clone())
            .unwrap_or_else(|| super::names::namespace_name(rand::random()));
        out.namespace = Some(namespace.clone());
        let base = Bindings::new()
            .with("namespace", Value::from(namespace.clone()))
            .with("values", self.shared.values.clone())
            .with("client", json!({}))
            .with("config", json!({}))
            .with(
                "test",
                json!({"id": id, "scenarioId": scenario.map(|(i, _)| i).unwrap_or(0), "metadata": {"name": self.test.metadata.name}}),
            );
        let bindings = match scenario
            .map(|(_, s)| bind_all(&base, &s.bindings))
            .unwrap_or(Ok(base))
            .and_then(|b| bind_all(&b, &spec.bindings))
        {
            Ok(b) => b,
            Err(e) => {
                out.errors.push(e);
                return out;
            }
        };
        let templating = spec.template.unwrap_or(settings.templating);
        let ns_template = spec
            .namespace_template
            .clone()
            .or_else(|| settings.namespace_template.clone());
        let created_ns = match self
            .ensure_namespace(&namespace, ns_template.as_ref(), &bindings, timeouts.apply)
            .await
        {
            Ok(c) => c,
            Err(e) => {
                out.errors.push(e);
                return out;
            }
        };
        let skip_delete = spec.skip_delete.unwrap_or(settings.skip_delete);
        let propagation = spec
            .deletion_propagation_policy
            .clone()
            .unwrap_or_else(|| settings.propagation.clone());
        let mut deferred: Vec<Deferred> = Vec::new();
        let mut catch_all: Vec<Operation> = settings.catch.clone();
        catch_all.extend(spec.catch.iter().cloned());
        for (i, step) in spec.steps.iter().enumerate() {
            let sname = step_name(step, i);
            let sstart = jiff::Timestamp::now();
            let sclock = Instant::now();
            self.log().op(&self.name, &sname, "step", "BEGIN", "");
            let mut errors: Vec<String> = Vec::new();
            let step_timeouts = match timeouts.overlay(&step.timeouts) {
                Ok(t) => t,
                Err(e) => {
                    out.errors.push(format!("{sname}: timeouts: {e}"));
                    break;
                }
            };
            let step_bindings = match bind_all(&bindings.with("step", json!({"id": i + 1})), &step.bindings) {
                Ok(b) => b,
                Err(e) => {
                    out.errors.push(format!("{sname}: {e}"));
                    break;
                }
            };
            let step_templating = step.template.unwrap_or(templating);
            let step_propagation = step
                .deletion_propagation_policy
                .clone()
                .unwrap_or_else(|| propagation.clone());
            let mut d = Deferred {
                step: sname.clone(),
                timeouts: step_timeouts,
                bindings: step_bindings.clone(),
                created: vec![],
                cleanup: step.cleanup.clone(),
                templating: step_templating,
                propagation: step_propagation.clone(),
            };
            let mut b = step_bindings.clone();
            for (o, op) in step.try_.iter().enumerate() {
                let res = self
                    .operation(
                        op,
                        &namespace,
                        &sname,
                        step_timeouts,
                        step_templating,
                        &step_propagation,
                        b.clone(),
                        o + 1,
                    )
                    .await;
                match res {
                    Ok(outcome) => {
                        d.created.extend(outcome.created);
                        for (k, v) in outcome.outputs {
                            b = b.with(k, v);
                        }
                    }
                    Err((created, e)) => {
                        d.created.extend(created);
                        errors.push(format!("{sname}: {e}"));
                        if !op.continue_on_error.unwrap_or(false) {
                            break;
                        }
                    }
                }
            }
            let failed_so_far = !errors.is_empty() || !out.errors.is_empty();
            if failed_so_far {
                let mut catch = catch_all.clone();
                catch.extend(step.catch.iter().cloned());
                for (o, op) in catch.iter().enumerate() {
                    self.log().op(&self.name, &sname, "catch", "RUN", "");
                    if let Err((_, e)) = self
                        .operation(
                            op,
                            &namespace,
                            &sname,
                            step_timeouts,
                            step_templating,
                            &step_propagation,
                            b.clone(),
                            o + 1,
                        )
                        .await
                    {
                        errors.push(format!("{sname}: catch: {e}"));
                    }
                }
            }
            for (o, op) in step.finally.iter().enumerate() {
                if let Err((_, e)) = self
                    .operation(
                        op,
                        &namespace,
                        &sname,
                        step_timeouts,
                        step_templating,
                        &step_propagation,
                        b.clone(),
                        o + 1,
                    )
                    .await
                {
                    errors.push(format!("{sname}: finally: {e}"));
                }
            }
            deferred.push(d);
            let status = if errors.is_empty() {
                Status::Passed
            } else {
                Status::Failed
            };
            self.log().op(&self.name, &sname, "step", "END", "");
            out.steps.push(StepResult {
                name: sname.clone(),
                status,
                start: sstart,
                duration: sclock.elapsed(),
                assertions: step
                    .try_
                    .iter()
                    .filter(|o| o.assert.is_some() || o.error.is_some())
                    .count(),
                message: errors
                    .first()
                    .map(|e| e.lines().next().unwrap_or_default().to_string()),
                failure: (!errors.is_empty()).then(|| errors.join("\n")),
            });
            out.errors.extend(errors);
            if !out.errors.is_empty() {
                break;
            }
        }
        if !out.errors.is_empty() {
            out.report = Some(self.shared.cluster.failure_report(&namespace).await);
        }
        if !skip_delete {
            let cstart = jiff::Timestamp::now();
            let cclock = Instant::now();
            let mut cleanup_errors = Vec::new();
            for d in deferred.iter().rev() {
                if let Some(delay) = settings.delay_before_cleanup {
                    tokio::time::sleep(delay).await;
                }
                for obj in d.created.iter().rev() {
                    let Ok(sel) = Selector::of_object(obj) else {
                        continue;
                    };
                    let what = ops::describe(obj, &namespace);
                    self.log().op(&self.name, &d.step, "cleanup", "DELETE", &what);
                    if let Err(e) = ops::delete_selected(
                        &self.shared.cluster,
                        &sel,
                        &namespace,
                        &d.propagation,
                        d.timeouts.cleanup,
                    )
                    .await
                    {
                        cleanup_errors.push(format!("cleanup ({}): delete {what}: {e}", d.step));
                    }
                }
                let cleanup_timeouts = ResolvedTimeouts {
                    exec: d.timeouts.cleanup.max(d.timeouts.exec),
                    ..d.timeouts
                };
                for (o, op) in d.cleanup.iter().enumerate() {
                    if let Err((_, e)) = self
                        .operation(
                            op,
                            &namespace,
                            &d.step,
                            cleanup_timeouts,
                            d.templating,
                            &d.propagation,
                            d.bindings.clone(),
                            o + 1,
                        )
                        .await
                    {
                        cleanup_errors.push(format!("cleanup ({}): {e}", d.step));
                    }
                }
            }
            if created_ns {
                let fast = spec
                    .fast_namespace_deletion
                    .unwrap_or(settings.fast_namespace_deletion);
                self.log().op(
                    &self.name,
                    "@cleanup",
                    "cleanup",
                    "DELETE",
                    &format!("v1/Namespace @ {namespace}"),
                );
                let wait = if fast { Duration::ZERO } else { timeouts.cleanup };
                if let Err(e) = self.shared.cluster.delete_namespace(&namespace, wait).await
                    && !fast
                {
                    cleanup_errors.push(format!("@cleanup: {e}"));
                }
            }
            if !cleanup_errors.is_empty() {
                out.steps.push(StepResult {
                    name: "@cleanup".into(),
                    status: Status::Failed,
                    start: cstart,
                    duration: cclock.elapsed(),
                    assertions: 0,
                    message: cleanup_errors.first().cloned(),
                    failure: Some(cleanup_errors.join("\n")),
                });
                out.errors.extend(cleanup_errors);
            }
        }
        out
    }

    /// GET, and POST only when NotFound (chainsaw); `namespaceTemplate` merged in. `Ok(true)`: created here.
    async fn ensure_namespace(
        &self,
        ns: &str,
        tmpl: Option<&Value>,
        b: &Bindings,
        timeout: Duration,
    ) -> Result<bool, String> {
        let sel = Selector {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            namespace: None,
            name: Some(ns.into()),
            labels: Default::default(),
        };
        if self
            .shared
            .cluster
            .get(&sel, ns)
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Ok(false);
        }
        let mut obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        if let Some(t) = tmpl {
            let t = template(t, b)?;
            merge(&mut obj, &t);
            obj["metadata"]["name"] = Value::from(ns);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.shared.cluster.create(&obj, ns, Default::default()).await {
                Ok(_) => return Ok(true),
                Err(e) if Instant::now() >= deadline => return Err(format!("creating namespace {ns}: {e}")),
                Err(_) => tokio::time::sleep(ops::POLL).await,
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn operation(
        &self,
        op: &Operation,
        namespace: &str,
        step: &str,
        timeouts: ResolvedTimeouts,
        templating: bool,
        propagation: &str,
        bindings: Bindings,
        index: usize,
    ) -> Result<ops::Outcome, (Vec<Value>, String)> {
        let action = op.action().map_err(|e| (vec![], e))?;
        let bindings = bindings.with("operation", json!({"id": index}));
        let ctx = OpCtx {
            cluster: &self.shared.cluster,
            base_path: &self.base,
            namespace,
            test: &self.name,
            step,
            timeouts,
            templating,
            propagation,
            bindings,
            log: &self.shared.log,
        };
        ops::run(action, &ctx).await.map_err(|e| (vec![], e))
    }
}

/// A JSON merge of `patch` into `target` (objects merged key by key, anything else replaced).
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_templates_merge_into_the_namespace() {
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
        merge(
            &mut ns,
            &json!({"metadata": {"labels": {"x": "y"}, "annotations": {"k": "v"}}}),
        );
        assert_eq!(
            ns,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "y"}, "annotations": {"k": "v"}}})
        );
    }
}
