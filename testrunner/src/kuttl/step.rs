//! One kuttl step: loading its files (`TestStep`, `TestAssert`, objects) and running it in kuttl's order
//! (`Step.Run`): delete → commands → apply → the check loop (asserts, assert commands and errors holding at
//! one instant, evaluated on watch events) → collectors on failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;
use tokio::time::Instant;

use super::cel_assert::{self, CelAssertions};
use super::config::{self, Collector, Command, TestAssert, TestStep};
use super::files::{FileKind, StepFiles};
use crate::engine::command::{self, Output, Process, Program, Unknown};
use crate::engine::subset::kuttl_subset;
use crate::engine::{Applied, Cluster, Expectation, ExtraCheck, Selector, WriteOptions, describe_object};

/// A log line stamped with the time it was written (`HH:MM:SS | message`).
pub fn at(msg: String) -> String {
    format!("{} | {msg}", jiff::Zoned::now().strftime("%H:%M:%S"))
}

fn note(log: &mut Vec<String>, msg: String) {
    log.push(at(msg));
}

/// A loaded step.
#[derive(Clone, Debug, Default)]
pub struct Step {
    /// The index.
    pub index: i32,
    /// The name (`TestStep` `metadata.name`, else from the first applied file).
    pub name: String,
    /// The step's `TestStep`.
    pub step: TestStep,
    /// The step's `TestAssert` (the last one loaded wins).
    pub assert: TestAssert,
    /// Objects to apply.
    pub apply: Vec<Value>,
    /// Objects to assert.
    pub asserts: Vec<Value>,
    /// Objects that must not match.
    pub errors: Vec<Value>,
}

impl Step {
    /// `<index>-<name>` with the index unpadded (`0-install`, `1-`).
    pub fn label(&self) -> String {
        format!("{}-{}", self.index, self.name)
    }
}

/// Expands a `.gotmpl.yaml` file: only `{{ .Namespace }}` is supported (kuttl uses Go templates with sprig).
pub fn expand_template(text: &str, namespace: &str) -> Result<String, String> {
    let re = regex::Regex::new(r"\{\{-?\s*\.Namespace\s*-?\}\}").expect("regex");
    let out = re.replace_all(text, namespace).into_owned();
    if out.contains("{{") {
        return Err("only {{ .Namespace }} is supported in .gotmpl.yaml templates".into());
    }
    Ok(out)
}

fn env_expand(s: &str) -> String {
    command::expand(s, |n| std::env::var(n).ok(), Unknown::Empty)
}

/// The `*.yaml` files a `TestStep` list entry names: a file, or the YAML files directly in a directory.
fn listed_files(case_dir: &Path, entry: &str) -> Result<Vec<PathBuf>, String> {
    let p = case_dir.join(env_expand(entry));
    if p.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "yaml"))
            .collect();
        v.sort();
        Ok(v)
    } else if p.is_file() {
        Ok(vec![p])
    } else {
        Err(format!("{}: no such file or directory", p.display()))
    }
}

/// Loads a step's files for a test namespace. A file whose `TestFile` does not select `run_labels` is left
/// out whole.
pub fn load(
    case_dir: &Path,
    files: &StepFiles,
    namespace: &str,
    run_labels: &std::collections::BTreeMap<String, String>,
) -> Result<Step, String> {
    let mut step = Step {
        index: files.index,
        name: files.name.clone(),
        ..Default::default()
    };
    let mut test_step: Option<TestStep> = None;
    for f in &files.files {
        let text = std::fs::read_to_string(&f.path).map_err(|e| format!("{}: {e}", f.path.display()))?;
        let text = if f.template {
            expand_template(&text, namespace).map_err(|e| format!("{}: {e}", f.path.display()))?
        } else {
            text
        };
        let docs = config::documents(&f.path, &text).map_err(|e| e.to_string())?;
        let test_files: Vec<&Value> = docs.iter().filter(|d| config::is_kuttl(d, "TestFile")).collect();
        if test_files.len() > 1 {
            return Err(format!(
                "{}: more than 1 TestFile not allowed in a file",
                f.path.display()
            ));
        }
        if let Some(tf) = test_files.first()
            && !config::run_selected(tf.get("testRunSelector"), run_labels)
                .map_err(|e| format!("{}: TestFile: {e}", f.path.display()))?
        {
            continue;
        }
        for doc in docs {
            if config::is_kuttl(&doc, "TestFile") {
                continue;
            }
            match f.kind {
                FileKind::Apply if config::is_kuttl(&doc, "TestStep") => {
                    if test_step.is_some() {
                        return Err(format!(
                            "{}: more than 1 TestStep not allowed in step",
                            f.path.display()
                        ));
                    }
                    if let Some(n) = doc
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                    {
                        step.name = n.to_string();
                    }
                    test_step = Some(
                        serde_json::from_value(doc)
                            .map_err(|e| format!("{}: TestStep: {e}", f.path.display()))?,
                    );
                }
                FileKind::Apply => step.apply.push(doc),
                FileKind::Assert if config::is_kuttl(&doc, "TestAssert") => {
                    step.assert = serde_json::from_value(doc)
                        .map_err(|e| format!("{}: TestAssert: {e}", f.path.display()))?;
                    // An expression that does not compile fails the test here, naming the file.
                    CelAssertions::compile(&step.assert)
                        .map_err(|e| format!("{}: TestAssert: {e}", f.path.display()))?;
                }
                FileKind::Assert => step.asserts.push(doc),
                FileKind::Errors => step.errors.push(doc),
            }
        }
    }
    if let Some(ts) = &test_step {
        let lists = [
            (&ts.apply, FileKind::Apply),
            (&ts.assert, FileKind::Assert),
            (&ts.error, FileKind::Errors),
        ];
        for (entries, kind) in lists {
            for entry in entries {
                for path in listed_files(case_dir, entry)? {
                    let docs = config::read_documents(&path).map_err(|e| e.to_string())?;
                    match kind {
                        FileKind::Apply => step.apply.extend(docs),
                        FileKind::Assert => step.asserts.extend(docs),
                        FileKind::Errors => step.errors.extend(docs),
                    }
                }
            }
        }
    }
    step.step = test_step.unwrap_or_default();
    Ok(step)
}

/// What commands of a test run with.
#[derive(Clone, Debug)]
pub struct CommandEnv {
    /// The namespace (`NAMESPACE`).
    pub namespace: String,
    /// The kubeconfig (`KUBECONFIG`).
    pub kubeconfig: Option<PathBuf>,
    /// The working directory (the test case directory; the process's for suite commands).
    pub cwd: PathBuf,
}

impl CommandEnv {
    /// The variables kuttl adds: `NAMESPACE`, `KUBECONFIG`, `PATH=<cwd>/bin/:$PATH`.
    pub fn vars(&self) -> Vec<(String, String)> {
        let here = std::env::current_dir().unwrap_or_default();
        let path = format!(
            "{}/bin/:{}",
            here.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut v = vec![
            ("NAMESPACE".to_string(), self.namespace.clone()),
            ("PATH".to_string(), path),
        ];
        if let Some(k) = &self.kubeconfig {
            v.push(("KUBECONFIG".into(), k.display().to_string()));
        }
        v
    }
}

/// The process a kuttl `Command` runs (pure): `command` is expanded (unknown `$X` → "") and split with
/// shlex; `namespaced` appends `--namespace <ns>` unless `-n`/`--namespace` is there; `script` runs under
/// `sh -c` unexpanded. `default_timeout` is used when the command's own is 0; negative means none.
pub fn process(c: &Command, env: &CommandEnv, default_timeout: Option<Duration>) -> Result<Process, String> {
    let vars = env.vars();
    let program = match (c.command.is_empty(), c.script.is_empty()) {
        (false, false) => return Err("command and script can not be set in the same configuration".into()),
        (true, true) => return Err("either command or script must be set".into()),
        (true, false) if c.namespaced => {
            return Err(
                "script can not used 'namespaced', use the $NAMESPACE environment variable instead".into(),
            );
        }
        (true, false) => Program::sh(&c.script),
        (false, true) => {
            let lookup = |n: &str| {
                vars.iter()
                    .find(|(k, _)| k == n)
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var(n).ok())
            };
            let line = command::expand(&c.command, lookup, Unknown::Empty);
            let mut argv =
                shlex::split(&line).ok_or_else(|| format!("command {:?} could not be parsed", c.command))?;
            if argv.is_empty() {
                return Err(format!("command {:?} is empty", c.command));
            }
            if c.namespaced
                && !argv
                    .iter()
                    .any(|a| a == "-n" || a == "--namespace" || a.starts_with("--namespace="))
            {
                argv.extend(["--namespace".to_string(), env.namespace.clone()]);
            }
            Program::Argv(argv)
        }
    };
    let timeout = match c.timeout {
        t if t > 0 => Some(Duration::from_secs(t as u64)),
        t if t < 0 => None,
        _ => default_timeout,
    };
    Ok(Process {
        program,
        env: vars,
        cwd: env.cwd.clone(),
        timeout,
    })
}

/// Runs a kuttl command; its output goes to `log` unless `skipLogOutput`.
pub async fn run_command(
    c: &Command,
    env: &CommandEnv,
    default_timeout: Option<Duration>,
    log: &mut Vec<String>,
) -> Result<Output, String> {
    let p = process(c, env, default_timeout)?;
    let cmd = p.program.display();
    note(log, format!("running command: {cmd:?}"));
    let out = command::run(&p).await.map_err(|e| e.to_string())?;
    if !c.skip_log_output {
        log.extend(
            out.stdout
                .lines()
                .chain(out.stderr.lines())
                .map(|l| at(l.to_string())),
        );
    }
    if !out.success() && !c.ignore_failure {
        let status = out
            .code
            .map_or("signal".to_string(), |c| format!("exit status {c}"));
        return Err(format!("command {cmd:?} failed, {status}"));
    }
    Ok(out)
}

/// The kubectl command line of a collector (`pkg/apis/testharness/v1beta1/collector.go`).
pub fn collector_command(c: &Collector) -> Result<Command, String> {
    let kind = match c.type_.as_str() {
        "" if !c.command.is_empty() => "command",
        "" => "pod",
        t => t,
    };
    let ns = if c.namespace.is_empty() {
        "$NAMESPACE"
    } else {
        &c.namespace
    };
    let line = match kind {
        "pod" => {
            let mut l = String::from("kubectl logs --prefix");
            if !c.pod.is_empty() {
                l.push_str(&format!(" {}", c.pod));
            }
            if !c.selector.is_empty() {
                l.push_str(&format!(" -l {}", c.selector));
            }
            l.push_str(&format!(" -n {ns}"));
            if c.container.is_empty() {
                l.push_str(" --all-containers");
            } else {
                l.push_str(&format!(" -c {}", c.container));
            }
            let tail = match c.tail {
                0 if c.selector.is_empty() => -1,
                0 => 10,
                t => t,
            };
            l.push_str(&format!(" --tail={tail}"));
            l
        }
        "events" => {
            let mut l = String::from("kubectl get events");
            if !c.pod.is_empty() {
                l.push_str(&format!(" {}", c.pod));
            }
            l.push_str(&format!(" -n {ns}"));
            l
        }
        "command" => {
            if !(c.pod.is_empty()
                && c.namespace.is_empty()
                && c.container.is_empty()
                && c.selector.is_empty())
            {
                return Err("a command collector can not have pod, namespace, container or selector".into());
            }
            c.command.clone()
        }
        other => return Err(format!("unknown collector type {other:?}")),
    };
    Ok(Command {
        command: line,
        ignore_failure: true,
        ..Default::default()
    })
}

/// The timeouts of a step.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// The suite timeout (apply deadline, step commands, namespace deletion).
    pub suite: Duration,
    /// The step timeout (`TestAssert.timeout`, else the suite's): the check loop and the wait after delete.
    pub step: Duration,
}

/// kuttl's `TestAssert.commands` and CEL assertions as an [`ExtraCheck`]: every command must exit 0, each
/// bounded by the time left, then the CEL expressions must hold over the references fetched now.
struct AssertExtras<'a> {
    assert: &'a TestAssert,
    cel: Option<CelAssertions>,
    cluster: &'a Cluster,
    env: &'a CommandEnv,
    log: Vec<String>,
}

impl ExtraCheck for AssertExtras<'_> {
    fn check(&mut self, remaining: Duration) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            for c in &self.assert.commands {
                let c = Command {
                    background: false,
                    ignore_failure: false,
                    ..c.clone()
                };
                run_command(&c, self.env, Some(remaining), &mut self.log).await?;
            }
            if let Some(cel) = &self.cel {
                let refs = cel_assert::fetch(self.cluster, self.assert, &self.env.namespace).await?;
                cel.judge(&refs)?;
            }
            Ok(())
        })
    }
}

/// What a step did.
pub struct StepOutcome {
    /// Assert plus errors objects.
    pub assertions: usize,
    /// The step's errors (empty: passed).
    pub errors: Vec<String>,
}

/// Runs a step in kuttl's order. Objects it creates are added to `created` (for clean-up).
pub async fn run(
    cluster: &Cluster,
    step: &Step,
    env: &CommandEnv,
    timeouts: Timeouts,
    created: &mut Vec<Value>,
    log: &mut Vec<String>,
) -> StepOutcome {
    let ns = env.namespace.as_str();
    let assertions = step.asserts.len() + step.errors.len();
    let mut errors = Vec::new();
    // 1. delete
    for r in &step.step.delete {
        let sel = Selector {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
            name: (!r.name.is_empty()).then(|| r.name.clone()),
            labels: r.labels.clone(),
        };
        match cluster.delete(&sel, ns, None, Some(timeouts.step)).await {
            Ok(n) => note(log, format!("deleted {n} {}", sel.describe(Some(ns)))),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        return StepOutcome { assertions, errors };
    }
    // 2. commands
    let step_env = match step.step.kubeconfig.as_str() {
        "" => env.clone(),
        k => CommandEnv {
            kubeconfig: Some(std::path::absolute(env.cwd.join(k)).unwrap_or_default()),
            ..env.clone()
        },
    };
    for c in &step.step.commands {
        if c.background {
            note(
                log,
                "background commands are only supported in the TestSuite; running it in the foreground"
                    .into(),
            );
        }
        if let Err(e) = run_command(c, &step_env, Some(timeouts.suite), log).await {
            errors.push(e);
            break;
        }
    }
    // 3. apply
    let deadline = Instant::now() + timeouts.suite;
    for obj in &step.apply {
        match cluster.apply(obj, ns, WriteOptions::default(), deadline).await {
            Ok(Applied::Created(o)) => {
                note(log, format!("{} created", describe_object(&o)));
                created.push(o);
            }
            Ok(Applied::Updated(o)) => note(log, format!("{} updated", describe_object(&o))),
            Err(e) => errors.push(e.to_string()),
        }
    }
    if !errors.is_empty() {
        return StepOutcome { assertions, errors };
    }
    // 4. the check loop
    let exps: Vec<Expectation> = step
        .asserts
        .iter()
        .cloned()
        .map(Expectation::present)
        .chain(step.errors.iter().cloned().map(Expectation::absent))
        .collect();
    let cel = match CelAssertions::compile(&step.assert) {
        Ok(c) => c,
        Err(e) => {
            errors.push(format!("TestAssert: {e}"));
            return StepOutcome { assertions, errors };
        }
    };
    let mut extra = AssertExtras {
        assert: &step.assert,
        cel,
        cluster,
        env: &step_env,
        log: Vec::new(),
    };
    let extra_ref: Option<&mut dyn ExtraCheck> = if step.assert.commands.is_empty() && extra.cel.is_none() {
        None
    } else {
        Some(&mut extra)
    };
    let result = cluster
        .eventually(&exps, ns, timeouts.step, &kuttl_subset, extra_ref)
        .await;
    log.append(&mut extra.log);
    if let Err(f) = result {
        errors.push(f.to_string());
        // 5. collectors
        for c in &step.assert.collectors {
            match collector_command(c) {
                Ok(cmd) => {
                    let _ = run_command(&cmd, &step_env, Some(timeouts.suite), log).await;
                }
                Err(e) => note(log, format!("collector: {e}")),
            }
        }
    }
    StepOutcome { assertions, errors }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> CommandEnv {
        CommandEnv {
            namespace: "kuttl-a-b-c1d2".into(),
            kubeconfig: Some("/k/config".into()),
            cwd: "/case".into(),
        }
    }

    fn argv(p: &Process) -> Vec<String> {
        match &p.program {
            Program::Argv(a) => a.clone(),
            Program::Script { content, .. } => vec![content.clone()],
        }
    }

    #[test]
    fn kuttl_commands_are_expanded_split_and_namespaced() {
        let c = |command: &str, namespaced: bool| Command {
            command: command.into(),
            namespaced,
            ..Default::default()
        };
        let p = process(
            &c("kubectl get pod -n $NAMESPACE 'a b' $UNSET_XYZ", false),
            &env(),
            None,
        )
        .unwrap();
        assert_eq!(argv(&p), ["kubectl", "get", "pod", "-n", "kuttl-a-b-c1d2", "a b"]);
        let p = process(&c("kubectl get pods", true), &env(), None).unwrap();
        assert_eq!(
            argv(&p),
            ["kubectl", "get", "pods", "--namespace", "kuttl-a-b-c1d2"]
        );
        let p = process(&c("kubectl get pods -n x", true), &env(), None).unwrap();
        assert_eq!(argv(&p), ["kubectl", "get", "pods", "-n", "x"]);
        let s = Command {
            script: "echo $NAMESPACE".into(),
            ..Default::default()
        };
        let p = process(&s, &env(), Some(Duration::from_secs(30))).unwrap();
        assert_eq!(argv(&p), ["echo $NAMESPACE"], "scripts are left to the shell");
        assert_eq!(p.timeout, Some(Duration::from_secs(30)));
        assert!(p.env.contains(&("NAMESPACE".into(), "kuttl-a-b-c1d2".into())));
        assert!(p.env.contains(&("KUBECONFIG".into(), "/k/config".into())));
        let bad = Command {
            script: "x".into(),
            namespaced: true,
            ..Default::default()
        };
        assert!(
            process(&bad, &env(), None)
                .unwrap_err()
                .contains("script can not used 'namespaced'")
        );
        let t = Command {
            command: "true".into(),
            timeout: -1,
            ..Default::default()
        };
        assert_eq!(
            process(&t, &env(), Some(Duration::from_secs(5))).unwrap().timeout,
            None
        );
        let t = Command {
            command: "true".into(),
            timeout: 7,
            ..Default::default()
        };
        assert_eq!(
            process(&t, &env(), Some(Duration::from_secs(5))).unwrap().timeout,
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn collectors_become_kubectl_lines() {
        let c = |v: serde_json::Value| {
            collector_command(&serde_json::from_value(v).unwrap())
                .unwrap()
                .command
        };
        assert_eq!(
            c(serde_json::json!({"selector": "app=web"})),
            "kubectl logs --prefix -l app=web -n $NAMESPACE --all-containers --tail=10"
        );
        assert_eq!(
            c(serde_json::json!({"type": "pod", "pod": "p", "container": "c"})),
            "kubectl logs --prefix p -n $NAMESPACE -c c --tail=-1"
        );
        assert_eq!(
            c(serde_json::json!({"type": "events", "namespace": "x"})),
            "kubectl get events -n x"
        );
        assert_eq!(c(serde_json::json!({"command": "echo hi"})), "echo hi");
    }

    #[test]
    fn templates_take_the_namespace_only() {
        assert_eq!(
            expand_template("ns: {{ .Namespace }}/{{.Namespace}}", "n").unwrap(),
            "ns: n/n"
        );
        assert!(expand_template("{{ .Vars.x }}", "n").is_err());
    }
}
