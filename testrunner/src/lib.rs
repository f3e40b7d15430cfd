//! `kubeling test`: a runner of declarative e2e suites written for kuttl or chainsaw, with the semantics,
//! defaults and exit codes of the tool each suite was written for (`../shared/reference/fixture-runners.md`).
//!
//! - [`engine`]: what both formats do to a cluster: apply/create/update/patch/delete objects, assertions
//!   evaluated on every watch event of the kinds they name, commands and scripts, namespaces, the failure
//!   report (closest object, field-level diff, events, logs of failing pods).
//! - [`kuttl`]: kuttl's TestSuite, step files and their order.
//! - [`chainsaw`]: chainsaw's Test resources, operations, assertion trees (JMESPath), templating.
//! - [`report`]: the results model, JUnit XML and JSON, the progress lines.
//!
//! Data flow: [`run`] takes the paths, [`recognise`]s each as a kuttl or chainsaw suite, runs the suites one
//! after another (the tests of a suite in parallel, each in its own namespace) through the format's
//! `run_suite(ctx, dir) -> SuiteResult`, and returns a [`report::RunResult`]; the binary prints the summary,
//! writes the report and exits 0 or 1.

pub mod chainsaw;
pub mod engine;
pub mod kuttl;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use engine::Cluster;
use report::{Progress, RunResult, SuiteResult};

/// The command line's options, shared by every format (each format applies its own defaults to what is
/// not given).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--config`: a kuttl `TestSuite` (or a chainsaw `Configuration`) file.
    pub config: Option<PathBuf>,
    /// `--parallel`: tests of a suite running at once (kuttl default 8).
    pub parallel: Option<usize>,
    /// `--test`: a regular expression over test names (kuttl passes it to Go's `-test.run`).
    pub test: Option<String>,
    /// `--timeout`: seconds (kuttl: the step timeout, default 30).
    pub timeout: Option<u64>,
    /// `--skip-delete`: keep namespaces and created objects.
    pub skip_delete: bool,
    /// `--fail-fast`: tests not started when one fails are skipped.
    pub fail_fast: bool,
    /// `--report-dir`: where the report goes.
    pub report_dir: Option<PathBuf>,
    /// `--report-format`: no report unless set (or set by a kuttl TestSuite).
    pub report_format: Option<report::Format>,
    /// `--test-run-labels`: the labels of this run, which a kuttl `TestFile`'s `testRunSelector` must
    /// select for its file to be used.
    pub test_run_labels: std::collections::BTreeMap<String, String>,
}

/// What every suite runner gets: the cluster, the options, the progress printer, and the run-wide
/// fail-fast flag.
pub struct SuiteContext {
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// The command line's options.
    pub opts: RunOptions,
    /// Prints one line per finished test.
    pub progress: Progress,
    failed: AtomicBool,
}

impl SuiteContext {
    /// A context over a cluster.
    pub fn new(cluster: Arc<Cluster>, opts: RunOptions) -> SuiteContext {
        SuiteContext {
            cluster,
            opts,
            progress: Progress::default(),
            failed: AtomicBool::new(false),
        }
    }

    /// Records that a test failed (for `--fail-fast`).
    pub fn mark_failed(&self) {
        self.failed.store(true, Ordering::SeqCst);
    }

    /// Whether tests not yet started should be skipped (`--fail-fast` after a failure).
    pub fn should_stop(&self) -> bool {
        self.opts.fail_fast && self.failed.load(Ordering::SeqCst)
    }
}

/// The format a directory was written for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SuiteKind {
    /// A kuttl test directory: its direct subdirectories are test cases (`kuttl-test.yaml` optional).
    Kuttl,
    /// A single kuttl test case (the directory holds `NN-*.yaml` step files itself).
    KuttlCase,
    /// A chainsaw test directory (`chainsaw-test.yaml` files anywhere below).
    Chainsaw,
}

fn has_file(dir: &Path, names: &[&str]) -> bool {
    names.iter().any(|n| dir.join(n).is_file())
}

fn is_chainsaw_test(dir: &Path) -> bool {
    has_file(
        dir,
        &["chainsaw-test.yaml", "chainsaw-test.yml", ".chainsaw.yaml"],
    )
}

fn has_step_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        e.path().is_file() && kuttl::files::parse_name(&name).is_some()
    })
}

/// The subdirectories a suite may be in: hidden ones (`.git`) and build output (`target`, `node_modules`) are
/// not looked into.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let skip = |p: &Path| {
        let n = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        n.starts_with('.') || n == "target" || n == "node_modules"
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !skip(p))
        .collect();
    v.sort();
    v
}

fn tree_has(dir: &Path, pred: &dyn Fn(&Path) -> bool, depth: usize) -> bool {
    pred(dir) || (depth > 0 && subdirs(dir).iter().any(|d| tree_has(d, pred, depth - 1)))
}

/// The suites a path holds, each with the format it was written for: a directory with `kuttl-test.yaml`,
/// or whose subdirectories hold `NN-*.yaml` step files, is a kuttl suite; one with `chainsaw-test.yaml`
/// (itself or below, and no kuttl test) is a chainsaw suite; a directory holding step files itself is one
/// kuttl test; any other directory is looked into (so `fixtures/e2e` with `kuttl/` and `chainsaw/` is two
/// suites).
pub fn recognise(dir: &Path) -> Vec<(SuiteKind, PathBuf)> {
    const DEPTH: usize = 6;
    if dir.join("kuttl-test.yaml").is_file() {
        return vec![(SuiteKind::Kuttl, dir.to_path_buf())];
    }
    if is_chainsaw_test(dir) {
        return vec![(SuiteKind::Chainsaw, dir.to_path_buf())];
    }
    if has_step_files(dir) {
        return vec![(SuiteKind::KuttlCase, dir.to_path_buf())];
    }
    let subs = subdirs(dir);
    let kuttl_case =
        |d: &Path| !is_chainsaw_test(d) && (has_step_files(d) || d.join("kuttl-test.yaml").is_file());
    if subs.iter().any(|d| kuttl_case(d)) && !subs.iter().any(|d| is_chainsaw_test(d)) {
        return vec![(SuiteKind::Kuttl, dir.to_path_buf())];
    }
    if !tree_has(dir, &kuttl_case, DEPTH) && tree_has(dir, &is_chainsaw_test, DEPTH) {
        return vec![(SuiteKind::Chainsaw, dir.to_path_buf())];
    }
    subs.iter().flat_map(|d| recognise(d)).collect()
}

/// Runs one chainsaw suite directory ([`chainsaw::run_suite`]).
async fn run_chainsaw(ctx: Arc<SuiteContext>, dir: &Path) -> SuiteResult {
    chainsaw::run_suite(ctx, dir).await
}

/// Errors before any suite runs.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A path on the command line does not exist.
    #[error("test directory {0} does not exist")]
    Missing(PathBuf),
    /// Nothing to run (kuttl's message).
    #[error(
        "no test directories provided, please provide either --config or test directories on the command line"
    )]
    NoTests,
    /// A `--config` file that cannot be read.
    #[error("{0}")]
    Config(String),
    /// `--test` is not a valid regular expression.
    #[error("--test {0}: {1}")]
    BadTestPattern(String, regex::Error),
}

/// Runs the suites the paths hold against a cluster. With no paths, `--config` (or `./kuttl-test.yaml`)
/// gives kuttl's `testDirs`, else the current directory is looked into.
pub async fn run(
    cluster: Arc<Cluster>,
    paths: Vec<PathBuf>,
    opts: RunOptions,
) -> Result<RunResult, RunError> {
    let started = Instant::now();
    if let Some(t) = &opts.test {
        regex::Regex::new(t).map_err(|e| RunError::BadTestPattern(t.clone(), e))?;
    }
    let mut suites: Vec<(SuiteKind, PathBuf)> = Vec::new();
    let mut name = String::new();
    if paths.is_empty() {
        let config = opts
            .config
            .clone()
            .or_else(|| Some(PathBuf::from("kuttl-test.yaml")).filter(|p| p.is_file()));
        match config {
            Some(c) => {
                let suite = kuttl::config::load(&c).map_err(|e| RunError::Config(e.to_string()))?;
                name = suite.name.clone();
                if suite.test_dirs.is_empty() {
                    return Err(RunError::NoTests);
                }
                suites.extend(
                    suite
                        .test_dirs
                        .iter()
                        .map(|d| (SuiteKind::Kuttl, PathBuf::from(d))),
                );
            }
            None => suites.extend(recognise(Path::new("."))),
        }
    } else {
        for p in &paths {
            if !p.is_dir() {
                return Err(RunError::Missing(p.clone()));
            }
            suites.extend(recognise(p));
        }
    }
    let ctx = Arc::new(SuiteContext::new(cluster, opts));
    let mut results = Vec::new();
    for (kind, dir) in suites {
        let r = match kind {
            SuiteKind::Kuttl => kuttl::run_suite(ctx.clone(), &dir, false).await,
            SuiteKind::KuttlCase => kuttl::run_suite(ctx.clone(), &dir, true).await,
            SuiteKind::Chainsaw => run_chainsaw(ctx.clone(), &dir).await,
        };
        if let Some(e) = &r.error {
            ctx.progress.line(&format!(
                "--- FAIL: {} (suite): {}",
                r.name,
                e.lines().next().unwrap_or("")
            ));
            ctx.mark_failed();
        }
        results.push(r);
    }
    Ok(RunResult {
        name,
        suites: results,
        duration: started.elapsed(),
    })
}

/// The bound of the whole-run wait for the cluster's `default/default` ServiceAccount (kuttl: 60 s).
pub const CLUSTER_READY_TIMEOUT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn suites_are_recognised_as_written() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        touch(&root.join("e2e/kuttl/pod/00-install.yaml"));
        touch(&root.join("e2e/kuttl/pod/00-assert.yaml"));
        touch(&root.join("e2e/chainsaw/pod/chainsaw-test.yaml"));
        touch(&root.join("e2e/chainsaw/pod/01-pod.yaml"));
        touch(&root.join("conf/kuttl-test.yaml"));
        touch(&root.join("e2e/target/debug/x/00-step.yaml"));
        touch(&root.join("e2e/.hidden/x/00-step.yaml"));
        let rel = |v: Vec<(SuiteKind, PathBuf)>| -> Vec<(SuiteKind, String)> {
            v.into_iter()
                .map(|(k, p)| (k, p.strip_prefix(root).unwrap().display().to_string()))
                .collect()
        };
        assert_eq!(
            rel(recognise(&root.join("e2e"))),
            vec![
                (SuiteKind::Chainsaw, "e2e/chainsaw".into()),
                (SuiteKind::Kuttl, "e2e/kuttl".into())
            ]
        );
        assert_eq!(
            rel(recognise(&root.join("e2e/kuttl/pod"))),
            vec![(SuiteKind::KuttlCase, "e2e/kuttl/pod".into())]
        );
        assert_eq!(
            rel(recognise(&root.join("e2e/chainsaw/pod"))),
            vec![(SuiteKind::Chainsaw, "e2e/chainsaw/pod".into())]
        );
        assert_eq!(
            rel(recognise(&root.join("conf"))),
            vec![(SuiteKind::Kuttl, "conf".into())]
        );
    }
}
