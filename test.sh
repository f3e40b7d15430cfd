#!/usr/bin/env bash
# Every test of the project: formatting, lints, unit, integration and end-to-end (real kubectl) tests.
# Needs: a Rust toolchain, kubectl and curl on PATH (and, from step 3 on, a running Docker engine).
set -euo pipefail
cd "$(dirname "$0")"
command -v kubectl >/dev/null || { echo "kubectl is required on PATH for the end-to-end tests" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is required on PATH for the end-to-end tests" >&2; exit 1; }
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets
