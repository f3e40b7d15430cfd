//! The Python `kubernetes` client (the version pinned in test.sh) against the real binary.

mod common;

use std::process::Command;

use common::Cluster;

/// The interpreter with the `kubernetes` package: `KUBELING_PYTHON` (set by test.sh), else the venv
/// test.sh makes under target/, else `python3`.
fn python() -> String {
    if let Ok(p) = std::env::var("KUBELING_PYTHON") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/target/pyvenv/bin/python");
    if std::path::Path::new(venv).exists() {
        venv.to_string()
    } else {
        "python3".to_string()
    }
}

#[test]
fn python_client_lists_creates_patches_watches_and_deletes() {
    let c = Cluster::start();
    let py = python();
    let check = Command::new(&py)
        .args(["-c", "import kubernetes"])
        .status()
        .expect("running python");
    assert!(
        check.success(),
        "{py} cannot import the kubernetes package: run ./test.sh (it installs it) or set KUBELING_PYTHON"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/smoke.py");
    let out = Command::new(&py).arg(script).arg(&c.kubeconfig).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("python client: ok"),
        "python smoke test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

#[test]
fn python_client_exec_stream_runs_commands_and_reports_the_exit_code() {
    let c = Cluster::up();
    let image = testbox_image::ensure_testbox_image();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: py\nspec:\n  containers:\n  - name: main\n    image: {image}\n    args: [\"sleep\"]\n"
    );
    c.ok_stdin(&["apply", "-f", "-"], &yaml);
    c.wait_json(&["pod", "py"], std::time::Duration::from_secs(60), |p| {
        p["status"]["phase"] == "Running"
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/exec.py");
    let out = Command::new(python())
        .arg(script)
        .arg(&c.kubeconfig)
        .arg("py")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("python exec: ok"),
        "python exec failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
