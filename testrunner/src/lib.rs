//! `kubeling test`: a runner of declarative e2e suites written for kuttl or chainsaw, with the semantics,
//! defaults and exit codes of the tool each suite was written for (`../shared/reference/fixture-runners.md`).
//!
//! - [`engine`]: what both formats do to a cluster: apply/create/update/patch/delete objects, assertions
//!   evaluated on every watch event of the kinds they name, commands and scripts, namespaces, the failure
//!   report (closest object, field-level diff, events, logs of failing pods).
//! - [`kuttl`]: kuttl's TestSuite, step files and their order.
//! - [`chainsaw`]: chainsaw's Test resources, operations, assertion trees (JMESPath), templating.
//! - [`report`]: the results model, JUnit XML and JSON, the progress lines.

pub mod chainsaw;
pub mod engine;
pub mod kuttl;
pub mod report;
