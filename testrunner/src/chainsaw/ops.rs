//! Running one operation against the cluster, with chainsaw's semantics (reference 2.3): resources from
//! `file` (relative to the test directory, one action per document, each with the full timeout) or inline
//! `resource`; apply/create/patch/update retried every 50 ms on any error until the timeout, `expect`
//! checks on `$error`; assert/error evaluated by the engine on every watch event with the assertion-tree
//! matcher; scripts and commands with `NAMESPACE`, `KUBECONFIG` and `check`; collectors through kubectl.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::PropagationPolicy;
use serde_json::Value;
use tokio::time::Instant;

use super::assertion::{AssertError, assert_tree};
use super::bindings::Bindings;
use super::config::ResolvedTimeouts;
use super::discovery::read_documents;
use super::functions::{ClusterReader, with_cluster};
use super::model::{
    Action, Binding, CheckAction, CollectAction, CommandAction, DeleteAction, EnvVar, Expectation, Output,
    ResourceAction, ScriptAction, WaitAction, parse_duration,
};
use super::output::Log;
use super::template::{template, template_lookup, template_string};
use crate::engine::command::{self, Process, Program, Unknown};
use crate::engine::{Applied, Cluster, FieldDiff, Selector, WriteOptions};

/// chainsaw's poll interval for apply retries, non-resource assertions and waits.
pub const POLL: Duration = Duration::from_millis(50);

/// What an operation runs with.
pub struct OpCtx<'a> {
    pub cluster: &'a Arc<Cluster>,
    pub base_path: &'a Path,
    pub namespace: &'a str,
    pub test: &'a str,
    pub step: &'a str,
    pub timeouts: ResolvedTimeouts,
    pub templating: bool,
    pub propagation: &'a str,
    pub bindings: Bindings,
    pub log: &'a Log,
}

/// What an operation left: bindings for the rest of the step, objects to delete at clean-up.
#[derive(Default)]
pub struct Outcome {
    pub outputs: Vec<(String, Value)>,
    pub created: Vec<Value>,
}

/// Binds `bindings` in order over `base`, each value templated with the bindings before it.
pub fn bind_all(base: &Bindings, bindings: &[Binding]) -> Result<Bindings, String> {
    let mut b = base.clone();
    for binding in bindings {
        let name =
            template_string(&binding.name, &b).map_err(|e| format!("binding {}: {e}", binding.name))?;
        let v = template(&binding.value, &b).map_err(|e| format!("binding {name}: {e}"))?;
        b = b.with(name, v);
    }
    Ok(b)
}

fn timeout_of(own: &Option<String>, default: Duration) -> Result<Duration, String> {
    own.as_deref()
        .map(parse_duration)
        .transpose()
        .map(|d| d.unwrap_or(default))
}

/// The resources of an action: the documents of `file` (a path relative to the test dir or a glob on
/// file names), else `resource`; `kind: List` expanded.
fn resources(
    ctx: &OpCtx<'_>,
    file: &Option<String>,
    resource: &Option<Value>,
    b: &Bindings,
) -> Result<Vec<Value>, String> {
    let docs = match (file, resource) {
        (Some(f), _) => {
            let f = template_string(f, b)?;
            if f.starts_with("http://") || f.starts_with("https://") {
                return Err(format!("file {f}: URLs are not supported"));
            }
            let mut docs = Vec::new();
            for path in expand_glob(ctx.base_path, &f)? {
                docs.extend(read_documents(&path)?);
            }
            docs
        }
        (None, Some(r)) => vec![r.clone()],
        (None, None) => return Err("the operation has neither file nor resource".to_string()),
    };
    let mut out = Vec::new();
    for d in docs {
        if d.get("kind").and_then(Value::as_str) == Some("List") {
            out.extend(
                d.get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
        } else {
            out.push(d);
        }
    }
    Ok(out)
}

/// A path relative to `base`; `*` and `?` in the file name part match names in its directory (sorted).
fn expand_glob(base: &Path, file: &str) -> Result<Vec<PathBuf>, String> {
    let path = base.join(file);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains(['*', '?']) {
        if !path.exists() {
            return Err(format!("file {} does not exist", path.display()));
        }
        return Ok(vec![path]);
    }
    let dir = path.parent().unwrap_or(base);
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| super::functions::wildcard_match(&name, &e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!("no file matches {}", path.display()));
    }
    Ok(found)
}

/// `Kind/name` of an object for log lines (`v1/ConfigMap @ ns/name`).
pub fn describe(obj: &Value, ns: &str) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let name = s("/metadata/name");
    let own_ns = s("/metadata/namespace");
    let ns = if own_ns.is_empty() { ns.to_string() } else { own_ns };
    format!(
        "{}/{} @ {}/{}",
        s("/apiVersion"),
        s("/kind"),
        ns,
        if name.is_empty() { "*".into() } else { name }
    )
}

/// An engine error as chainsaw's `$error` shows it: the API server's message for API errors.
fn error_text(e: &crate::engine::Error) -> String {
    match e {
        crate::engine::Error::Api {
            source: kube::Error::Api(status),
            ..
        } => status.message.clone(),
        other => other.to_string(),
    }
}

/// Runs one operation; `Err` is the operation's failure text.
pub async fn run(action: Action<'_>, ctx: &OpCtx<'_>) -> Result<Outcome, String> {
    match action {
        Action::Apply(a) | Action::Create(a) | Action::Patch(a) | Action::Update(a) => {
            write(action.type_name(), a, ctx).await
        }
        Action::Assert(a) => check(a, false, ctx).await.map(|_| Outcome::default()),
        Action::Error(a) => check(a, true, ctx).await.map(|_| Outcome::default()),
        Action::Delete(a) => delete(a, ctx).await.map(|_| Outcome::default()),
        Action::Script(s) => script(s, ctx).await,
        Action::Command(c) => command_op(c, ctx).await,
        Action::Sleep(s) => {
            tokio::time::sleep(parse_duration(&s.duration)?).await;
            Ok(Outcome::default())
        }
        Action::Wait(w) => wait(w, ctx).await.map(|_| Outcome::default()),
        Action::Events(c) => collect("events", c, ctx).await.map(|_| Outcome::default()),
        Action::PodLogs(c) => collect("podLogs", c, ctx).await.map(|_| Outcome::default()),
        Action::Describe(c) => collect("describe", c, ctx).await.map(|_| Outcome::default()),
        Action::Get(c) => collect("get", c, ctx).await.map(|_| Outcome::default()),
        Action::Proxy(_) => Err("proxy operations are not supported".to_string()),
    }
}

/// Evaluates `expect` after an attempt: `None` when no expectation applies (the attempt's own result
/// stands), else whether the checks hold.
fn expectations(
    expect: &[Expectation],
    obj: &Value,
    err: Option<&str>,
    b: &Bindings,
) -> Option<Result<(), String>> {
    if expect.is_empty() {
        return None;
    }
    let b = b.with("error", err.map(Value::from).unwrap_or(Value::Null));
    let mut applied = false;
    for e in expect {
        if let Some(m) = &e.match_
            && assert_tree(m, obj, &b).is_err()
        {
            continue;
        }
        applied = true;
        if let Err(failure) = assert_tree(&e.check, obj, &b) {
            return Some(Err(format!(
                "expectation failed:\n{failure}{}",
                err.map(|e| format!("\n(error: {e})")).unwrap_or_default()
            )));
        }
    }
    applied.then_some(Ok(()))
}

async fn write(kind: &'static str, a: &ResourceAction, ctx: &OpCtx<'_>) -> Result<Outcome, String> {
    let mut b = bind_all(&ctx.bindings, &a.bindings)?;
    let timeout = timeout_of(&a.timeout, ctx.timeouts.apply)?;
    let templating = a.template.unwrap_or(ctx.templating);
    let opts = WriteOptions {
        strict: true,
        dry_run: a.dry_run.unwrap_or(false),
    };
    let mut outcome = Outcome::default();
    for (ri, raw) in resources(ctx, &a.file, &a.resource, &b)?.into_iter().enumerate() {
        let mut operation = b
            .get("operation")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        operation["resourceId"] = Value::from(ri + 1);
        let rb = b.with("operation", operation);
        let obj = if templating { template(&raw, &rb)? } else { raw };
        let what = describe(&obj, ctx.namespace);
        ctx.log.op(ctx.test, ctx.step, kind, "RUN", &what);
        let deadline = Instant::now() + timeout;
        let last_err = loop {
            let attempt: Result<(Value, bool), String> = match kind {
                "apply" => ctx
                    .cluster
                    .apply(&obj, ctx.namespace, opts, deadline)
                    .await
                    .map(|r| (r.object().clone(), matches!(r, Applied::Created(_)))),
                "create" => ctx
                    .cluster
                    .create(&obj, ctx.namespace, opts)
                    .await
                    .map(|o| (o, true)),
                "patch" => ctx
                    .cluster
                    .patch(&obj, ctx.namespace, a.subresource.as_deref(), opts)
                    .await
                    .map(|o| (o, false)),
                _ => ctx
                    .cluster
                    .update(&obj, ctx.namespace, opts)
                    .await
                    .map(|o| (o, false)),
            }
            .map_err(|e| error_text(&e));
            let err_text = attempt.as_ref().err().cloned();
            let decided = match expectations(&a.expect, &obj, err_text.as_deref(), &rb) {
                Some(r) => r.map(|_| attempt.as_ref().ok().cloned()),
                None => attempt.map(Some),
            };
            match decided {
                Ok(result) => {
                    let live = result
                        .as_ref()
                        .map(|(o, _)| o.clone())
                        .unwrap_or_else(|| obj.clone());
                    if let Some((o, true)) = &result
                        && !opts.dry_run
                    {
                        outcome.created.push(o.clone());
                    }
                    let ob = rb.with("error", err_text.clone().map(Value::from).unwrap_or(Value::Null));
                    for (k, v) in outputs(&a.outputs, &live, &ob)? {
                        b = b.with(k.clone(), v.clone());
                        outcome.outputs.push((k, v));
                    }
                    break None;
                }
                Err(e) if Instant::now() + POLL < deadline => {
                    tracing::debug!(error = %e, "{kind} retried");
                    tokio::time::sleep(POLL).await;
                    let _ = e;
                }
                Err(e) => break Some(e),
            }
        };
        if let Some(e) = last_err {
            ctx.log.op(ctx.test, ctx.step, kind, "ERROR", &what);
            return Err(format!("{kind} {what}: {e}"));
        }
        ctx.log.op(ctx.test, ctx.step, kind, "DONE", &what);
    }
    Ok(outcome)
}

fn outputs(outs: &[Output], at: &Value, b: &Bindings) -> Result<Vec<(String, Value)>, String> {
    let mut res = Vec::new();
    let mut b = b.clone();
    for o in outs {
        if let Some(m) = &o.match_
            && assert_tree(m, at, &b).is_err()
        {
            continue;
        }
        let name = template_string(&o.name, &b)?;
        let v = super::expr::evaluate_if_expression(&o.value, at, &b).and_then(|v| template(&v, &b))?;
        b = b.with(name.clone(), v.clone());
        res.push((name, v));
    }
    Ok(res)
}

fn to_diffs(e: &AssertError) -> Vec<FieldDiff> {
    match e {
        AssertError::Fields(errs) => errs
            .iter()
            .map(|f| FieldDiff {
                path: f.path.clone(),
                expected: f
                    .expected
                    .as_ref()
                    .map(crate::engine::subset::render)
                    .unwrap_or_default(),
                actual: f
                    .actual
                    .as_ref()
                    .map(crate::engine::subset::render)
                    .unwrap_or_else(|| "<missing>".into()),
                message: f.detail.clone(),
            })
            .collect(),
        AssertError::Internal(msg) => {
            vec![FieldDiff {
                path: String::new(),
                expected: String::new(),
                actual: String::new(),
                message: msg.clone(),
            }]
        }
    }
}

/// The x_k8s_* functions' view of the cluster: JMESPath evaluation is synchronous, so the reader blocks on
/// the runtime (`block_in_place` on a worker of the multi-thread runtime; directly on a blocking thread).
pub struct Reader {
    pub cluster: Arc<Cluster>,
    pub handle: tokio::runtime::Handle,
}

impl Reader {
    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        tokio::task::block_in_place(|| self.handle.block_on(f))
    }
}

impl ClusterReader for Reader {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, String> {
        let sel = Selector {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            name: Some(name.into()),
            labels: Default::default(),
        };
        self.block(self.cluster.get(&sel, namespace))
            .map_err(|e| e.to_string())
    }
    fn list(&self, api_version: &str, kind: &str, namespace: &str) -> Result<Value, String> {
        let sel = Selector {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            name: None,
            labels: Default::default(),
        };
        let items = self
            .block(self.cluster.list(&sel, namespace))
            .map_err(|e| e.to_string())?;
        Ok(serde_json::json!({"apiVersion": api_version, "kind": format!("{kind}List"), "items": items}))
    }
    fn resource_exists(&self, api_version: &str, kind: &str) -> Result<bool, String> {
        Ok(self.block(self.cluster.resolve(api_version, kind)).is_ok())
    }
    fn server_version(&self) -> Result<Value, String> {
        let v = self
            .block(self.cluster.client().apiserver_version())
            .map_err(|e| e.to_string())?;
        serde_json::to_value(v).map_err(|e| e.to_string())
    }
}

/// A non-resource assertion (no apiVersion/kind): the tree against null and the bindings, polled every
/// 50 ms; `expect_match` false for `error` (passes at the first poll where it does not match).
async fn non_resource(
    tree: &Value,
    b: &Bindings,
    expect_match: bool,
    timeout: Duration,
    ctx: &OpCtx<'_>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let reader: Arc<dyn ClusterReader> = Arc::new(Reader {
            cluster: ctx.cluster.clone(),
            handle: tokio::runtime::Handle::current(),
        });
        let (t, bb) = (tree.clone(), b.clone());
        let res = tokio::task::spawn_blocking(move || {
            with_cluster(Some(reader), || assert_tree(&t, &Value::Null, &bb))
        })
        .await
        .map_err(|e| e.to_string())?;
        let last = match (res, expect_match) {
            (Ok(()), true) => return Ok(()),
            (Err(AssertError::Fields(_)), false) => return Ok(()),
            (Err(AssertError::Internal(e)), _) => return Err(e),
            (Err(e), true) => e.to_string(),
            (Ok(()), false) => "the error assertion matched".to_string(),
        };
        if Instant::now() + POLL >= deadline {
            return Err(last);
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn check(a: &CheckAction, absent: bool, ctx: &OpCtx<'_>) -> Result<(), String> {
    let kind = if absent { "error" } else { "assert" };
    let b = bind_all(&ctx.bindings, &a.bindings)?;
    let timeout = timeout_of(
        &a.timeout,
        if absent {
            ctx.timeouts.error
        } else {
            ctx.timeouts.assert
        },
    )?;
    let templating = a.template.unwrap_or(ctx.templating);
    for raw in resources(ctx, &a.file, &a.resource, &b)? {
        let tree = if templating {
            template_lookup(&raw, &b)?
        } else {
            raw
        };
        let is_resource = tree.get("apiVersion").is_some() && tree.get("kind").is_some();
        let what = if is_resource {
            describe(&tree, ctx.namespace)
        } else {
            "(non-resource)".to_string()
        };
        ctx.log.op(ctx.test, ctx.step, kind, "RUN", &what);
        let result = if !is_resource {
            non_resource(&tree, &b, !absent, timeout, ctx).await
        } else {
            let internal: Arc<Mutex<Option<String>>> = Arc::default();
            let notify = Arc::new(tokio::sync::Notify::new());
            let (mb, mi, mn) = (b.clone(), internal.clone(), notify.clone());
            let matcher = move |actual: &Value, expected: &Value| -> Result<(), Vec<FieldDiff>> {
                assert_tree(expected, actual, &mb).map_err(|e| {
                    if let AssertError::Internal(msg) = &e {
                        *mi.lock().expect("internal error slot") = Some(msg.clone());
                        mn.notify_one();
                    }
                    to_diffs(&e)
                })
            };
            let fut = async {
                if absent {
                    ctx.cluster
                        .absent_eventually(&tree, ctx.namespace, timeout, &matcher)
                        .await
                } else {
                    ctx.cluster
                        .assert_eventually(&tree, ctx.namespace, timeout, &matcher)
                        .await
                }
            };
            tokio::select! {
                r = fut => r.map_err(|f| f.to_string()),
                _ = notify.notified() => Err(internal.lock().expect("internal error slot").clone().unwrap_or_default()),
            }
        };
        if let Err(e) = result {
            ctx.log.op(ctx.test, ctx.step, kind, "ERROR", &what);
            return Err(format!("{kind} {what}:\n{e}"));
        }
        ctx.log.op(ctx.test, ctx.step, kind, "DONE", &what);
    }
    Ok(())
}

fn propagation(p: &str) -> Result<PropagationPolicy, String> {
    match p {
        "Background" => Ok(PropagationPolicy::Background),
        "Foreground" => Ok(PropagationPolicy::Foreground),
        "Orphan" => Ok(PropagationPolicy::Orphan),
        other => Err(format!("invalid deletion propagation policy {other:?}")),
    }
}

/// Deletes what `sel` names in `ns`, waiting until gone for `timeout`.
pub async fn delete_selected(
    cluster: &Cluster,
    sel: &Selector,
    ns: &str,
    policy: &str,
    timeout: Duration,
) -> Result<usize, String> {
    cluster
        .delete(sel, ns, Some(propagation(policy)?), Some(timeout))
        .await
        .map_err(|e| e.to_string())
}

async fn delete(a: &DeleteAction, ctx: &OpCtx<'_>) -> Result<(), String> {
    let b = bind_all(&ctx.bindings, &a.bindings)?;
    let timeout = timeout_of(&a.timeout, ctx.timeouts.delete)?;
    let policy = a
        .deletion_propagation_policy
        .as_deref()
        .unwrap_or(ctx.propagation);
    let templating = a.template.unwrap_or(ctx.templating);
    let selectors: Vec<Selector> = match &a.ref_ {
        Some(r) => {
            let t = |s: &str| {
                if templating {
                    template_string(s, &b)
                } else {
                    Ok(s.to_string())
                }
            };
            let mut labels = std::collections::BTreeMap::new();
            for (k, v) in &r.labels {
                labels.insert(k.clone(), t(v)?);
            }
            vec![Selector {
                api_version: t(&r.api_version)?,
                kind: t(&r.kind)?,
                namespace: r.namespace.as_deref().map(t).transpose()?,
                name: r.name.as_deref().map(t).transpose()?,
                labels,
            }]
        }
        None => resources(ctx, &a.file, &a.resource, &b)?
            .iter()
            .map(|raw| {
                let obj = if templating {
                    template(raw, &b)?
                } else {
                    raw.clone()
                };
                Selector::of_object(&obj).map_err(|e| e.to_string())
            })
            .collect::<Result<_, _>>()?,
    };
    for sel in selectors {
        let what = sel.describe(Some(ctx.namespace));
        ctx.log.op(ctx.test, ctx.step, "delete", "RUN", &what);
        let res = delete_selected(ctx.cluster, &sel, ctx.namespace, policy, timeout).await;
        let obj = serde_json::json!({"apiVersion": sel.api_version, "kind": sel.kind});
        let res = match expectations(&a.expect, &obj, res.as_ref().err().map(String::as_str), &b) {
            Some(r) => r,
            None => res.map(|_| ()),
        };
        if let Err(e) = res {
            ctx.log.op(ctx.test, ctx.step, "delete", "ERROR", &what);
            return Err(format!("delete {what}: {e}"));
        }
        ctx.log.op(ctx.test, ctx.step, "delete", "DONE", &what);
    }
    Ok(())
}

/// The environment of scripts and commands: `env` entries (templated, must be strings), `NAMESPACE`
/// unless set, `KUBECONFIG` the runner's.
fn environment(env: &[EnvVar], b: &Bindings, ctx: &OpCtx<'_>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for e in env {
        match template(&e.value, b)? {
            Value::String(s) => out.push((template_string(&e.name, b)?, s)),
            other => return Err(format!("env {}: value must be a string, got {other}", e.name)),
        }
    }
    if !out.iter().any(|(k, _)| k == "NAMESPACE") {
        out.push(("NAMESPACE".into(), ctx.namespace.to_string()));
    }
    if let Some(k) = ctx.cluster.kubeconfig() {
        out.push(("KUBECONFIG".into(), k.display().to_string()));
    }
    Ok(out)
}

struct Exec<'a> {
    kind: &'static str,
    program: Program,
    env: Vec<(String, String)>,
    work_dir: &'a Option<String>,
    timeout: &'a Option<String>,
    check: &'a Option<Value>,
    outputs: &'a [Output],
    skip_log: bool,
    skip_command: bool,
}

async fn execute(x: Exec<'_>, b: &Bindings, ctx: &OpCtx<'_>) -> Result<Outcome, String> {
    let timeout = timeout_of(x.timeout, ctx.timeouts.exec)?;
    let cwd = match x.work_dir {
        Some(d) => ctx.base_path.join(template_string(d, b)?),
        None => ctx.base_path.to_path_buf(),
    };
    let shown = if x.skip_command {
        String::new()
    } else {
        x.program.display()
    };
    ctx.log.op(ctx.test, ctx.step, x.kind, "RUN", &shown);
    let out = command::run(&Process {
        program: x.program,
        env: x.env,
        cwd,
        timeout: Some(timeout),
    })
    .await;
    let (out, err) = match out {
        Ok(o) => {
            let err = (!o.success()).then(|| match o.code {
                Some(c) => format!("exit status {c}"),
                None => "signal: killed".to_string(),
            });
            (o, err)
        }
        Err(e) => (Default::default(), Some(e.to_string())),
    };
    if !x.skip_log {
        for (stream, text) in [("STDOUT", &out.stdout), ("STDERR", &out.stderr)] {
            if !text.trim().is_empty() {
                ctx.log.block(ctx.test, ctx.step, x.kind, stream, text);
            }
        }
    }
    let b = b
        .with("stdout", Value::from(out.stdout.clone()))
        .with("stderr", Value::from(out.stderr.clone()))
        .with("error", err.clone().map(Value::from).unwrap_or(Value::Null));
    let result = match x.check {
        Some(check) => assert_tree(check, &Value::Null, &b).map_err(|e| format!("check failed:\n{e}")),
        None => match &err {
            Some(e) => Err(format!("{e}\n{}", out.stderr.trim_end())),
            None => Ok(()),
        },
    };
    match result {
        Ok(()) => {
            ctx.log.op(ctx.test, ctx.step, x.kind, "DONE", "");
            Ok(Outcome {
                outputs: outputs(x.outputs, &Value::Null, &b)?,
                created: vec![],
            })
        }
        Err(e) => {
            ctx.log.op(ctx.test, ctx.step, x.kind, "ERROR", "");
            Err(format!("{} {shown}: {e}", x.kind))
        }
    }
}

async fn script(s: &ScriptAction, ctx: &OpCtx<'_>) -> Result<Outcome, String> {
    let b = bind_all(&ctx.bindings, &s.bindings)?;
    let env = environment(&s.env, &b, ctx)?;
    let program = Program::Script {
        shell: s.shell.clone().unwrap_or_else(|| "sh".into()),
        args: if s.shell_args.is_empty() {
            vec!["-c".into()]
        } else {
            s.shell_args.clone()
        },
        content: s.content.clone(),
    };
    execute(
        Exec {
            kind: "script",
            program,
            env,
            work_dir: &s.work_dir,
            timeout: &s.timeout,
            check: &s.check,
            outputs: &s.outputs,
            skip_log: s.skip_log_output.unwrap_or(false),
            skip_command: s.skip_command_output.unwrap_or(false),
        },
        &b,
        ctx,
    )
    .await
}

async fn command_op(c: &CommandAction, ctx: &OpCtx<'_>) -> Result<Outcome, String> {
    let b = bind_all(&ctx.bindings, &c.bindings)?;
    let env = environment(&c.env, &b, ctx)?;
    let lookup = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    };
    let mut argv = vec![command::expand(&c.entrypoint, lookup, Unknown::Keep)];
    argv.extend(c.args.iter().map(|a| command::expand(a, lookup, Unknown::Keep)));
    execute(
        Exec {
            kind: "command",
            program: Program::Argv(argv),
            env: env.clone(),
            work_dir: &c.work_dir,
            timeout: &c.timeout,
            check: &c.check,
            outputs: &c.outputs,
            skip_log: c.skip_log_output.unwrap_or(false),
            skip_command: c.skip_command_output.unwrap_or(false),
        },
        &b,
        ctx,
    )
    .await
}

/// `kubectl` resource argument for apiVersion/kind: `plural.group` (the plural alone for core).
async fn resource_arg(cluster: &Cluster, api_version: &str, kind: &str) -> Result<String, String> {
    let r = cluster
        .resolve(api_version, kind)
        .await
        .map_err(|e| e.to_string())?;
    Ok(if r.resource.group.is_empty() {
        r.resource.plural.clone()
    } else {
        format!(
            "{}.{}.{}",
            r.resource.plural, r.resource.version, r.resource.group
        )
    })
}

/// The `kubectl wait` command line of a wait operation (reference 2.3).
pub fn wait_args(w: &WaitAction, resource: &str, ns: &str, timeout: Duration) -> Result<Vec<String>, String> {
    let mut args = vec!["kubectl".to_string(), "wait".to_string(), resource.to_string()];
    match (&w.name, &w.selector) {
        (Some(n), _) => args[2] = format!("{resource}/{n}"),
        (None, Some(s)) => args.extend(["-l".to_string(), s.clone()]),
        (None, None) => args.push("--all".to_string()),
    }
    let f = &w.for_;
    let cond = if f.deletion.is_some() {
        "--for=delete".to_string()
    } else if f.creation.is_some() {
        "--for=create".to_string()
    } else if let Some(c) = &f.condition {
        match &c.value {
            Some(v) => format!("--for=condition={}={v}", c.name),
            None => format!("--for=condition={}", c.name),
        }
    } else if let Some(j) = &f.json_path {
        match &j.value {
            Some(v) => format!("--for=jsonpath={}={v}", j.path),
            None => format!("--for=jsonpath={}", j.path),
        }
    } else {
        return Err("wait: for must be one of deletion, creation, condition, jsonPath".to_string());
    };
    args.push(cond);
    args.extend([
        "-n".to_string(),
        w.namespace.clone().unwrap_or_else(|| ns.to_string()),
    ]);
    args.push(format!("--timeout={}s", timeout.as_secs().max(1)));
    if let Some(fmt) = &w.format {
        args.extend(["-o".to_string(), fmt.clone()]);
    }
    Ok(args)
}

async fn wait(w: &WaitAction, ctx: &OpCtx<'_>) -> Result<(), String> {
    let timeout = timeout_of(&w.timeout, ctx.timeouts.exec)?;
    let (Some(v), Some(k)) = (&w.api_version, &w.kind) else {
        return Err("wait: apiVersion and kind are required".to_string());
    };
    let resource = resource_arg(ctx.cluster, v, k).await?;
    let argv = wait_args(w, &resource, ctx.namespace, timeout)?;
    kubectl("wait", argv, timeout + Duration::from_secs(5), ctx).await
}

async fn kubectl(
    kind: &'static str,
    argv: Vec<String>,
    timeout: Duration,
    ctx: &OpCtx<'_>,
) -> Result<(), String> {
    let env = environment(&[], &ctx.bindings, ctx)?;
    execute(
        Exec {
            kind,
            program: Program::Argv(argv),
            env,
            work_dir: &None,
            timeout: &Some(format!("{}ms", timeout.as_millis())),
            check: &None,
            outputs: &[],
            skip_log: false,
            skip_command: false,
        },
        &ctx.bindings,
        ctx,
    )
    .await
    .map(|_| ())
}

/// The kubectl command line of a collector (`events`, `podLogs`, `describe`, `get`).
pub fn collect_args(kind: &str, c: &CollectAction, resource: Option<&str>, ns: &str) -> Vec<String> {
    let ns = c.namespace.clone().unwrap_or_else(|| ns.to_string());
    let mut args: Vec<String> = vec!["kubectl".into()];
    match kind {
        "podLogs" => {
            args.extend([
                "logs".into(),
                "--prefix".into(),
                "--all-containers".into(),
                "-n".into(),
                ns,
            ]);
            match (&c.name, &c.selector) {
                (Some(n), _) => args.push(n.clone()),
                (None, Some(s)) => args.extend(["-l".into(), s.clone()]),
                (None, None) => {}
            }
            if let Some(container) = &c.container {
                args.retain(|a| a != "--all-containers");
                args.extend(["-c".into(), container.clone()]);
            }
            match (c.tail, &c.name) {
                (Some(t), _) => args.push(format!("--tail={t}")),
                (None, None) => args.push("--tail=10".into()),
                _ => {}
            }
        }
        _ => {
            let verb = if kind == "describe" { "describe" } else { "get" };
            let res = if kind == "events" {
                "events".to_string()
            } else {
                resource.unwrap_or("").to_string()
            };
            args.extend([verb.into(), res, "-n".into(), ns]);
            match (&c.name, &c.selector) {
                (Some(n), _) => args.push(n.clone()),
                (None, Some(s)) => args.extend(["-l".into(), s.clone()]),
                (None, None) => {}
            }
            if verb == "get"
                && let Some(f) = &c.format
            {
                args.extend(["-o".into(), f.clone()]);
            }
            if kind == "describe" && c.show_events == Some(false) {
                args.push("--show-events=false".into());
            }
        }
    }
    args
}

async fn collect(kind: &'static str, c: &CollectAction, ctx: &OpCtx<'_>) -> Result<(), String> {
    let timeout = timeout_of(&c.timeout, ctx.timeouts.exec)?;
    let resource = match (kind, &c.api_version, &c.kind) {
        ("describe" | "get", Some(v), Some(k)) => Some(resource_arg(ctx.cluster, v, k).await?),
        ("describe" | "get", _, _) => return Err(format!("{kind}: apiVersion and kind are required")),
        _ => None,
    };
    kubectl(
        kind,
        collect_args(kind, c, resource.as_deref(), ctx.namespace),
        timeout,
        ctx,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chainsaw::model::{WaitCondition, WaitFor};
    use serde_json::json;

    #[test]
    fn bindings_are_templated_in_order() {
        let base = Bindings::new().with("namespace", json!("ns"));
        let b = bind_all(
            &base,
            &[
                Binding {
                    name: "a".into(),
                    compiler: None,
                    value: json!(1),
                },
                Binding {
                    name: "b".into(),
                    compiler: None,
                    value: json!("($a + `1`)"),
                },
                Binding {
                    name: "c".into(),
                    compiler: None,
                    value: json!({"x": "(join('-', [$namespace, to_string($b)]))"}),
                },
            ],
        )
        .unwrap();
        assert_eq!(b.get("b"), Some(&json!(2)));
        assert_eq!(b.get("c"), Some(&json!({"x": "ns-2"})));
    }

    #[test]
    fn expect_turns_an_error_into_a_pass() {
        let b = Bindings::new();
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        let check = |c: Value| {
            vec![Expectation {
                match_: None,
                check: c,
            }]
        };
        assert_eq!(expectations(&[], &obj, Some("boom"), &b), None);
        assert_eq!(
            expectations(&check(json!({"($error != null)": true})), &obj, Some("boom"), &b),
            Some(Ok(()))
        );
        assert!(matches!(
            expectations(&check(json!({"($error != null)": true})), &obj, None, &b),
            Some(Err(_))
        ));
        let unmatched = vec![Expectation {
            match_: Some(json!({"kind": "Pod"})),
            check: json!({"($error)": "x"}),
        }];
        assert_eq!(expectations(&unmatched, &obj, Some("boom"), &b), None);
    }

    #[test]
    fn kubectl_command_lines() {
        let w = WaitAction {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some("example".into()),
            for_: WaitFor {
                condition: Some(WaitCondition {
                    name: "Ready".into(),
                    value: None,
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            wait_args(&w, "pods", "ns", Duration::from_secs(60))
                .unwrap()
                .join(" "),
            "kubectl wait pods/example --for=condition=Ready -n ns --timeout=60s"
        );
        let w = WaitAction {
            selector: Some("app=x".into()),
            for_: WaitFor {
                deletion: Some(json!({})),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            wait_args(&w, "pods", "ns", Duration::from_secs(5))
                .unwrap()
                .join(" "),
            "kubectl wait pods -l app=x --for=delete -n ns --timeout=5s"
        );
        assert!(wait_args(&WaitAction::default(), "pods", "ns", Duration::from_secs(5)).is_err());
        let c = CollectAction {
            name: Some("p".into()),
            tail: Some(20),
            ..Default::default()
        };
        assert_eq!(
            collect_args("podLogs", &c, None, "ns").join(" "),
            "kubectl logs --prefix --all-containers -n ns p --tail=20"
        );
        let c = CollectAction {
            selector: Some("app=x".into()),
            ..Default::default()
        };
        assert_eq!(
            collect_args("podLogs", &c, None, "ns").join(" "),
            "kubectl logs --prefix --all-containers -n ns -l app=x --tail=10"
        );
        assert_eq!(
            collect_args("events", &CollectAction::default(), None, "ns").join(" "),
            "kubectl get events -n ns"
        );
        let c = CollectAction {
            format: Some("yaml".into()),
            ..Default::default()
        };
        assert_eq!(
            collect_args("get", &c, Some("configmaps"), "ns").join(" "),
            "kubectl get configmaps -n ns -o yaml"
        );
    }
}
