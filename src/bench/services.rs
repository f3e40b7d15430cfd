//! `bench --services`: HTTP through a ClusterIP (pod → gateway → pod) against the same requests
//! straight to the pod IP, in the same run, from a client pod on Docker under `kubeling up`: requests per
//! second and p50/p99 latency of each, and the p99 the Service path adds. The load is testbox's `load`
//! (every request on a new connection), run with `kubectl exec` in the client pod. Both paths are warmed up,
//! then measured in [`ROUNDS`] alternating rounds, and each figure is the median of its rounds, so that a
//! burst of load from elsewhere on the machine skews one round rather than one path.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;

use super::{BenchArgs, wait_node_ready};

/// Alternating rounds of direct and Service requests.
const ROUNDS: usize = 3;

/// What `testbox load` printed.
#[derive(Debug, PartialEq)]
struct Load {
    requests: u64,
    failed: u64,
    rps: f64,
    p50: Duration,
    p99: Duration,
}

/// Parses `requests N failed F seconds S rps R p50_us P p99_us Q`.
fn parse_load(line: &str) -> Option<Load> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let field = |name: &str| -> Option<&str> {
        words
            .iter()
            .position(|w| *w == name)
            .and_then(|i| words.get(i + 1))
            .copied()
    };
    Some(Load {
        requests: field("requests")?.parse().ok()?,
        failed: field("failed")?.parse().ok()?,
        rps: field("rps")?.parse().ok()?,
        p50: Duration::from_micros(field("p50_us")?.parse().ok()?),
        p99: Duration::from_micros(field("p99_us")?.parse().ok()?),
    })
}

/// The median round of each figure (requests and failures summed).
fn median_load(rounds: &[Load]) -> Option<Load> {
    fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        v[v.len() / 2]
    }
    if rounds.is_empty() {
        return None;
    }
    Some(Load {
        requests: rounds.iter().map(|l| l.requests).sum(),
        failed: rounds.iter().map(|l| l.failed).sum(),
        rps: median(rounds.iter().map(|l| l.rps).collect()),
        p50: median(rounds.iter().map(|l| l.p50).collect()),
        p99: median(rounds.iter().map(|l| l.p99).collect()),
    })
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running kubectl")?;
    if let Some(text) = stdin {
        child.stdin.take().context("stdin")?.write_all(text.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(super) async fn run(args: &BenchArgs, dir: &Path) -> anyhow::Result<()> {
    super::with_testbox_cluster(&dir.join("services-up"), &[], async |kubeconfig, image| {
        measure(args, kubeconfig, image).await
    })
    .await
}

async fn measure(args: &BenchArgs, kubeconfig: &Path, image: &str) -> anyhow::Result<()> {
    let c = super::client(kubeconfig).await?;
    wait_node_ready(&c).await?;
    let manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, labels: {{app: web}}}}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers: [{{name: main, image: {image}, args: [serve]}}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: client}}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers: [{{name: main, image: {image}}}]\n---\napiVersion: v1\nkind: Service\nmetadata: {{name: web}}\nspec:\n  selector: {{app: web}}\n  ports: [{{port: 80, targetPort: 8080}}]\n"
    );
    kubectl(kubeconfig, &["apply", "-f", "-"], Some(&manifest))?;
    kubectl(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Ready",
            "pod/web",
            "pod/client",
            "--timeout=120s",
        ],
        None,
    )?;
    let pod_ip = kubectl(
        kubeconfig,
        &["get", "pod", "web", "-o", "jsonpath={.status.podIP}"],
        None,
    )?;
    let cluster_ip = kubectl(
        kubeconfig,
        &["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"],
        None,
    )?;
    let load = |url: String, requests: usize| -> anyhow::Result<Load> {
        let (n, conc) = (requests.to_string(), args.service_concurrency.to_string());
        let out = kubectl(
            kubeconfig,
            &[
                "exec",
                "client",
                "--",
                "testbox",
                "load",
                &url,
                "--requests",
                &n,
                "--concurrency",
                &conc,
            ],
            None,
        )?;
        parse_load(&out).with_context(|| format!("unexpected load output {out:?}"))
    };
    let direct_url = format!("http://{pod_ip}:8080/");
    let service_url = format!("http://{cluster_ip}/");
    // Warm-up (the endpoint reaches the gateway; first connections on both paths).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let last = match load(service_url.clone(), 20) {
            Ok(l) if l.failed == 0 => break,
            Ok(l) => format!("{l:?}"),
            Err(e) => e.to_string(),
        };
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the ClusterIP never answered: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    load(direct_url.clone(), 200)?;
    load(service_url.clone(), 200)?;
    let (mut directs, mut services) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        directs.push(load(direct_url.clone(), args.service_requests)?);
        services.push(load(service_url.clone(), args.service_requests)?);
    }
    let rates = |rounds: &[Load]| {
        rounds
            .iter()
            .map(|l| format!("{:.0}", l.rps))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (direct_rates, service_rates) = (rates(&directs), rates(&services));
    let direct = median_load(&directs).context("no rounds")?;
    let service = median_load(&services).context("no rounds")?;
    println!(
        "services: {} HTTP GETs per round (a new connection each) from {} threads in a client pod, {ROUNDS} alternating \
         rounds per path (medians below; requests/s per round: direct {direct_rates}, ClusterIP {service_rates})",
        args.service_requests, args.service_concurrency
    );
    for (label, l) in [
        ("  direct to the pod IP", &direct),
        ("  through the ClusterIP", &service),
    ] {
        println!(
            "{label}: {:.0} requests/s, p50 {}, p99 {}, {} failed",
            l.rps,
            super::ms(l.p50),
            super::ms(l.p99),
            l.failed
        );
    }
    println!(
        "  the Service path adds {} at p99 ({} at p50) and runs at {:.0}% of the direct rate",
        super::ms(service.p99.saturating_sub(direct.p99)),
        super::ms(service.p50.saturating_sub(direct.p50)),
        service.rps / direct.rps.max(1e-9) * 100.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_lines_parse() {
        let l = parse_load("requests 100 failed 2 seconds 1.000 rps 100.0 p50_us 800 p99_us 2500").unwrap();
        assert_eq!(
            l,
            Load {
                requests: 100,
                failed: 2,
                rps: 100.0,
                p50: Duration::from_micros(800),
                p99: Duration::from_micros(2500)
            }
        );
        assert_eq!(parse_load("testbox: error"), None);
    }

    #[test]
    fn rounds_give_their_medians() {
        let l = |rps: f64, p50: u64, p99: u64, failed: u64| Load {
            requests: 10,
            failed,
            rps,
            p50: Duration::from_micros(p50),
            p99: Duration::from_micros(p99),
        };
        let cases = [
            (vec![], None),
            (vec![l(100.0, 5, 50, 1)], Some(l(100.0, 5, 50, 1))),
            (
                vec![l(300.0, 9, 10, 0), l(100.0, 5, 90, 1), l(200.0, 7, 30, 2)],
                Some(Load {
                    requests: 30,
                    ..l(200.0, 7, 30, 3)
                }),
            ),
        ];
        for (rounds, want) in cases {
            assert_eq!(median_load(&rounds), want, "{rounds:?}");
        }
    }
}
