//! `kubeling test` on chainsaw suites, end to end: the real binary runs the project's chainsaw suite
//! (`fixtures/e2e/chainsaw`, pods on Docker with the locally built testbox image) against a cluster of its
//! own, a failing test runs its `catch` and `finally`, and public chainsaw suites pass unchanged.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{kubeling_test, repo};

/// The public suites in `../shared/peer-data/suites` (see its SOURCES.md), used in place.
fn peer_suites() -> Option<PathBuf> {
    let p = repo().join("../shared/peer-data/suites");
    p.is_dir().then_some(p)
}

#[test]
fn the_projects_chainsaw_suite_passes_with_a_summary_and_a_junit_report() {
    testbox_image::ensure_testbox_image();
    let reports = tempfile::tempdir().unwrap();
    let dir = reports.path().to_str().unwrap();
    let (code, out) = kubeling_test(
        &repo(),
        &[
            "fixtures/e2e/chainsaw",
            "--report-format",
            "xml",
            "--report-dir",
            dir,
        ],
        Duration::from_secs(300),
    );
    assert_eq!(code, 0, "{out}");
    let tests = [
        "pods",
        "probes",
        "deployment",
        "job",
        "service",
        "script-namespace",
        "catch-finally",
        "conventional",
    ];
    for t in tests {
        assert!(
            out.contains(&format!("--- PASS: fixtures/e2e/chainsaw/{t} (")),
            "{t} did not pass:\n{out}"
        );
    }
    // chainsaw's own lines and summary.
    assert!(out.contains("| SCRIPT    | LOG   | STDOUT"), "{out}");
    assert!(
        out.contains("Tests Summary...\n- Passed  tests 8\n- Failed  tests 0\n- Skipped tests 0\nDone."),
        "{out}"
    );
    assert!(
        out.contains("Tests: 8 passed, 0 failed, 0 skipped, 8 total"),
        "{out}"
    );
    let xml: Vec<PathBuf> = std::fs::read_dir(reports.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    assert_eq!(xml.len(), 1, "one JUnit report: {xml:?}");
    let xml = std::fs::read_to_string(&xml[0]).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    for t in tests {
        assert!(xml.contains(&format!("name=\"{t}\"")), "{t} in the report: {xml}");
    }
    assert!(
        xml.contains("name=\"run-a-pod\""),
        "steps are in the report: {xml}"
    );
    assert!(!xml.contains("<failure"), "{xml}");
}

const FAILING: &str = r#"apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata:
  name: fails
spec:
  steps:
  - name: broken
    try:
    - apply:
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: settings
          data:
            mode: fast
            level: "1"
    - assert:
        timeout: 2s
        resource:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: settings
          data:
            mode: slow
            level: "1"
    - script:
        content: echo NEVER-RUNS
    catch:
    - script:
        content: echo "CATCH-RAN in $NAMESPACE"
    finally:
    - script:
        content: echo FINALLY-RAN
  - name: not-reached
    try:
    - script:
        content: echo NOT-REACHED
---
apiVersion: chainsaw.kyverno.io/v1alpha1
kind: Test
metadata:
  name: passes
spec:
  steps:
  - try:
    - script:
        content: echo ok
"#;

#[test]
fn a_failing_chainsaw_test_runs_catch_and_finally_and_exits_1() {
    let suite = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(suite.path().join("t")).unwrap();
    std::fs::write(suite.path().join("t/chainsaw-test.yaml"), FAILING).unwrap();
    let started = Instant::now();
    let (code, out) = kubeling_test(suite.path(), &["."], Duration::from_secs(120));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--- FAIL: ./fails ("), "{out}");
    assert!(out.contains("--- PASS: ./passes ("), "{out}");
    assert!(
        out.contains("CATCH-RAN in chainsaw-"),
        "catch ran with $NAMESPACE:\n{out}"
    );
    assert!(out.contains("FINALLY-RAN"), "finally ran:\n{out}");
    assert!(
        !out.contains("NEVER-RUNS\n") && !out.contains("NOT-REACHED\n"),
        "nothing ran after the failure:\n{out}"
    );
    assert!(
        out.contains("data.mode: Invalid value: \"fast\": Expected value: \"slow\""),
        "the failure names the field:\n{out}"
    );
    assert!(
        !out.contains("data.level:"),
        "matching fields are not in the diff:\n{out}"
    );
    assert!(
        out.contains("- Failed  tests 1") && out.contains("Done with failures."),
        "{out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the 2 s assert timeout was honoured: {:?}",
        started.elapsed()
    );
}

/// chainsaw's own examples that need neither an image from a registry (`wait` runs nginx), CEL (`cel`,
/// `namespace-template-config`), `x_metrics_decode` (`metrics-decode`) nor `--values`/`--set` (`values`).
/// `patch` is left out too: its pod/status step asserts `status.conditions` is exactly the one condition it
/// patched in, which holds only until the scheduler and node agent add theirs (a race upstream too; here the
/// node agent usually wins).
const EXAMPLES: &[&str] = &[
    "basic",
    "quick-start",
    "inline",
    "deployment",
    "delete",
    "update",
    "list",
    "array-assertions",
    "jmespath-label-condition",
    "bindings",
    "template",
    "yaml-anchors",
    "scenarios",
    "scenarios-bindings",
    "namespace-template",
    "step-template-bindings",
    "test-info",
    "outputs",
    "apply-outputs-1",
    "apply-outputs-2",
    "command-output",
    "script-env",
    "sleep",
    "timeout",
    "catch",
    "finally",
    "delete-test",
    "non-resource-assertion",
    "negative-resource",
    "negative-script",
    "field-validation",
    "k8s-server-version",
];

#[test]
fn chainsaws_own_examples_pass_unchanged() {
    let Some(suites) = peer_suites() else {
        eprintln!("skipped: ../shared/peer-data/suites is not here");
        return;
    };
    let pattern = format!("^({})$", EXAMPLES.join("|"));
    let (code, out) = kubeling_test(
        &suites.join("chainsaw-examples/testdata/e2e"),
        &["examples", "--test", &pattern, "--parallel", "8"],
        Duration::from_secs(400),
    );
    assert_eq!(code, 0, "{out}");
    // Two Test documents are named `quick-start` and two `delete`; scenarios run once per scenario.
    assert!(
        out.contains("Tests: 36 passed, 0 failed, 0 skipped, 36 total"),
        "{out}"
    );
}

#[test]
fn conformance_chainsaw_api_cases_without_images_pass_unchanged() {
    let Some(suites) = peer_suites() else {
        eprintln!("skipped: ../shared/peer-data/suites is not here");
        return;
    };
    // The suite's `.chainsaw.yaml` (templating off, 1 h timeouts) is read from the working directory, as
    // chainsaw does. labels-annotations runs nginx:1.27, which no registry serves here.
    let (code, out) = kubeling_test(
        &suites.join("conformance-chainsaw"),
        &["e2e/api", "--test", "^(finalizers|namespace-lifecycle)$"],
        Duration::from_secs(300),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Tests: 2 passed, 0 failed"), "{out}");
}
