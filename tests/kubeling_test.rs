//! `kubeling test`, end to end: the real binary runs kuttl suites against a cluster of its own (`kubeling up`
//! as a child, pods on Docker with the locally built testbox image) and exits 0 or 1 as kuttl does.

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{kubeling_test, repo};

#[test]
fn the_projects_kuttl_suite_passes_with_a_summary_and_a_junit_report() {
    testbox_image::ensure_testbox_image();
    let reports = tempfile::tempdir().unwrap();
    let dir = reports.path().to_str().unwrap();
    let (code, out) = kubeling_test(
        &repo(),
        &[
            "fixtures/e2e/kuttl",
            "--report-format",
            "xml",
            "--report-dir",
            dir,
        ],
        Duration::from_secs(300),
    );
    assert_eq!(code, 0, "{out}");
    for t in [
        "pod-runs",
        "readiness-probe",
        "deployment",
        "job",
        "service-endpointslices",
        "commands-namespace",
    ] {
        assert!(
            out.contains(&format!("--- PASS: fixtures/e2e/kuttl/{t} (")),
            "{t} did not pass:\n{out}"
        );
    }
    assert!(
        out.contains("Tests: 6 passed, 0 failed, 0 skipped, 6 total"),
        "{out}"
    );
    let xml = std::fs::read_to_string(reports.path().join("kuttl-report.xml")).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains("<testsuite tests=\"3\" failures=\"0\""), "{xml}");
    assert!(xml.contains("name=\"step 0-create\""), "step granularity: {xml}");
    assert!(xml.contains("failures=\"0\""), "{xml}");
}

#[test]
fn kuttl_cel_assertions_wait_for_their_expressions_and_a_bad_one_fails_its_test() {
    let suite = tempfile::tempdir().unwrap();
    let write = |case: &str, file: &str, text: &str| {
        let dir = suite.path().join(case);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    };
    let cm = |replicas: u32| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n  replicas: \"{replicas}\"\n"
        )
    };
    let cel = |all: &str, any: &str, timeout: u32| {
        format!(
            "apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: {timeout}\nresourceRefs:\n- apiVersion: v1\n  kind: ConfigMap\n  name: settings\n  ref: cm\nassertAll:\n- celExpr: \"{all}\"\nassertAny:\n- celExpr: \"cm.data.mode == 'slow'\"\n- celExpr: \"{any}\"\n"
        )
    };
    // Step 1's expression holds only once a command (run in the background of the step) scales it up.
    write("holds", "00-settings.yaml", &cm(1));
    write(
        "holds",
        "00-assert.yaml",
        &cel("int(cm.data.replicas) >= 1", "cm.data.mode == 'fast'", 10),
    );
    write(
        "holds",
        "01-scale.yaml",
        "apiVersion: kuttl.dev/v1beta1\nkind: TestStep\ncommands:\n- script: (sleep 1; kubectl -n $NAMESPACE patch configmap settings -p '{\"data\":{\"replicas\":\"3\"}}') > /dev/null 2>&1 &\n",
    );
    write(
        "holds",
        "01-assert.yaml",
        &cel("int(cm.data.replicas) == 3", "true", 20),
    );
    // assertAll false until the timeout: the message names the expression.
    write("false", "00-settings.yaml", &cm(1));
    write(
        "false",
        "00-assert.yaml",
        &cel("int(cm.data.replicas) > 5", "true", 2),
    );
    // An expression that does not compile fails its test, naming the file.
    write("bad", "00-settings.yaml", &cm(1));
    write(
        "bad",
        "00-assert.yaml",
        &cel("int(cm.data.replicas) >", "true", 2),
    );
    let (code, out) = kubeling_test(suite.path(), &[".", "--parallel", "3"], Duration::from_secs(120));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--- PASS: ./holds ("), "{out}");
    assert!(out.contains("--- FAIL: ./false ("), "{out}");
    assert!(
        out.contains("assertAll expression \"int(cm.data.replicas) > 5\" failed"),
        "{out}"
    );
    assert!(out.contains("--- FAIL: ./bad ("), "{out}");
    assert!(out.contains("00-assert.yaml: TestAssert: assertAll[0]"), "{out}");
    assert!(out.contains("Tests: 1 passed, 2 failed"), "{out}");
}

#[test]
fn a_kuttl_test_file_is_used_only_when_its_run_selector_selects_the_run_labels() {
    let suite = tempfile::tempdir().unwrap();
    let case = suite.path().join("flavors");
    std::fs::create_dir_all(&case).unwrap();
    let file = |flavor: &str, name: &str| {
        format!(
            "apiVersion: kuttl.dev/v1beta1\nkind: TestFile\ntestRunSelector:\n  matchLabels:\n    flavor: {flavor}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
        )
    };
    std::fs::write(case.join("00-vanilla.yaml"), file("vanilla", "vanilla")).unwrap();
    std::fs::write(case.join("00-chocolate.yaml"), file("chocolate", "chocolate")).unwrap();
    // The vanilla object must exist, the chocolate one must not have been created.
    std::fs::write(
        case.join("00-assert.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: vanilla\n",
    )
    .unwrap();
    std::fs::write(
        case.join("00-errors.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: chocolate\n",
    )
    .unwrap();
    let (code, out) = kubeling_test(
        suite.path(),
        &[".", "--test-run-labels", "flavor=vanilla", "--timeout", "10"],
        Duration::from_secs(120),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("--- PASS: ./flavors ("), "{out}");
    // Without the labels neither file is used, so the assert fails.
    let (code, out) = kubeling_test(suite.path(), &[".", "--timeout", "3"], Duration::from_secs(120));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--- FAIL: ./flavors ("), "{out}");
}

#[test]
fn a_broken_assertion_fails_with_a_diff_naming_the_field() {
    let suite = tempfile::tempdir().unwrap();
    let case = suite.path().join("broken");
    std::fs::create_dir_all(&case).unwrap();
    std::fs::write(
        case.join("00-config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: fast\n  level: \"1\"\n",
    )
    .unwrap();
    std::fs::write(
        case.join("00-assert.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: slow\n  level: \"1\"\n---\n\
         apiVersion: kuttl.dev/v1beta1\nkind: TestAssert\ntimeout: 3\n",
    )
    .unwrap();
    // A passing test beside it still passes.
    let good = suite.path().join("good");
    std::fs::create_dir_all(&good).unwrap();
    std::fs::write(
        good.join("00-config.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
    )
    .unwrap();
    std::fs::write(
        good.join("00-assert.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
    )
    .unwrap();
    let started = Instant::now();
    let (code, out) = kubeling_test(suite.path(), &[".", "--parallel", "2"], Duration::from_secs(120));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--- FAIL: ./broken ("), "{out}");
    assert!(out.contains("--- PASS: ./good ("), "{out}");
    assert!(out.contains("failed in step 0-config"), "{out}");
    assert!(
        out.contains(".data.mode: value mismatch, expected: \"slow\" != actual: \"fast\""),
        "the diff names the field:\n{out}"
    );
    assert!(
        !out.contains(".data.level"),
        "matching fields are not in the diff:\n{out}"
    );
    assert!(out.contains("Tests: 1 passed, 1 failed"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the TestAssert's 3 s timeout was honoured: {:?}",
        started.elapsed()
    );
}

/// The public suites in `../shared/peer-data/suites` (see its SOURCES.md), used in place.
fn peer_suites() -> Option<PathBuf> {
    let p = repo().join("../shared/peer-data/suites");
    p.is_dir().then_some(p)
}

/// Upstream runs these on envtest, where `--start-control-plane` turns on `skipDelete`; the pods name images
/// no registry serves here, so they stay Pending as the asserts expect.
#[test]
fn kuttls_own_harness_fixtures_pass_unchanged() {
    let Some(suites) = peer_suites() else {
        eprintln!("skipped: ../shared/peer-data/suites is not here");
        return;
    };
    let (code, out) = kubeling_test(
        &suites.join("kuttl-harness/internal/harness"),
        &["test_data", "--timeout", "20", "--skip-delete"],
        Duration::from_secs(300),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Tests: 7 passed, 0 failed"), "{out}");
}

#[test]
fn conformance_kuttl_api_cases_without_images_pass_unchanged() {
    let Some(suites) = peer_suites() else {
        eprintln!("skipped: ../shared/peer-data/suites is not here");
        return;
    };
    // labels-annotations runs nginx:1.27, which no registry serves here.
    let (code, out) = kubeling_test(
        &suites.join("conformance-kuttl"),
        &["e2e/api", "--test", "^(finalizers|namespace-lifecycle)$"],
        Duration::from_secs(300),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Tests: 2 passed, 0 failed"), "{out}");
}

#[test]
fn a_namespace_held_by_a_finalizer_is_reported_not_waited_for_and_fail_fast_skips_the_rest() {
    let suite = tempfile::tempdir().unwrap();
    let stuck = suite.path().join("a-stuck");
    std::fs::create_dir_all(&stuck).unwrap();
    // Nothing removes this finalizer, so the namespace stays Terminating.
    std::fs::write(
        stuck.join("00-held.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  finalizers: [example.com/never]\n",
    )
    .unwrap();
    std::fs::write(
        stuck.join("00-assert.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n",
    )
    .unwrap();
    let later = suite.path().join("b-later");
    std::fs::create_dir_all(&later).unwrap();
    std::fs::write(
        later.join("00-cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
    )
    .unwrap();
    let started = Instant::now();
    let (code, out) = kubeling_test(
        suite.path(),
        &[".", "--timeout", "4", "--parallel", "1", "--fail-fast"],
        Duration::from_secs(120),
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--- FAIL: ./a-stuck ("), "{out}");
    assert!(out.contains("failed in cleanup"), "{out}");
    assert!(out.contains("to be deleted timed out after 4.0s"), "{out}");
    assert!(
        out.contains("--- SKIP: ./b-later ("),
        "--fail-fast skips the test not started: {out}"
    );
    assert!(out.contains("Tests: 0 passed, 1 failed, 1 skipped"), "{out}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the run was not held: {:?}",
        started.elapsed()
    );
}
