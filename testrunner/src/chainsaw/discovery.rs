//! Finding and loading chainsaw tests (reference 2.2): every directory under each test dir, recursively and
//! sorted, holding `<testFile>.yaml` (else `.yml`, else `.json`), whose `Test` documents are each a test; or
//! else the conventional mode, files `^(\d+)-(.*)\.(yaml|yml)$` grouped by their digit string. Steps that
//! `use:` a `StepTemplate` are inlined here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::model::{
    Binding, CheckAction, Metadata, Operation, ResourceAction, Step, StepTemplate, Test, TestSpec,
};

/// A test found on disk, or the reason its file could not be loaded (that test fails, the others run).
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The directory holding the test: file references are relative to it.
    pub base_path: PathBuf,
    /// The file the test came from (`None` for a conventional test).
    pub file: Option<PathBuf>,
    pub result: Result<Test, String>,
}

impl Discovered {
    /// The test name: `metadata.name`, or the directory's for a load error.
    pub fn name(&self) -> String {
        match &self.result {
            Ok(t) => t.metadata.name.clone(),
            Err(_) => conventional_name(&self.base_path),
        }
    }
}

/// `lower(basename)` with `_` turned into `-`.
pub fn conventional_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().to_lowercase().replace('_', "-"))
        .unwrap_or_default()
}

/// Every directory under `root` (itself included), sorted by path.
fn directories(root: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    out.push(root.to_path_buf());
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(root)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for d in subdirs {
        directories(&d, out)?;
    }
    Ok(())
}

/// Discovers the tests under `roots`. A root that does not exist is an error.
pub fn discover(roots: &[PathBuf], test_file: &str) -> Result<Vec<Discovered>, String> {
    let mut dirs = Vec::new();
    for root in roots {
        if !root.is_dir() {
            return Err(format!("test directory {} does not exist", root.display()));
        }
        directories(root, &mut dirs).map_err(|e| format!("{}: {e}", root.display()))?;
    }
    dirs.sort();
    dirs.dedup();
    let mut found = Vec::new();
    for dir in dirs {
        found.extend(discover_dir(&dir, test_file));
    }
    Ok(found)
}

fn test_file_in(dir: &Path, test_file: &str) -> Option<PathBuf> {
    if Path::new(test_file).extension().is_some() {
        let p = dir.join(test_file);
        return p.is_file().then_some(p);
    }
    ["yaml", "yml", "json"]
        .iter()
        .map(|ext| dir.join(format!("{test_file}.{ext}")))
        .find(|p| p.is_file())
}

/// The tests of one directory (none when it is not a test directory).
pub fn discover_dir(dir: &Path, test_file: &str) -> Vec<Discovered> {
    if let Some(file) = test_file_in(dir, test_file) {
        return match load_test_file(&file) {
            Ok(tests) => tests
                .into_iter()
                .map(|t| Discovered {
                    base_path: dir.to_path_buf(),
                    file: Some(file.clone()),
                    result: Ok(t),
                })
                .collect(),
            Err(e) => vec![Discovered {
                base_path: dir.to_path_buf(),
                file: Some(file.clone()),
                result: Err(e),
            }],
        };
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    match conventional_test(&conventional_name(dir), &names) {
        Some(test) => vec![Discovered {
            base_path: dir.to_path_buf(),
            file: None,
            result: Ok(test),
        }],
        None => Vec::new(),
    }
}

/// Splits `NN-rest.yaml`/`.yml` into (`NN`, `rest`).
pub fn step_file_name(name: &str) -> Option<(&str, &str)> {
    let stem = name.strip_suffix(".yaml").or_else(|| name.strip_suffix(".yml"))?;
    let digits = stem.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 || stem.as_bytes()[digits] != b'-' {
        return None;
    }
    Some((&stem[..digits], &stem[digits + 1..]))
}

/// The conventional test of a directory with these file names, or `None` when no file is a step file.
/// Steps are ordered by their digit strings (so `10` before `2`, and `1` and `01` are different steps);
/// within a step: applies, then asserts (`NN-assert`), then errors (`NN-errors`), each by file name.
pub fn conventional_test(name: &str, files: &[String]) -> Option<Test> {
    let mut steps: BTreeMap<&str, [Vec<&str>; 3]> = BTreeMap::new();
    for f in files {
        let Some((digits, rest)) = step_file_name(f) else {
            continue;
        };
        let slot = match rest {
            "assert" => 1,
            "errors" => 2,
            _ => 0,
        };
        steps.entry(digits).or_default()[slot].push(f);
    }
    if steps.is_empty() {
        return None;
    }
    let steps = steps
        .into_iter()
        .map(|(digits, mut groups)| {
            let mut ops = Vec::new();
            for (slot, files) in groups.iter_mut().enumerate() {
                files.sort();
                for f in files.iter() {
                    let file = Some(f.to_string());
                    ops.push(match slot {
                        0 => Operation {
                            apply: Some(ResourceAction {
                                file,
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        1 => Operation {
                            assert: Some(CheckAction {
                                file,
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        _ => Operation {
                            error: Some(CheckAction {
                                file,
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                    });
                }
            }
            Step {
                name: Some(format!("step-{digits}")),
                try_: ops,
                ..Default::default()
            }
        })
        .collect();
    Some(Test {
        api_version: "chainsaw.kyverno.io/v1alpha1".to_string(),
        kind: "Test".to_string(),
        metadata: Metadata {
            name: name.to_string(),
            ..Default::default()
        },
        spec: TestSpec {
            steps,
            ..Default::default()
        },
    })
}

/// The YAML documents of a text, anchors resolved and `<<` merge keys applied, as JSON values. A syntax
/// error names the line.
pub fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let mut v = serde_norway::Value::deserialize(doc).map_err(|e| format!("document {}: {e}", i + 1))?;
        v.apply_merge().map_err(|e| format!("document {}: {e}", i + 1))?;
        if v.is_null() {
            continue;
        }
        docs.push(serde_json::to_value(&v).map_err(|e| format!("document {}: {e}", i + 1))?);
    }
    Ok(docs)
}

/// Reads a file's YAML documents; errors name the file.
pub fn read_documents(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    yaml_documents(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Loads the `Test` documents of a test file, with step templates inlined.
pub fn load_test_file(path: &Path) -> Result<Vec<Test>, String> {
    let docs = read_documents(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tests = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let where_ = format!("{}: document {}", path.display(), i + 1);
        let kind = doc
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let api = doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if kind != "Test" || !api.starts_with("chainsaw.kyverno.io/") {
            return Err(format!(
                "{where_}: expected a chainsaw.kyverno.io Test, found {api:?} {kind:?}"
            ));
        }
        let mut test: Test = serde_json::from_value(doc).map_err(|e| format!("{where_}: {e}"))?;
        for (s, step) in test.spec.steps.iter_mut().enumerate() {
            inline_template(step, dir).map_err(|e| format!("{where_}: spec.steps[{s}]: {e}"))?;
            check_operations(step).map_err(|e| format!("{where_}: spec.steps[{s}].{e}"))?;
        }
        for (o, op) in test.spec.catch.iter().enumerate() {
            check_handler(op).map_err(|e| format!("{where_}: spec.catch[{o}]: {e}"))?;
        }
        tests.push(test);
    }
    Ok(tests)
}

fn check_handler(op: &Operation) -> Result<(), String> {
    let a = op.action()?;
    if !a.allowed_in_handlers() {
        return Err(format!(
            "{} is not allowed here (catch, finally and cleanup take podLogs, events, describe, wait, get, delete, command, script, sleep)",
            a.type_name()
        ));
    }
    Ok(())
}

/// Every operation has exactly one action, and handlers only the allowed ones.
fn check_operations(step: &Step) -> Result<(), String> {
    for (i, op) in step.try_.iter().enumerate() {
        op.action().map_err(|e| format!("try[{i}]: {e}"))?;
    }
    for (list, ops) in [
        ("catch", &step.catch),
        ("finally", &step.finally),
        ("cleanup", &step.cleanup),
    ] {
        for (i, op) in ops.iter().enumerate() {
            check_handler(op).map_err(|e| format!("{list}[{i}]: {e}"))?;
        }
    }
    Ok(())
}

/// Inlines `use: {template, with}`: the template's bindings then `with.bindings` (so those win), and its
/// try/catch/finally/cleanup appended to the step's.
fn inline_template(step: &mut Step, dir: &Path) -> Result<(), String> {
    let Some(use_) = step.use_.take() else {
        return Ok(());
    };
    let path = dir.join(&use_.template);
    let docs = read_documents(&path)?;
    let [doc] = <[Value; 1]>::try_from(docs).map_err(|d| {
        format!(
            "{}: expected one StepTemplate document, found {}",
            path.display(),
            d.len()
        )
    })?;
    let template: StepTemplate =
        serde_json::from_value(doc).map_err(|e| format!("{}: {e}", path.display()))?;
    if template.kind != "StepTemplate" {
        return Err(format!(
            "{}: expected kind StepTemplate, found {:?}",
            path.display(),
            template.kind
        ));
    }
    let mut bindings: Vec<Binding> = template.spec.bindings;
    bindings.extend(use_.with.bindings);
    bindings.append(&mut step.bindings);
    step.bindings = bindings;
    step.try_.extend(template.spec.try_);
    step.catch.extend(template.spec.catch);
    step.finally.extend(template.spec.finally);
    step.cleanup.extend(template.spec.cleanup);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(t: &Test) -> Vec<(String, Vec<String>)> {
        t.spec
            .steps
            .iter()
            .map(|s| {
                let ops = s
                    .try_
                    .iter()
                    .map(|o| {
                        let a = o.action().unwrap();
                        let f = o
                            .apply
                            .as_ref()
                            .and_then(|x| x.file.clone())
                            .or_else(|| o.assert.as_ref().and_then(|x| x.file.clone()))
                            .or_else(|| o.error.as_ref().and_then(|x| x.file.clone()));
                        format!("{} {}", a.type_name(), f.unwrap_or_default())
                    })
                    .collect();
                (s.name.clone().unwrap_or_default(), ops)
            })
            .collect()
    }

    #[test]
    fn step_file_names_follow_chainsaw_not_kuttl() {
        let table: &[(&str, Option<(&str, &str)>)] = &[
            ("00-install.yaml", Some(("00", "install"))),
            ("1-assert.yml", Some(("1", "assert"))),
            ("10-errors.yaml", Some(("10", "errors"))),
            ("00-assert-pods.yaml", Some(("00", "assert-pods"))),
            ("00.yaml", None),
            ("a-00.yaml", None),
            ("00-x.json", None),
            ("README.md", None),
        ];
        for (name, want) in table {
            assert_eq!(step_file_name(name), *want, "{name}");
        }
    }

    #[test]
    fn conventional_steps_sort_by_digit_string_and_group_by_type() {
        let files: Vec<String> = [
            "2-b.yaml",
            "10-a.yaml",
            "01-x.yaml",
            "1-errors.yaml",
            "1-assert.yaml",
            "1-b.yaml",
            "1-a.yaml",
            "00-assert-pods.yaml",
            "notes.txt",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t = conventional_test("my-test", &files).unwrap();
        assert_eq!(t.metadata.name, "my-test");
        let want: Vec<(String, Vec<String>)> = vec![
            ("step-00".into(), vec!["apply 00-assert-pods.yaml".into()]),
            ("step-01".into(), vec!["apply 01-x.yaml".into()]),
            (
                "step-1".into(),
                vec![
                    "apply 1-a.yaml".into(),
                    "apply 1-b.yaml".into(),
                    "assert 1-assert.yaml".into(),
                    "error 1-errors.yaml".into(),
                ],
            ),
            ("step-10".into(), vec!["apply 10-a.yaml".into()]),
            ("step-2".into(), vec!["apply 2-b.yaml".into()]),
        ];
        assert_eq!(kinds(&t), want);
        assert!(conventional_test("x", &["README.md".to_string()]).is_none());
        assert_eq!(conventional_name(Path::new("/a/My_Test")), "my-test");
    }

    #[test]
    fn test_files_load_several_documents_templates_and_report_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("chainsaw-test.yaml"),
            "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: one}\nspec:\n  steps:\n  - use:\n      template: tpl.yaml\n      with:\n        bindings: [{name: input, value: from-test}]\n---\napiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: two}\nspec:\n  steps:\n  - try:\n    - sleep: {duration: 1s}\n    finally:\n    - script: {content: echo bye}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("tpl.yaml"),
            "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: StepTemplate\nmetadata: {name: t}\nspec:\n  bindings: [{name: input, value: from-template}]\n  try:\n  - create: {resource: {apiVersion: v1, kind: ConfigMap, metadata: {name: ($input)}}}\n",
        )
        .unwrap();
        let found = discover(&[d.to_path_buf()], "chainsaw-test").unwrap();
        assert_eq!(found.len(), 2);
        let one = found[0].result.as_ref().unwrap();
        assert_eq!(one.metadata.name, "one");
        let names: Vec<_> = one.spec.steps[0]
            .bindings
            .iter()
            .map(|b| b.value.clone())
            .collect();
        assert_eq!(
            names,
            vec![Value::from("from-template"), Value::from("from-test")]
        );
        assert_eq!(one.spec.steps[0].try_.len(), 1);
        assert_eq!(found[1].result.as_ref().unwrap().metadata.name, "two");

        let bad = dir.path().join("bad");
        std::fs::create_dir(&bad).unwrap();
        std::fs::write(bad.join("chainsaw-test.yaml"), "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: bad}\nspec:\n  steps:\n  - try:\n    - aply: {file: x.yaml}\n").unwrap();
        let e = discover_dir(&bad, "chainsaw-test").remove(0).result.unwrap_err();
        assert!(
            e.contains("chainsaw-test.yaml: document 1") && e.contains("unknown field `aply`"),
            "{e}"
        );
        std::fs::write(bad.join("chainsaw-test.yaml"), "kind: Test\nspec: [\n").unwrap();
        let e = discover_dir(&bad, "chainsaw-test").remove(0).result.unwrap_err();
        assert!(e.contains("line"), "{e}");
        std::fs::write(bad.join("chainsaw-test.yaml"), "apiVersion: chainsaw.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: bad}\nspec:\n  steps:\n  - try: [{sleep: {duration: 1s}}]\n    catch: [{apply: {file: x.yaml}}]\n").unwrap();
        let e = discover_dir(&bad, "chainsaw-test").remove(0).result.unwrap_err();
        assert!(e.contains("spec.steps[0].catch[0]: apply is not allowed"), "{e}");
        assert!(discover(&[d.join("missing")], "chainsaw-test").is_err());
    }

    #[test]
    fn yaml_anchors_and_merge_keys_resolve() {
        let docs = yaml_documents("base: &b {a: 1}\nother:\n  <<: *b\n  c: 2\n---\n---\nx: 1\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["other"], serde_json::json!({"a": 1, "c": 2}));
    }
}
