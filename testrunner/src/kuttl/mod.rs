//! kuttl suites: the `TestSuite`, test case directories, step files and their order, with kuttl's
//! semantics and defaults (`../shared/reference/fixture-runners.md` section 1).

pub mod config;
pub mod files;

use std::path::Path;
use std::sync::Arc;

use crate::SuiteContext;
use crate::report::SuiteResult;

/// Runs a kuttl test directory (its direct subdirectories are the tests), or, with `single`, one test case
/// directory.
pub async fn run_suite(_ctx: Arc<SuiteContext>, dir: &Path, _single: bool) -> SuiteResult {
    SuiteResult::failed(
        &dir.display().to_string(),
        "kuttl suites are not supported yet".into(),
    )
}
