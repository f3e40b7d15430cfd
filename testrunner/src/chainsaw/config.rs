//! Chainsaw's `Configuration` (`chainsaw.kyverno.io/v1alpha2`, and the flat v1alpha1 converted to it) and
//! the settings a run uses, with chainsaw's defaults (reference 2.1, 2.7).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::model::{Operation, Timeouts, parse_duration};

/// Resolved timeouts per operation type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedTimeouts {
    pub apply: Duration,
    pub assert: Duration,
    pub cleanup: Duration,
    pub delete: Duration,
    pub error: Duration,
    pub exec: Duration,
}

impl Default for ResolvedTimeouts {
    /// apply 5s, assert 30s, cleanup 30s, delete 15s, error 30s, exec 5s.
    fn default() -> Self {
        ResolvedTimeouts {
            apply: Duration::from_secs(5),
            assert: Duration::from_secs(30),
            cleanup: Duration::from_secs(30),
            delete: Duration::from_secs(15),
            error: Duration::from_secs(30),
            exec: Duration::from_secs(5),
        }
    }
}

impl ResolvedTimeouts {
    /// These timeouts with the fields `more` sets replaced (the more specific level wins).
    pub fn overlay(&self, more: &Timeouts) -> Result<ResolvedTimeouts, String> {
        let pick = |s: &Option<String>, d: Duration| {
            s.as_deref()
                .map(parse_duration)
                .transpose()
                .map(|v| v.unwrap_or(d))
        };
        Ok(ResolvedTimeouts {
            apply: pick(&more.apply, self.apply)?,
            assert: pick(&more.assert, self.assert)?,
            cleanup: pick(&more.cleanup, self.cleanup)?,
            delete: pick(&more.delete, self.delete)?,
            error: pick(&more.error, self.error)?,
            exec: pick(&more.exec, self.exec)?,
        })
    }
}

/// Report settings: no report unless configured (`report` in the Configuration or a flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportSettings {
    /// `JSON`, `XML`, `JUNIT-TEST`, `JUNIT-STEP`, `JUNIT-OPERATION`.
    pub format: String,
    pub name: String,
    pub path: Option<String>,
}

/// What a run uses, from the Configuration and then the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub timeouts: ResolvedTimeouts,
    pub skip_delete: bool,
    pub delay_before_cleanup: Option<Duration>,
    pub propagation: String,
    pub test_file: String,
    pub full_name: bool,
    pub include_test_regex: Option<String>,
    pub exclude_test_regex: Option<String>,
    pub fail_fast: bool,
    /// `None`: the number of CPUs (Go's GOMAXPROCS default).
    pub parallel: Option<usize>,
    pub namespace: Option<String>,
    pub namespace_template: Option<Value>,
    pub fast_namespace_deletion: bool,
    pub report: Option<ReportSettings>,
    pub templating: bool,
    pub catch: Vec<Operation>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            timeouts: ResolvedTimeouts::default(),
            skip_delete: false,
            delay_before_cleanup: None,
            propagation: "Background".to_string(),
            test_file: "chainsaw-test".to_string(),
            full_name: false,
            include_test_regex: None,
            exclude_test_regex: None,
            fail_fast: false,
            parallel: None,
            namespace: None,
            namespace_template: None,
            fast_namespace_deletion: false,
            report: None,
            templating: true,
            catch: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    api_version: String,
    kind: String,
    #[serde(default)]
    spec: Value,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Spec {
    #[serde(default)]
    timeouts: Timeouts,
    #[serde(default)]
    cleanup: V2Cleanup,
    #[serde(default)]
    deletion: V2Deletion,
    #[serde(default)]
    discovery: V2Discovery,
    #[serde(default)]
    execution: V2Execution,
    #[serde(default)]
    namespace: V2Namespace,
    report: Option<V2Report>,
    #[serde(default)]
    templating: V2Templating,
    #[serde(default)]
    error: V2Error,
    clusters: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Cleanup {
    skip_delete: Option<bool>,
    delay_before_cleanup: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Deletion {
    propagation: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Discovery {
    test_file: Option<String>,
    full_name: Option<bool>,
    include_test_regex: Option<String>,
    exclude_test_regex: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Execution {
    fail_fast: Option<bool>,
    parallel: Option<usize>,
    repeat_count: Option<u32>,
    force_termination_grace_period: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Namespace {
    name: Option<String>,
    template: Option<Value>,
    compiler: Option<String>,
    fast_delete: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Report {
    format: Option<String>,
    name: Option<String>,
    path: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Templating {
    enabled: Option<bool>,
    compiler: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct V2Error {
    #[serde(default)]
    catch: Vec<Operation>,
}

/// The flat v1alpha1 spec (converted to v1alpha2 by chainsaw).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct V1Spec {
    #[serde(default)]
    timeouts: Timeouts,
    skip_delete: Option<bool>,
    fail_fast: Option<bool>,
    parallel: Option<usize>,
    report_format: Option<String>,
    report_name: Option<String>,
    report_path: Option<String>,
    namespace: Option<String>,
    namespace_template: Option<Value>,
    full_name: Option<bool>,
    include_test_regex: Option<String>,
    exclude_test_regex: Option<String>,
    test_file: Option<String>,
    delay_before_cleanup: Option<String>,
    template: Option<bool>,
    #[serde(default)]
    catch: Vec<Operation>,
    deletion_propagation_policy: Option<String>,
}

/// Parses a Configuration document (YAML or JSON) into settings over chainsaw's defaults.
pub fn parse_configuration(text: &str) -> Result<Settings, String> {
    let doc: Document = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    if doc.kind != "Configuration" {
        return Err(format!("expected kind Configuration, found {:?}", doc.kind));
    }
    let spec = if doc.spec.is_null() {
        Value::Object(Default::default())
    } else {
        doc.spec
    };
    let mut s = Settings::default();
    let dur = |v: Option<String>| v.as_deref().map(parse_duration).transpose();
    match doc.api_version.as_str() {
        "chainsaw.kyverno.io/v1alpha2" => {
            let v: V2Spec = serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?;
            s.timeouts = s.timeouts.overlay(&v.timeouts)?;
            s.skip_delete = v.cleanup.skip_delete.unwrap_or(false);
            s.delay_before_cleanup = dur(v.cleanup.delay_before_cleanup)?;
            if let Some(p) = v.deletion.propagation {
                s.propagation = p;
            }
            if let Some(f) = v.discovery.test_file {
                s.test_file = f;
            }
            s.full_name = v.discovery.full_name.unwrap_or(false);
            s.include_test_regex = v.discovery.include_test_regex;
            s.exclude_test_regex = v.discovery.exclude_test_regex;
            s.fail_fast = v.execution.fail_fast.unwrap_or(false);
            s.parallel = v.execution.parallel;
            let _ = (
                v.execution.repeat_count,
                v.execution.force_termination_grace_period,
                v.clusters,
            );
            s.namespace = v.namespace.name;
            s.namespace_template = v.namespace.template;
            let _ = v.namespace.compiler;
            s.fast_namespace_deletion = v.namespace.fast_delete.unwrap_or(false);
            s.report = v.report.map(|r| ReportSettings {
                format: r.format.unwrap_or_else(|| "JSON".to_string()),
                name: r.name.unwrap_or_else(|| "chainsaw-report".to_string()),
                path: r.path,
            });
            s.templating = v.templating.enabled.unwrap_or(true);
            let _ = v.templating.compiler;
            s.catch = v.error.catch;
        }
        "chainsaw.kyverno.io/v1alpha1" => {
            let v: V1Spec = serde_json::from_value(spec).map_err(|e| format!("spec: {e}"))?;
            s.timeouts = s.timeouts.overlay(&v.timeouts)?;
            s.skip_delete = v.skip_delete.unwrap_or(false);
            s.fail_fast = v.fail_fast.unwrap_or(false);
            s.parallel = v.parallel;
            if v.report_format.is_some() || v.report_name.is_some() || v.report_path.is_some() {
                s.report = Some(ReportSettings {
                    format: v.report_format.unwrap_or_else(|| "JSON".to_string()),
                    name: v.report_name.unwrap_or_else(|| "chainsaw-report".to_string()),
                    path: v.report_path,
                });
            }
            s.namespace = v.namespace;
            s.namespace_template = v.namespace_template;
            s.full_name = v.full_name.unwrap_or(false);
            s.include_test_regex = v.include_test_regex;
            s.exclude_test_regex = v.exclude_test_regex;
            if let Some(f) = v.test_file {
                s.test_file = f;
            }
            s.delay_before_cleanup = dur(v.delay_before_cleanup)?;
            s.templating = v.template.unwrap_or(true);
            s.catch = v.catch;
            if let Some(p) = v.deletion_propagation_policy {
                s.propagation = p;
            }
        }
        other => return Err(format!("unsupported Configuration apiVersion {other:?}")),
    }
    Ok(s)
}

/// `--config FILE`, else `./.chainsaw.yaml` when it exists, else the defaults. The error names the file.
pub fn load_settings(config: Option<&Path>, cwd: &Path) -> Result<Settings, String> {
    let path = match config {
        Some(p) => p.to_path_buf(),
        None => {
            let p = cwd.join(".chainsaw.yaml");
            if !p.exists() {
                return Ok(Settings::default());
            }
            p
        }
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_configuration(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_chainsaws() {
        let s = Settings::default();
        let t = s.timeouts;
        assert_eq!(
            [t.apply, t.assert, t.cleanup, t.delete, t.error, t.exec].map(|d| d.as_secs()),
            [5, 30, 30, 15, 30, 5]
        );
        assert!(s.templating && !s.skip_delete && !s.fail_fast && s.report.is_none());
        assert_eq!(s.propagation, "Background");
    }

    #[test]
    fn v1alpha2_configuration_parses() {
        let s = parse_configuration(
            "apiVersion: chainsaw.kyverno.io/v1alpha2\nkind: Configuration\nmetadata: {name: c}\nspec:\n  templating: {enabled: false}\n  timeouts: {apply: 1h, exec: 10s}\n  execution: {failFast: true, parallel: 1, forceTerminationGracePeriod: 5s}\n  discovery: {fullName: true}\n  report: {format: XML}\n  namespace:\n    compiler: cel\n    template: {metadata: {annotations: {a: b}}}\n",
        )
        .unwrap();
        assert!(!s.templating && s.fail_fast && s.full_name);
        assert_eq!(s.parallel, Some(1));
        assert_eq!(s.timeouts.apply, Duration::from_secs(3600));
        assert_eq!(s.timeouts.exec, Duration::from_secs(10));
        assert_eq!(s.timeouts.assert, Duration::from_secs(30));
        assert_eq!(
            s.report,
            Some(ReportSettings {
                format: "XML".into(),
                name: "chainsaw-report".into(),
                path: None
            })
        );
        assert!(s.namespace_template.is_some());
    }

    #[test]
    fn v1alpha1_configuration_converts_and_errors_are_clear() {
        let s = parse_configuration(
            "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Configuration\nspec:\n  timeouts: {assert: 2m}\n  skipDelete: true\n  parallel: 4\n  reportFormat: JSON\n",
        )
        .unwrap();
        assert!(s.skip_delete);
        assert_eq!(s.parallel, Some(4));
        assert_eq!(s.timeouts.assert, Duration::from_secs(120));
        assert_eq!(s.report.unwrap().name, "chainsaw-report");
        let e = parse_configuration("apiVersion: chainsaw.kyverno.io/v1alpha2\nkind: Configuration\nspec: {execution: {fialFast: true}}\n")
            .unwrap_err();
        assert!(e.contains("unknown field `fialFast`"), "{e}");
        let e = parse_configuration(
            "apiVersion: chainsaw.kyverno.io/v1alpha2\nkind: Configuration\nspec: {timeouts: {apply: 5x}}\n",
        )
        .unwrap_err();
        assert!(e.contains("invalid duration"), "{e}");
    }
}
