//! Results at test and step granularity, the progress lines, the summary, and the report files: JUnit XML
//! in the form kuttl writes it (`internal/report/report.go`; nested `<testsuite>` per test at `step`
//! granularity) and JSON with the same field names.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

/// How a test or step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// It passed.
    Passed,
    /// It failed.
    Failed,
    /// It did not run (`--fail-fast` after a failure, a skipped step).
    Skipped,
}

impl Status {
    /// `PASS`, `FAIL`, `SKIP`.
    pub fn word(self) -> &'static str {
        match self {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Skipped => "SKIP",
        }
    }
}

/// One step (kuttl: `setup` and `step <i>-<name>`; chainsaw: a step by its name).
#[derive(Clone, Debug)]
pub struct StepResult {
    /// The step's name as the report shows it.
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// When it started.
    pub start: jiff::Timestamp,
    /// How long it took.
    pub duration: Duration,
    /// kuttl: assert plus errors objects in the step.
    pub assertions: usize,
    /// The failure's short message (`failed in step 1-run`).
    pub message: Option<String>,
    /// The failure's text (errors, diffs).
    pub failure: Option<String>,
}

/// One test.
#[derive(Clone, Debug)]
pub struct TestResult {
    /// The test's name (kuttl: the directory's basename).
    pub name: String,
    /// How it ended.
    pub status: Status,
    /// When it started.
    pub start: jiff::Timestamp,
    /// How long it took, clean-up included.
    pub duration: Duration,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its steps in order (steps that did not run are left out, as kuttl does).
    pub steps: Vec<StepResult>,
    /// The failure's short message (`failed in step 1-run`).
    pub message: Option<String>,
    /// The failure's full text: errors, diffs, the namespace's events and failing pods' logs.
    pub failure: Option<String>,
}

/// One suite: a test directory as written on the command line or in `testDirs`.
#[derive(Clone, Debug)]
pub struct SuiteResult {
    /// The directory as written.
    pub name: String,
    /// Its tests, sorted by name.
    pub tests: Vec<TestResult>,
    /// When it started.
    pub start: jiff::Timestamp,
    /// How long it took.
    pub duration: Duration,
    /// An error that stopped the suite before or between tests (a bad config, a suite command).
    pub error: Option<String>,
}

impl SuiteResult {
    /// A suite that failed before any test.
    pub fn failed(name: &str, error: String) -> SuiteResult {
        SuiteResult {
            name: name.to_string(),
            tests: vec![],
            start: jiff::Timestamp::now(),
            duration: Duration::ZERO,
            error: Some(error),
        }
    }
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The report's name (kuttl: the TestSuite's `metadata.name`).
    pub name: String,
    /// The suites in order.
    pub suites: Vec<SuiteResult>,
    /// How long it took.
    pub duration: Duration,
}

impl RunResult {
    /// Counts of passed, failed and skipped tests; a suite error counts as one failure.
    pub fn counts(&self) -> (usize, usize, usize) {
        let (mut p, mut f, mut s) = (0, 0, 0);
        for suite in &self.suites {
            if suite.error.is_some() {
                f += 1;
            }
            for t in &suite.tests {
                match t.status {
                    Status::Passed => p += 1,
                    Status::Failed => f += 1,
                    Status::Skipped => s += 1,
                }
            }
        }
        (p, f, s)
    }

    /// Whether everything passed (exit code 0).
    pub fn success(&self) -> bool {
        self.counts().1 == 0
    }

    /// The summary printed at the end: every failure with its text, then the counts.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for suite in &self.suites {
            if let Some(e) = &suite.error {
                let _ = writeln!(out, "\n=== ERROR suite {}\n{e}", suite.name);
            }
            for t in suite.tests.iter().filter(|t| t.status == Status::Failed) {
                let _ = writeln!(
                    out,
                    "\n=== FAIL {}/{}: {}",
                    suite.name,
                    t.name,
                    t.message.as_deref().unwrap_or("failed")
                );
                if let Some(f) = &t.failure {
                    let _ = writeln!(out, "{}", f.trim_end());
                }
            }
        }
        let (p, f, s) = self.counts();
        let _ = writeln!(
            out,
            "\nTests: {} passed, {f} failed, {s} skipped, {} total in {:.3}s",
            p,
            p + f + s,
            self.duration.as_secs_f64()
        );
        let _ = write!(out, "{}", if f == 0 { "PASS" } else { "FAIL" });
        out
    }
}

/// The report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JUnit XML.
    Xml,
    /// JSON with the XML's field names.
    Json,
}

/// The report's granularity (kuttl `reportGranularity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Granularity {
    /// A nested `<testsuite>` per test with a `<testcase>` per step (kuttl's default).
    #[default]
    Step,
    /// One `<testcase>` per test.
    Test,
}

/// Prints one line per test as it finishes (to stdout) and keeps detail lines for the summary.
#[derive(Default)]
pub struct Progress {
    out: Mutex<()>,
}

impl Progress {
    /// `--- PASS: suite/test (1.234s)`.
    pub fn test_done(&self, suite: &str, t: &TestResult) {
        let _g = self.out.lock().expect("progress lock");
        let mut so = std::io::stdout().lock();
        let _ = writeln!(
            so,
            "--- {}: {}/{} ({:.3}s)",
            t.status.word(),
            suite,
            t.name,
            t.duration.as_secs_f64()
        );
        let _ = so.flush();
    }

    /// A line about the run (`=== RUN`, a suite error).
    pub fn line(&self, text: &str) {
        let _g = self.out.lock().expect("progress lock");
        let mut so = std::io::stdout().lock();
        let _ = writeln!(so, "{text}");
        let _ = so.flush();
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

fn ts(t: &jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.f%:z").to_string()
}

/// Escapes text for XML attributes and content as Go's `xml.EscapeText` does (`"` is `&#34;`, newlines are
/// `&#xA;`), replacing characters XML 1.0 cannot carry with U+FFFD.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\t' => out.push_str("&#x9;"),
            '\n' => out.push_str("&#xA;"),
            '\r' => out.push_str("&#xD;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn failure_xml(message: &Option<String>, text: &Option<String>) -> String {
    match (message, text) {
        (None, None) => String::new(),
        _ => format!(
            "<failure message=\"{}\" type=\"\">{}</failure>",
            xml_escape(message.as_deref().unwrap_or("")),
            xml_escape(text.as_deref().unwrap_or(""))
        ),
    }
}

/// The step-granularity testcases of a test: `setup` plus one per step that ran.
fn step_cases(t: &TestResult) -> Vec<&StepResult> {
    t.steps.iter().collect()
}

/// The JUnit XML report.
pub fn junit_xml(run: &RunResult, g: Granularity) -> String {
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let (tests, failures) = totals(run, g);
    let _ = writeln!(
        x,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" time=\"{}\">",
        xml_escape(&run.name),
        secs(run.duration)
    );
    for s in &run.suites {
        let (st, sf) = suite_totals(s, g);
        let _ = writeln!(
            x,
            "  <testsuite tests=\"{st}\" failures=\"{sf}\" timestamp=\"{}\" time=\"{}\" name=\"{}\">",
            ts(&s.start),
            secs(s.duration),
            xml_escape(&s.name)
        );
        if let Some(e) = &s.error {
            let _ = writeln!(
                x,
                "    <failure message=\"{}\" type=\"\"></failure>",
                xml_escape(e)
            );
        }
        let classname = Path::new(&s.name)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for t in &s.tests {
            match g {
                Granularity::Test => {
                    let assertions: usize = t.steps.iter().map(|s| s.assertions).sum();
                    let _ = writeln!(
                        x,
                        "    <testcase classname=\"{}\" name=\"{}\" timestamp=\"{}\" time=\"{}\" assertions=\"{assertions}\">{}</testcase>",
                        xml_escape(&classname),
                        xml_escape(&t.name),
                        ts(&t.start),
                        secs(t.duration),
                        if t.status == Status::Skipped {
                            "<skipped></skipped>".to_string()
                        } else {
                            failure_xml(&t.message, &t.failure)
                        }
                    );
                }
                Granularity::Step => {
                    let cases = step_cases(t);
                    let tf = cases.iter().filter(|c| c.status == Status::Failed).count();
                    let _ = writeln!(
                        x,
                        "    <testsuite tests=\"{}\" failures=\"{tf}\" timestamp=\"{}\" time=\"{}\" name=\"{}\">",
                        cases.len(),
                        ts(&t.start),
                        secs(t.duration),
                        xml_escape(&t.name)
                    );
                    for c in cases {
                        let _ = writeln!(
                            x,
                            "      <testcase classname=\"{}\" name=\"{}\" timestamp=\"{}\" time=\"{}\" assertions=\"{}\">{}</testcase>",
                            xml_escape(&t.name),
                            xml_escape(&c.name),
                            ts(&c.start),
                            secs(c.duration),
                            c.assertions,
                            if c.status == Status::Skipped {
                                "<skipped></skipped>".to_string()
                            } else {
                                failure_xml(&c.message, &c.failure)
                            }
                        );
                    }
                    let _ = writeln!(x, "    </testsuite>");
                }
            }
        }
        let _ = writeln!(x, "  </testsuite>");
    }
    x.push_str("</testsuites>\n");
    x
}

fn suite_totals(s: &SuiteResult, g: Granularity) -> (usize, usize) {
    let err = usize::from(s.error.is_some());
    match g {
        Granularity::Test => (
            s.tests.len() + err,
            s.tests.iter().filter(|t| t.status == Status::Failed).count() + err,
        ),
        Granularity::Step => s.tests.iter().fold((err, err), |(n, f), t| {
            (
                n + t.steps.len(),
                f + t.steps.iter().filter(|c| c.status == Status::Failed).count(),
            )
        }),
    }
}

fn totals(run: &RunResult, g: Granularity) -> (usize, usize) {
    run.suites
        .iter()
        .map(|s| suite_totals(s, g))
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
}

fn failure_json(message: &Option<String>, text: &Option<String>) -> Option<Value> {
    (message.is_some() || text.is_some()).then(
        || json!({"text": text.clone().unwrap_or_default(), "message": message.clone().unwrap_or_default()}),
    )
}

/// The JSON report (kuttl's: the XML's structure and field names).
pub fn junit_json(run: &RunResult, g: Granularity) -> Value {
    let (tests, failures) = totals(run, g);
    let suites: Vec<Value> = run
        .suites
        .iter()
        .map(|s| {
            let (st, sf) = suite_totals(s, g);
            let classname =
                Path::new(&s.name).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let mut suite = json!({"tests": st, "failures": sf, "timestamp": ts(&s.start), "time": secs(s.duration), "name": s.name});
            if let Some(e) = &s.error {
                suite["failure"] = json!({"message": e});
            }
            match g {
                Granularity::Test => {
                    let cases: Vec<Value> = s
                        .tests
                        .iter()
                        .map(|t| {
                            let mut c = json!({"classname": classname, "name": t.name, "timestamp": ts(&t.start), "time": secs(t.duration)});
                            let assertions: usize = t.steps.iter().map(|s| s.assertions).sum();
                            if assertions > 0 {
                                c["assertions"] = json!(assertions);
                            }
                            if let Some(f) = failure_json(&t.message, &t.failure) {
                                c["failure"] = f;
                            }
                            c
                        })
                        .collect();
                    suite["testcase"] = json!(cases);
                }
                Granularity::Step => {
                    let nested: Vec<Value> = s
                        .tests
                        .iter()
                        .map(|t| {
                            let cases: Vec<Value> = step_cases(t)
                                .iter()
                                .map(|c| {
                                    let mut v = json!({"classname": t.name, "name": c.name, "timestamp": ts(&c.start), "time": secs(c.duration)});
                                    if c.assertions > 0 {
                                        v["assertions"] = json!(c.assertions);
                                    }
                                    if let Some(f) = failure_json(&c.message, &c.failure) {
                                        v["failure"] = f;
                                    }
                                    v
                                })
                                .collect();
                            let tf = t.steps.iter().filter(|c| c.status == Status::Failed).count();
                            json!({"tests": cases.len(), "failures": tf, "timestamp": ts(&t.start), "time": secs(t.duration), "name": t.name, "testcase": cases})
                        })
                        .collect();
                    suite["testsuite"] = json!(nested);
                }
            }
            suite
        })
        .collect();
    json!({"name": run.name, "tests": tests, "failures": failures, "time": secs(run.duration), "testsuite": suites})
}

/// Writes `<dir>/<name>.xml` or `.json` and returns its path.
pub fn write(
    run: &RunResult,
    dir: &Path,
    name: &str,
    format: Format,
    g: Granularity,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let (path, text) = match format {
        Format::Xml => (dir.join(format!("{name}.xml")), junit_xml(run, g)),
        Format::Json => (
            dir.join(format!("{name}.json")),
            serde_json::to_string_pretty(&junit_json(run, g)).unwrap_or_default(),
        ),
    };
    std::fs::write(&path, text)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_text_is_escaped_as_go_does() {
        assert_eq!(
            xml_escape("command \"echo >&2 x\" <a> 'q'\n\tz\u{1}"),
            "command &#34;echo &gt;&amp;2 x&#34; &lt;a&gt; &#39;q&#39;&#xA;&#x9;z\u{FFFD}"
        );
    }

    fn sample() -> RunResult {
        let t0 = jiff::Timestamp::UNIX_EPOCH;
        let step = |name: &str, status, failure: Option<&str>| StepResult {
            name: name.into(),
            status,
            start: t0,
            duration: Duration::from_millis(1500),
            assertions: 1,
            message: failure.map(|_| format!("failed in step {}", name.trim_start_matches("step "))),
            failure: failure.map(str::to_string),
        };
        RunResult {
            name: "suite \"x\"".into(),
            duration: Duration::from_secs(2),
            suites: vec![SuiteResult {
                name: "fixtures/e2e/kuttl".into(),
                start: t0,
                duration: Duration::from_secs(2),
                error: None,
                tests: vec![
                    TestResult {
                        name: "good".into(),
                        status: Status::Passed,
                        start: t0,
                        duration: Duration::from_secs(1),
                        namespace: None,
                        steps: vec![
                            step("setup", Status::Passed, None),
                            step("step 0-run", Status::Passed, None),
                        ],
                        message: None,
                        failure: None,
                    },
                    TestResult {
                        name: "bad".into(),
                        status: Status::Failed,
                        start: t0,
                        duration: Duration::from_secs(1),
                        namespace: None,
                        steps: vec![
                            step("setup", Status::Passed, None),
                            step("step 1-run", Status::Failed, Some(".spec.replicas: <2> & \"3\"")),
                        ],
                        message: Some("failed in step 1-run".into()),
                        failure: Some(".spec.replicas: <2> & \"3\"".into()),
                    },
                ],
            }],
        }
    }

    #[test]
    fn junit_at_step_granularity_nests_a_suite_per_test() {
        let x = junit_xml(&sample(), Granularity::Step);
        assert!(
            x.contains("<testsuites name=\"suite &#34;x&#34;\" tests=\"4\" failures=\"1\" time=\"2.000\">"),
            "{x}"
        );
        assert!(x.contains("<testsuite tests=\"2\" failures=\"1\" timestamp=\"1970-01-01T00:00:00+00:00\" time=\"1.000\" name=\"bad\">"), "{x}");
        assert!(x.contains("<testcase classname=\"bad\" name=\"step 1-run\" timestamp=\"1970-01-01T00:00:00+00:00\" time=\"1.500\" assertions=\"1\"><failure message=\"failed in step 1-run\" type=\"\">.spec.replicas: &lt;2&gt; &amp; &#34;3&#34;</failure></testcase>"), "{x}");
        let j = junit_json(&sample(), Granularity::Step);
        assert_eq!(j["tests"], 4);
        assert_eq!(
            j["testsuite"][0]["testsuite"][1]["testcase"][1]["failure"]["message"],
            "failed in step 1-run"
        );
    }

    #[test]
    fn junit_at_test_granularity_has_a_case_per_test() {
        let x = junit_xml(&sample(), Granularity::Test);
        assert!(x.contains("tests=\"2\" failures=\"1\""), "{x}");
        assert!(x.contains("<testcase classname=\"kuttl\" name=\"good\""), "{x}");
        let summary = sample().summary();
        assert!(
            summary.contains("=== FAIL fixtures/e2e/kuttl/bad: failed in step 1-run"),
            "{summary}"
        );
        assert!(
            summary.contains("Tests: 1 passed, 1 failed, 0 skipped, 2 total"),
            "{summary}"
        );
    }
}
