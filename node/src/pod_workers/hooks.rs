//! Lifecycle hooks (upstream `pkg/kubelet/lifecycle/handlers.go`): postStart right after a container
//! starts, preStop before it is stopped. exec runs through the runtime with no timeout of its own, httpGet
//! is the probes' GET with `User-Agent: kube-lifecycle/1.33` whose status code is not checked (only a
//! transport error fails it), sleep sleeps. The error text stays in the log: events only say that the
//! hook failed, so that secrets in a command line do not leak.

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};

use super::*;
use crate::prober::handlers::exec::combined_output;
use crate::prober::handlers::http::{self, HOOK_TIMEOUT, Request};
use crate::prober::pod_full_name;

impl super::kill::Ops {
    /// Runs one hook to its end; `Err` is upstream's message.
    pub(super) async fn run_hook(
        &self,
        pod: &Pod,
        c: &Container,
        container_id: &str,
        hook: &LifecycleHandler,
        pod_ip: Option<&str>,
    ) -> Result<(), String> {
        let pod_name = pod_full_name(pod);
        if let Some(action) = &hook.exec {
            let cmd = action.command.clone().unwrap_or_default();
            let fail = |error: String, output: String| {
                format!(
                    "Exec lifecycle hook ([{}]) for Container {:?} in Pod {pod_name:?} failed - error: {error}, message: {output:?}",
                    cmd.join(" "),
                    c.name
                )
            };
            return match self.k.runtime.exec_sync(container_id, &cmd, None).await {
                Ok(out) if out.exit_code == 0 => Ok(()),
                Ok(out) => Err(fail(
                    format!(
                        "command '{}' exited with {}: {}",
                        cmd.join(" "),
                        out.exit_code,
                        String::from_utf8_lossy(&out.stderr)
                    ),
                    combined_output(&out),
                )),
                Err(e) => Err(fail(e.to_string(), String::new())),
            };
        }
        if let Some(action) = &hook.http_get {
            let fail = |error: String| {
                format!(
                    "HTTP lifecycle hook ({}) for Container {:?} in Pod {pod_name:?} failed - error: {error}",
                    action.path.as_deref().unwrap_or(""),
                    c.name
                )
            };
            let request =
                Request::for_action(action, c, pod_ip, "lifecycle").map_err(|e| fail(e.to_string()))?;
            let result = match tokio::time::timeout(HOOK_TIMEOUT, http::get(&request)).await {
                Ok(r) => r,
                Err(_) => Err(format!("Get {:?}: timeout", request.url.as_str())),
            };
            return match result {
                Ok(_) => Ok(()),
                // upstream: an HTTPS hook answered in plain HTTP is tried again over HTTP, with an event.
                Err(e) if request.url.scheme() == "https" && e.contains("tls:") => {
                    let mut plain = request.clone();
                    let _ = plain.url.set_scheme("http");
                    plain
                        .headers
                        .retain(|(k, _)| !k.eq_ignore_ascii_case("authorization"));
                    match tokio::time::timeout(HOOK_TIMEOUT, http::get(&plain)).await {
                        Ok(Ok(_)) => {
                            let message = format!(
                                "request to HTTPS lifecycle hook {} got HTTP response, retry with HTTP succeeded",
                                request.url.host_str().unwrap_or("")
                            );
                            self.k
                                .recorder
                                .record(
                                    &pod_ref(pod),
                                    EventType::Warning,
                                    "LifecycleHTTPFallback",
                                    &message,
                                )
                                .await;
                            Ok(())
                        }
                        _ => Err(fail(e)),
                    }
                }
                Err(e) => Err(fail(e)),
            };
        }
        if let Some(action) = &hook.sleep {
            tokio::time::sleep(Duration::from_secs(action.seconds.max(0) as u64)).await;
            return Ok(());
        }
        Err(
            "Cannot run handler: invalid handler: only exec, httpGet and sleep hooks are supported"
                .to_owned(),
        )
    }
}
