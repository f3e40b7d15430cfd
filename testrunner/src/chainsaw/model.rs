//! Chainsaw's resources as written in a suite: `Test` (v1alpha1), `StepTemplate`, the steps and operations
//! (`pkg/apis/v1alpha1/{test,step,operation,action}.go`). Field names are chainsaw's; fields that are parsed
//! but not acted on are kept so that a suite using them still loads.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// `chainsaw.kyverno.io/v1alpha1 Test`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Test {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: Metadata,
    pub spec: TestSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestSpec {
    pub description: Option<String>,
    #[serde(default)]
    pub skip: Option<bool>,
    pub concurrent: Option<bool>,
    pub fail_fast: Option<bool>,
    #[serde(default)]
    pub timeouts: Timeouts,
    pub skip_delete: Option<bool>,
    pub template: Option<bool>,
    pub compiler: Option<String>,
    pub namespace: Option<String>,
    pub namespace_template: Option<Value>,
    pub namespace_template_compiler: Option<String>,
    pub fast_namespace_deletion: Option<bool>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    #[serde(default)]
    pub scenarios: Vec<Scenario>,
    #[serde(default)]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub catch: Vec<Operation>,
    pub force_termination_grace_period: Option<String>,
    pub delay_before_cleanup: Option<String>,
    pub deletion_propagation_policy: Option<String>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub name: Option<String>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
}

/// A user binding: `value` is templated (strings `(expr)` evaluated) when it is bound.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Binding {
    pub name: String,
    pub compiler: Option<String>,
    #[serde(default)]
    pub value: Value,
}

/// Per operation type timeouts as Go durations (`5s`, `1m30s`); unset fields inherit.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeouts {
    pub apply: Option<String>,
    pub assert: Option<String>,
    pub cleanup: Option<String>,
    pub delete: Option<String>,
    pub error: Option<String>,
    pub exec: Option<String>,
}

/// A `TestStep` (`use` is resolved at load time: see `discovery`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Step {
    pub name: Option<String>,
    #[serde(rename = "use")]
    pub use_: Option<Use>,
    pub description: Option<String>,
    #[serde(default)]
    pub timeouts: Timeouts,
    pub deletion_propagation_policy: Option<String>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
    pub skip_delete: Option<bool>,
    pub template: Option<bool>,
    pub compiler: Option<String>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    #[serde(default, rename = "try")]
    pub try_: Vec<Operation>,
    #[serde(default)]
    pub catch: Vec<Operation>,
    #[serde(default)]
    pub finally: Vec<Operation>,
    #[serde(default)]
    pub cleanup: Vec<Operation>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Use {
    pub template: String,
    #[serde(default)]
    pub with: UseWith,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UseWith {
    #[serde(default)]
    pub bindings: Vec<Binding>,
}

/// `chainsaw.kyverno.io/v1alpha1 StepTemplate`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepTemplate {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: Metadata,
    pub spec: StepTemplateSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepTemplateSpec {
    #[serde(default)]
    pub bindings: Vec<Binding>,
    #[serde(default, rename = "try")]
    pub try_: Vec<Operation>,
    #[serde(default)]
    pub catch: Vec<Operation>,
    #[serde(default)]
    pub finally: Vec<Operation>,
    #[serde(default)]
    pub cleanup: Vec<Operation>,
}

/// One entry of `try`/`catch`/`finally`/`cleanup`: exactly one action plus the shared fields.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Operation {
    pub name: Option<String>,
    pub description: Option<String>,
    pub continue_on_error: Option<bool>,
    /// The default compiler of the operation's expressions (`jp`; `cel` is not supported).
    pub compiler: Option<String>,
    pub apply: Option<ResourceAction>,
    pub create: Option<ResourceAction>,
    pub patch: Option<ResourceAction>,
    pub update: Option<ResourceAction>,
    pub assert: Option<CheckAction>,
    pub error: Option<CheckAction>,
    pub delete: Option<DeleteAction>,
    pub script: Option<ScriptAction>,
    pub command: Option<CommandAction>,
    pub sleep: Option<SleepAction>,
    pub wait: Option<WaitAction>,
    pub events: Option<CollectAction>,
    pub pod_logs: Option<CollectAction>,
    pub describe: Option<CollectAction>,
    pub get: Option<CollectAction>,
    pub proxy: Option<Value>,
}

/// The one action an operation holds.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    Apply(&'a ResourceAction),
    Create(&'a ResourceAction),
    Patch(&'a ResourceAction),
    Update(&'a ResourceAction),
    Assert(&'a CheckAction),
    Error(&'a CheckAction),
    Delete(&'a DeleteAction),
    Script(&'a ScriptAction),
    Command(&'a CommandAction),
    Sleep(&'a SleepAction),
    Wait(&'a WaitAction),
    Events(&'a CollectAction),
    PodLogs(&'a CollectAction),
    Describe(&'a CollectAction),
    Get(&'a CollectAction),
    Proxy(&'a Value),
}

impl Action<'_> {
    /// The operation type as chainsaw names it in its output and reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Action::Apply(_) => "apply",
            Action::Create(_) => "create",
            Action::Patch(_) => "patch",
            Action::Update(_) => "update",
            Action::Assert(_) => "assert",
            Action::Error(_) => "error",
            Action::Delete(_) => "delete",
            Action::Script(_) => "script",
            Action::Command(_) => "command",
            Action::Sleep(_) => "sleep",
            Action::Wait(_) => "wait",
            Action::Events(_) => "events",
            Action::PodLogs(_) => "podLogs",
            Action::Describe(_) => "describe",
            Action::Get(_) => "get",
            Action::Proxy(_) => "proxy",
        }
    }

    /// Whether chainsaw allows this action in `catch`, `finally` and `cleanup` (reference 2.3).
    pub fn allowed_in_handlers(&self) -> bool {
        matches!(
            self,
            Action::PodLogs(_)
                | Action::Events(_)
                | Action::Describe(_)
                | Action::Wait(_)
                | Action::Get(_)
                | Action::Delete(_)
                | Action::Command(_)
                | Action::Script(_)
                | Action::Sleep(_)
        )
    }
}

impl Operation {
    /// The single action of this operation: none or several is an error naming what was found.
    pub fn action(&self) -> Result<Action<'_>, String> {
        let mut found: Vec<Action<'_>> = Vec::new();
        macro_rules! take {
            ($field:ident, $variant:ident) => {
                if let Some(a) = &self.$field {
                    found.push(Action::$variant(a));
                }
            };
        }
        take!(apply, Apply);
        take!(create, Create);
        take!(patch, Patch);
        take!(update, Update);
        take!(assert, Assert);
        take!(error, Error);
        take!(delete, Delete);
        take!(script, Script);
        take!(command, Command);
        take!(sleep, Sleep);
        take!(wait, Wait);
        take!(events, Events);
        take!(pod_logs, PodLogs);
        take!(describe, Describe);
        take!(get, Get);
        take!(proxy, Proxy);
        match found.len() {
            1 => Ok(found[0]),
            0 => Err(
                "operation has no action (expected one of apply, create, patch, update, assert, error, \
                 delete, script, command, sleep, wait, events, podLogs, describe, get, proxy)"
                    .to_string(),
            ),
            _ => Err(format!(
                "operation has several actions ({}), expected exactly one",
                found.iter().map(|a| a.type_name()).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

/// `expect[]` of apply/create/patch/update/delete: when `match` holds for the object, `check` decides.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    #[serde(rename = "match")]
    pub match_: Option<Value>,
    pub check: Value,
}

/// `outputs[]`: a binding computed after the action, for the rest of the step.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Output {
    pub name: String,
    pub compiler: Option<String>,
    #[serde(rename = "match")]
    pub match_: Option<Value>,
    #[serde(default)]
    pub value: Value,
}

/// apply, create, patch, update.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceAction {
    pub file: Option<String>,
    pub resource: Option<Value>,
    pub template: Option<bool>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    #[serde(default)]
    pub outputs: Vec<Output>,
    #[serde(default)]
    pub expect: Vec<Expectation>,
    pub timeout: Option<String>,
    pub dry_run: Option<bool>,
    pub subresource: Option<String>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

/// assert, error.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckAction {
    pub file: Option<String>,
    pub resource: Option<Value>,
    pub template: Option<bool>,
    pub compiler: Option<String>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    pub timeout: Option<String>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub name: Option<String>,
    pub namespace: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteAction {
    #[serde(rename = "ref")]
    pub ref_: Option<ObjectRef>,
    pub file: Option<String>,
    pub resource: Option<Value>,
    pub template: Option<bool>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    #[serde(default)]
    pub expect: Vec<Expectation>,
    pub deletion_propagation_policy: Option<String>,
    pub timeout: Option<String>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    pub name: String,
    #[serde(default)]
    pub value: Value,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptAction {
    #[serde(default)]
    pub content: String,
    pub shell: Option<String>,
    #[serde(default)]
    pub shell_args: Vec<String>,
    pub work_dir: Option<String>,
    #[serde(default)]
    pub env: Vec<EnvVar>,
    pub check: Option<Value>,
    #[serde(default)]
    pub outputs: Vec<Output>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    pub timeout: Option<String>,
    pub skip_log_output: Option<bool>,
    pub skip_command_output: Option<bool>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandAction {
    pub entrypoint: String,
    #[serde(default)]
    pub args: Vec<String>,
    pub work_dir: Option<String>,
    #[serde(default)]
    pub env: Vec<EnvVar>,
    pub check: Option<Value>,
    #[serde(default)]
    pub outputs: Vec<Output>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    pub timeout: Option<String>,
    pub skip_log_output: Option<bool>,
    pub skip_command_output: Option<bool>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SleepAction {
    pub duration: String,
}

/// wait: `kubectl wait` (reference 2.3).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitAction {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<String>,
    pub format: Option<String>,
    pub timeout: Option<String>,
    #[serde(rename = "for")]
    pub for_: WaitFor,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitFor {
    pub deletion: Option<Value>,
    pub creation: Option<Value>,
    pub condition: Option<WaitCondition>,
    pub json_path: Option<WaitJsonPath>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitCondition {
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitJsonPath {
    pub path: String,
    pub value: Option<String>,
}

/// events, podLogs, describe, get: collectors that print what they find.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CollectAction {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<String>,
    pub container: Option<String>,
    pub tail: Option<i64>,
    pub format: Option<String>,
    pub show_events: Option<bool>,
    pub timeout: Option<String>,
    pub cluster: Option<String>,
    pub clusters: Option<Value>,
}

/// Parses a Go duration (`300ms`, `5s`, `1m30s`, `1h`, `1.5s`), surrounding blanks ignored; the error names
/// the bad text.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    api::duration::parse_go(text.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let table: &[(&str, Option<f64>)] = &[
            ("5s", Some(5.0)),
            ("1m30s", Some(90.0)),
            ("1h", Some(3600.0)),
            ("300ms", Some(0.3)),
            ("1.5s", Some(1.5)),
            ("0", Some(0.0)),
            ("", None),
            ("5", None),
            ("5x", None),
            ("s", None),
        ];
        for (text, want) in table {
            let got = parse_duration(text).ok().map(|d| d.as_secs_f64());
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{text}: {g} != {w}"),
                (None, None) => {}
                _ => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn an_operation_has_exactly_one_action() {
        let op: Operation = serde_json::from_value(serde_json::json!({"sleep": {"duration": "1s"}})).unwrap();
        assert_eq!(op.action().unwrap().type_name(), "sleep");
        let none: Operation = serde_json::from_value(serde_json::json!({"description": "x"})).unwrap();
        assert!(none.action().unwrap_err().contains("no action"));
        let two: Operation = serde_json::from_value(
            serde_json::json!({"sleep": {"duration": "1s"}, "script": {"content": "true"}}),
        )
        .unwrap();
        assert!(two.action().unwrap_err().contains("script, sleep") || two.action().is_err());
        let unknown = serde_json::from_value::<Operation>(serde_json::json!({"aply": {}}));
        assert!(unknown.unwrap_err().to_string().contains("unknown field `aply`"));
    }
}
