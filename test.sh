#!/usr/bin/env bash
# Every test of the project: formatting, lints, unit, integration and end-to-end (real kubectl) tests.
# Needs: a Rust toolchain, kubectl and curl on PATH, a running Docker engine, and apt (etcd-server is
# installed when missing).
set -euo pipefail
cd "$(dirname "$0")"
command -v kubectl >/dev/null || { echo "kubectl is required on PATH for the end-to-end tests" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl is required on PATH for the end-to-end tests" >&2; exit 1; }
# The Python client the tests drive (pinned), in a venv under target/.
if [ ! -x target/pyvenv/bin/python ] || ! target/pyvenv/bin/python -c "import kubernetes" 2>/dev/null; then
  python3 -m venv target/pyvenv
  target/pyvenv/bin/pip install --quiet --disable-pip-version-check kubernetes==31.0.0
fi
export KUBELING_PYTHON="$PWD/target/pyvenv/bin/python"
# The etcd store's tests run a real etcd: Debian's etcd-server, installed when missing.
if ! command -v etcd >/dev/null; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq etcd-server >/dev/null
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --all-targets
