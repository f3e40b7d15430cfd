//! Pod defaulting, validation and QoS (upstream `pkg/apis/core/v1/defaults.go`,
//! `pkg/apis/core/validation`, `pkg/apis/core/helper/qos`). Minimal version; the full port replaces it.

use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::validation::{NameRule, dns1123_label_errors, validate_object_meta};
use crate::error::FieldError;

/// Create-time defaulting as upstream.
pub fn default_pod(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".into());
    spec.security_context.get_or_insert_with(Default::default);
    spec.enable_service_links.get_or_insert(true);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if c.image_pull_policy.is_none() {
            c.image_pull_policy = Some(pull_policy(c.image.as_deref().unwrap_or("")).into());
        }
        c.termination_message_path
            .get_or_insert_with(|| "/dev/termination-log".into());
        c.termination_message_policy.get_or_insert_with(|| "File".into());
    }
}

fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// Validation of a pod being created.
pub fn validate_pod_create(pod: &Pod) -> Vec<FieldError> {
    let mut errs = validate_object_meta(&pod.metadata, true, NameRule::Subdomain);
    let Some(spec) = &pod.spec else {
        errs.push(FieldError::required("spec.containers", ""));
        return errs;
    };
    if spec.containers.is_empty() {
        errs.push(FieldError::required("spec.containers", ""));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        if c.name.is_empty() {
            errs.push(FieldError::required(format!("spec.containers[{i}].name"), ""));
        } else {
            for m in dns1123_label_errors(&c.name) {
                errs.push(FieldError::invalid(
                    format!("spec.containers[{i}].name"),
                    &c.name.clone().into(),
                    &m,
                ));
            }
        }
        if c.image.as_deref().unwrap_or("").trim().is_empty() {
            errs.push(FieldError::required(format!("spec.containers[{i}].image"), ""));
        }
    }
    errs
}

/// "Guaranteed" | "Burstable" | "BestEffort"
pub fn qos_class(pod: &Pod) -> &'static str {
    let any = pod.spec.as_ref().is_some_and(|s| {
        s.containers.iter().any(|c| {
            c.resources.as_ref().is_some_and(|r| {
                r.requests.as_ref().is_some_and(|m| !m.is_empty())
                    || r.limits.as_ref().is_some_and(|m| !m.is_empty())
            })
        })
    });
    if any { "Burstable" } else { "BestEffort" }
}

/// The status a created pod starts with.
pub fn initial_status(pod: &Pod) -> PodStatus {
    PodStatus {
        phase: Some("Pending".into()),
        qos_class: Some(qos_class(pod).into()),
        ..Default::default()
    }
}
