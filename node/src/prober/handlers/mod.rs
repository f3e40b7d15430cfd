//! The probe handlers (upstream `pkg/probe/{exec,http,tcp,grpc}` and `prober.runProbe`): the real
//! [`Prober`]. exec runs through the container runtime; httpGet, tcpSocket and grpc dial the pod's IP (or
//! the probe's `host`) from the node, as upstream's kubelet does.

pub mod exec;
pub mod grpc;
pub mod http;
pub mod tcp;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{ProbeError, Prober, Report, Target, Timing, pod_full_name};
use crate::runtime::ContainerRuntime;

/// upstream `maxReadLength` (exec) and `maxRespBodyLength` (http): output kept from a probe.
pub const MAX_OUTPUT: usize = 10 * 1024;

/// The kubelet's Kubernetes minor version, for `User-Agent: kube-probe/1.33`.
pub const KUBE_VERSION: &str = "1.33";

/// Runs probes for real.
pub struct RealProber {
    runtime: Arc<dyn ContainerRuntime>,
}

impl RealProber {
    /// Probes that exec through `runtime`.
    pub fn new(runtime: Arc<dyn ContainerRuntime>) -> RealProber {
        RealProber { runtime }
    }
}

#[async_trait]
impl Prober for RealProber {
    async fn probe(&self, t: &Target<'_>) -> Result<Report, ProbeError> {
        let timeout = Timing::of(t.probe).timeout();
        let p = t.probe;
        if let Some(action) = &p.exec {
            let cmd = expand_static(action.command.as_deref().unwrap_or(&[]), t.container);
            return exec::probe(self.runtime.as_ref(), t.container_id, &cmd, timeout).await;
        }
        if let Some(action) = &p.http_get {
            let request = http::Request::for_action(action, t.container, t.pod_ip, "probe")?;
            return Ok(http::probe(&request, timeout).await);
        }
        if let Some(action) = &p.tcp_socket {
            let port = resolve_port(&action.port, t.container)?;
            let host = match action.host.as_deref().filter(|h| !h.is_empty()) {
                Some(h) => h,
                None => t.pod_ip.ok_or(ProbeError::NoPodIp)?,
            };
            return Ok(tcp::probe(host, port, timeout).await);
        }
        if let Some(action) = &p.grpc {
            let host = t.pod_ip.ok_or(ProbeError::NoPodIp)?;
            let service = action.service.clone().unwrap_or_default();
            return Ok(grpc::probe(host, action.port, &service, timeout).await);
        }
        Err(ProbeError::MissingHandler {
            pod: pod_full_name(t.pod),
            container: t.container.name.clone(),
        })
    }
}

/// Upstream `ExpandContainerCommandOnlyStatic`: `$(VAR)` from the container's own `env` values only
/// (a `valueFrom` variable expands to the empty string; the downward API is not seen).
pub fn expand_static(cmd: &[String], c: &Container) -> Vec<String> {
    let vars: HashMap<&str, &str> = c
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or("")))
        .collect();
    cmd.iter()
        .map(|s| crate::env::expand(s, |name| vars.get(name).copied()))
        .collect()
}

/// Upstream `probe.ResolveContainerPort`: a number as is; a name looked up among the container's ports (its
/// `containerPort`), else read as a number; 1-65535 or an error. A name the container does not declare is
/// an error (the probe is thrown away with an `Unhealthy` "errored" event), not a failure, as upstream.
pub fn resolve_port(port: &IntOrString, c: &Container) -> Result<u16, ProbeError> {
    let n: i64 = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => {
            match c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
            {
                Some(p) => i64::from(p.container_port),
                // Upstream's last resort is strconv.Atoi, whose error is what the event shows.
                None => name.parse().map_err(|_| {
                    ProbeError::Port(format!("strconv.Atoi: parsing {name:?}: invalid syntax"))
                })?,
            }
        }
    };
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ProbeError::Port(format!("invalid port number: {n}")))
}

/// An I/O error's text without Rust's ` (os error N)` suffix, in Go's words where they differ.
pub(crate) fn io_text(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "connection refused".to_owned(),
        ConnectionReset => "connection reset by peer".to_owned(),
        HostUnreachable => "no route to host".to_owned(),
        NetworkUnreachable => "network is unreachable".to_owned(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error ") {
                Some(i) => s[..i].to_lowercase(),
                None => s,
            }
        }
    }
}

/// `host:port`, with brackets for IPv6 (Go's `net.JoinHostPort`).
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector};

    fn container() -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }]),
            env: Some(vec![
                EnvVar {
                    name: "A".into(),
                    value: Some("1".into()),
                    ..Default::default()
                },
                EnvVar {
                    name: "POD".into(),
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "metadata.name".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn named_ports_resolve_to_the_container_port_then_as_numbers() {
        let c = container();
        let cases = [
            (IntOrString::Int(80), Ok(80)),
            (IntOrString::String("http".into()), Ok(8080)),
            (IntOrString::String("9090".into()), Ok(9090)),
            (
                IntOrString::String("metrics".into()),
                Err(ProbeError::Port(
                    "strconv.Atoi: parsing \"metrics\": invalid syntax".into(),
                )),
            ),
            (
                IntOrString::Int(0),
                Err(ProbeError::Port("invalid port number: 0".into())),
            ),
            (
                IntOrString::Int(70000),
                Err(ProbeError::Port("invalid port number: 70000".into())),
            ),
        ];
        for (port, want) in cases {
            assert_eq!(resolve_port(&port, &c), want, "{port:?}");
        }
    }

    #[test]
    fn exec_commands_expand_static_env_only() {
        let cmd = ["echo".to_owned(), "$(A)-$(POD)-$(MISSING)".to_owned()];
        assert_eq!(expand_static(&cmd, &container()), ["echo", "1--$(MISSING)"]);
    }

    #[test]
    fn host_ports_join_like_go() {
        assert_eq!(join_host_port("10.0.0.1", 80), "10.0.0.1:80");
        assert_eq!(join_host_port("::1", 80), "[::1]:80");
    }
}
