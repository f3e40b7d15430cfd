//! Chainsaw suites (`chainsaw.kyverno.io` `Test` resources and the conventional `NN-*.yaml` mode), with
//! chainsaw's semantics and defaults (`../shared/reference/fixture-runners.md` section 2).
//!
//! - [`model`]: the `Test`/`StepTemplate` resources, steps and operations as written.
//! - [`config`]: the `Configuration` (v1alpha1/v1alpha2) and the timeouts it resolves.
//! - [`discovery`]: finding and loading tests (explicit and conventional), step templates.
//! - [`bindings`], [`expr`], [`arith`], [`functions`]: JMESPath expressions with `$`-bindings.
//! - [`assertion`]: kyverno-json assertion trees (projections, `~` iteration, comparison).
//! - [`template`]: templating of resources and binding values.
//! - [`names`]: the per-test namespace name (`chainsaw-<adjective>-<animal>`).

pub mod arith;
pub mod assertion;
pub mod bindings;
pub mod config;
pub mod discovery;
pub mod expr;
pub mod functions;
pub mod model;
pub mod names;
pub mod ops;
pub mod output;
pub mod run;
pub mod template;

pub use run::{Options, run, run_suite};
