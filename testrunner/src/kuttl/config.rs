//! kuttl's objects as written: the `TestSuite` (`kuttl-test.yaml`), `TestStep`, `TestAssert`, `Command`,
//! and the YAML documents of a file. Unknown fields are ignored, as kuttl's non-strict conversion does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// A file that could not be read or parsed, named with its line when known.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A document does not parse (the YAML error names the line and column).
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
}

/// The YAML documents of a text that have a `kind` (empty documents are skipped, as kuttl does).
pub fn documents(path: &Path, text: &str) -> Result<Vec<Value>, LoadError> {
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| LoadError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if v.get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| !k.is_empty())
        {
            out.push(v);
        } else if !v.is_null() {
            tracing::debug!(path = %path.display(), "skipping a document without a kind");
        }
    }
    Ok(out)
}

/// The documents of a file.
pub fn read_documents(path: &Path) -> Result<Vec<Value>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    documents(path, &text)
}

/// Whether an object is the kuttl kind `kind` (group exactly `kuttl.dev`, any version).
pub fn is_kuttl(obj: &Value, kind: &str) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some(kind)
        && obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|a| a.split('/').next() == Some("kuttl.dev"))
}

/// `k=v[,k2=v2]` (`--test-run-labels`); an empty string is no labels.
pub fn parse_labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
            _ => Err(format!("{p:?} is not a label in the form key=value")),
        })
        .collect()
}

/// Whether a `TestFile`'s `testRunSelector` (a label selector: `matchLabels`, `matchExpressions` with `In`,
/// `NotIn`, `Exists`, `DoesNotExist`) selects the run's labels. A missing or empty selector selects every run.
pub fn run_selected(selector: Option<&Value>, labels: &BTreeMap<String, String>) -> Result<bool, String> {
    let Some(sel) = selector.filter(|s| !s.is_null()) else {
        return Ok(true);
    };
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            if labels.get(k).map(String::as_str) != v.as_str() {
                return Ok(false);
            }
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let have = labels.get(key).map(String::as_str);
        let ok = match e.get("operator").and_then(Value::as_str).unwrap_or_default() {
            "In" => have.is_some_and(|h| values.contains(&h)),
            "NotIn" => have.is_none_or(|h| !values.contains(&h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            op => {
                return Err(format!(
                    "testRunSelector: {op:?} is not a valid label selector operator"
                ));
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// kuttl's `Command`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Command {
    /// A command line (expanded by kuttl, split with shlex, exec'd).
    pub command: String,
    /// A script for `sh -c` (not expanded by kuttl).
    pub script: String,
    /// Append `--namespace <ns>` (commands only).
    pub namespaced: bool,
    /// A non-zero exit is not a failure.
    pub ignore_failure: bool,
    /// Run in the background (suite commands only).
    pub background: bool,
    /// Do not log the output.
    pub skip_log_output: bool,
    /// Seconds: positive wins, negative means none, 0 the caller's.
    pub timeout: i64,
}

/// A `TestStep.delete` reference.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectReference {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// name (empty: every object of the kind, filtered by labels).
    pub name: String,
    /// namespace (empty: the test namespace).
    pub namespace: String,
    /// An equality label selector.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// kuttl's `TestStep`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TestStep {
    /// Objects to delete first.
    pub delete: Vec<ObjectReference>,
    /// Commands run before the applies.
    pub commands: Vec<Command>,
    /// Extra files/directories to apply.
    pub apply: Vec<String>,
    /// Extra files/directories to assert.
    pub assert: Vec<String>,
    /// Extra files/directories that must not match.
    pub error: Vec<String>,
    /// A kubeconfig for this step's commands.
    pub kubeconfig: String,
}

/// A `TestAssert.collectors` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Collector {
    /// `pod`, `events` or `command` (empty: `command` when `command` is set, else `pod`).
    #[serde(rename = "type")]
    pub type_: String,
    /// A pod name.
    pub pod: String,
    /// A namespace (`$NAMESPACE` works).
    pub namespace: String,
    /// A container.
    pub container: String,
    /// A label selector.
    pub selector: String,
    /// Lines of logs (0: 10 with a selector, all with a name).
    pub tail: i64,
    /// A command line.
    pub command: String,
}

/// kuttl's `TestAssert`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TestAssert {
    /// Seconds (0: the suite's).
    pub timeout: i64,
    /// Run when the step fails.
    pub collectors: Vec<Collector>,
    /// Must all exit 0, with the asserts, at one check.
    pub commands: Vec<Command>,
    /// Objects fetched and bound as CEL variables for `assert_all`/`assert_any`.
    pub resource_refs: Vec<ResourceRef>,
    /// CEL expressions that must all be `true`.
    pub assert_all: Vec<CelAssertion>,
    /// CEL expressions of which one at least must be `true`.
    pub assert_any: Vec<CelAssertion>,
}

/// A `TestAssert.resourceRefs` entry: the object to GET and the CEL variable it is bound to.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceRef {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
    /// The namespace ("": the test's).
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The CEL variable name.
    #[serde(rename = "ref")]
    pub ref_: String,
}

/// A `TestAssert.assertAll`/`assertAny` entry.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct CelAssertion {
    /// The CEL expression.
    #[serde(rename = "celExpr")]
    pub cel_expr: String,
}

/// kuttl's `TestSuite`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TestSuite {
    /// The suites.
    pub test_dirs: Vec<String>,
    /// Step timeout in seconds (0: unset, 30).
    pub timeout: i64,
    /// Tests at once (0: unset, 8).
    pub parallel: i64,
    /// A namespace shared by every test ("" : one per test).
    pub namespace: String,
    /// Keep namespaces and objects.
    pub skip_delete: bool,
    /// CRDs applied before the tests.
    pub crd_dir: String,
    /// Manifests applied before the tests (recursively).
    pub manifest_dirs: Vec<String>,
    /// Commands run once before the tests.
    pub commands: Vec<Command>,
    /// Where the report goes.
    pub artifacts_dir: String,
    /// `JSON` or `XML`.
    pub report_format: String,
    /// The report's file name without extension.
    pub report_name: String,
    /// `step` or `test`.
    pub report_granularity: String,
    /// `events` stops the per-case event dump.
    pub suppress: Vec<String>,
    /// Globs of files to skip (None: `README*`).
    pub ignore_files: Option<Vec<String>>,
    /// `metadata.name`, the report's name.
    #[serde(skip)]
    pub name: String,
}

/// Reads a `kuttl-test.yaml`: the document with `kind: TestSuite` in the `kuttl.dev` group.
pub fn load(path: &Path) -> Result<TestSuite, LoadError> {
    let docs = read_documents(path)?;
    let Some(doc) = docs.into_iter().find(|d| is_kuttl(d, "TestSuite")) else {
        return Ok(TestSuite::default());
    };
    let mut suite: TestSuite = serde_json::from_value(doc.clone()).map_err(|e| LoadError::Parse {
        path: path.to_path_buf(),
        message: format!("TestSuite: {e}"),
    })?;
    suite.name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(suite)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_suite_is_read_from_its_document() {
        let text = "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: kuttl.dev/v1beta1\nkind: TestSuite\n\
                    metadata: {name: s}\ntestDirs: [./e2e/pods]\ntimeout: 120\nparallel: 4\nunknownField: 1\n\
                    commands:\n- script: echo hi\n  background: true\n";
        let p = Path::new("kuttl-test.yaml");
        let doc = documents(p, text)
            .unwrap()
            .into_iter()
            .find(|d| is_kuttl(d, "TestSuite"))
            .unwrap();
        let s: TestSuite = serde_json::from_value(doc).unwrap();
        assert_eq!(
            (s.test_dirs, s.timeout, s.parallel),
            (vec!["./e2e/pods".to_string()], 120, 4)
        );
        assert!(s.commands[0].background);
        assert!(s.ignore_files.is_none());
    }

    #[test]
    fn documents_without_a_kind_are_skipped_and_bad_yaml_names_the_line() {
        let p = Path::new("f.yaml");
        let docs = documents(p, "---\n---\nkind: Pod\napiVersion: v1\n---\n").unwrap();
        assert_eq!(docs.len(), 1);
        let e = documents(p, "kind: Pod\nmetadata:\n  name: [a\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f.yaml: ") && e.contains("line"), "{e}");
        assert!(is_kuttl(
            &serde_json::json!({"apiVersion": "kuttl.dev/v1beta1", "kind": "TestStep"}),
            "TestStep"
        ));
        assert!(!is_kuttl(
            &serde_json::json!({"apiVersion": "kudo.dev/v1alpha1", "kind": "TestStep"}),
            "TestStep"
        ));
    }

    #[test]
    fn run_labels_parse_and_test_run_selectors_select_them() {
        let labels = parse_labels("flavor=vanilla, size = big").unwrap();
        assert_eq!(labels.len(), 2);
        assert_eq!(labels["size"], "big");
        assert!(parse_labels("").unwrap().is_empty());
        assert!(parse_labels("flavor").is_err());
        assert!(parse_labels("=x").is_err());
        let cases = [
            (None, true),
            (Some(serde_json::json!({})), true),
            (
                Some(serde_json::json!({"matchLabels": {"flavor": "vanilla"}})),
                true,
            ),
            (
                Some(serde_json::json!({"matchLabels": {"flavor": "chocolate"}})),
                false,
            ),
            (Some(serde_json::json!({"matchLabels": {"other": "x"}})), false),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "size", "operator": "In", "values": ["big", "huge"]}]}),
                ),
                true,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "size", "operator": "NotIn", "values": ["big"]}]}),
                ),
                false,
            ),
            (
                Some(
                    serde_json::json!({"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["yes"]}]}),
                ),
                true,
            ),
            (
                Some(serde_json::json!({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]})),
                false,
            ),
            (
                Some(serde_json::json!({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]})),
                true,
            ),
        ];
        for (sel, want) in cases {
            assert_eq!(run_selected(sel.as_ref(), &labels), Ok(want), "{sel:?}");
        }
        let bad = serde_json::json!({"matchExpressions": [{"key": "gpu", "operator": "Near"}]});
        assert!(run_selected(Some(&bad), &labels).is_err());
        // No run labels: only selectors that need none select the run.
        let none = BTreeMap::new();
        assert_eq!(
            run_selected(
                Some(&serde_json::json!({"matchLabels": {"flavor": "vanilla"}})),
                &none
            ),
            Ok(false)
        );
        assert_eq!(run_selected(Some(&serde_json::json!({})), &none), Ok(true));
    }
}
