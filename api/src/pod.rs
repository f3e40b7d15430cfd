//! Pod create-time defaulting, validation and QoS, ported from kube-apiserver v1.33:
//! `pkg/apis/core/v1/defaults.go` (plus the generated declarative defaults; [`default_pod_scheme`], what
//! the kubelet applies to static pods), the admission plugins that fill pod fields on every real cluster
//! (ServiceAccount, DefaultTolerationSeconds, Priority; [`default_pod`] adds them, as the API server does),
//! `pkg/apis/core/validation/validation.go` (`ValidatePodCreate`, `ValidatePodSpec`, `ValidatePodUpdate`,
//! `ValidatePodEphemeralContainersUpdate`) and `pkg/apis/core/helper/qos` (`ComputePodQOS`). Field paths
//! and messages are upstream's, because kubectl prints them verbatim. The port covers what users of kubectl
//! meet (containers, ephemeral containers, ports, env, probes, volumes, resources, security context ids,
//! scheduling fields); rarely used volume plugins, affinity, topology spread and sysctls are accepted
//! without checks.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Container, EphemeralContainer, HTTPGetAction, KeyToPath, LifecycleHandler, ObjectFieldSelector, Pod,
    PodSpec, PodStatus, Probe, ResourceRequirements, Toleration, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::FieldError;
use crate::validation::{
    NameRule, config_map_key_errors, dns1123_label_errors, dns1123_subdomain_errors, env_var_name_errors,
    http_header_name_errors, inclusive_range_error, invalid_printed, label_value_errors, name_errors,
    not_found, port_name_errors, port_num_errors, qualified_name_errors, validate_labels,
    validate_object_meta, validate_object_meta_update,
};

// =============================================================================================
// Defaulting
// =============================================================================================

/// upstream `v1.DefaultTerminationGracePeriodSeconds`.
const DEFAULT_TERMINATION_GRACE_PERIOD: i64 = 30;
/// `SetDefaults_*VolumeSource`: 0644.
const DEFAULT_MODE: i32 = 0o644;
/// DefaultTolerationSeconds admission: `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds` both default to 300.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;
const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
const TAINT_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Create-time defaulting as upstream: the scheme defaults of a decoded v1 Pod
/// ([`default_pod_scheme`]), then the mutating admission plugins every cluster runs (ServiceAccount,
/// DefaultTolerationSeconds, Priority). Idempotent, so update paths may call it too.
pub fn default_pod(pod: &mut Pod) {
    default_pod_scheme(pod);
    default_pod_admission(pod);
}

/// The scheme defaults of a decoded v1 Pod only (`SetDefaults_PodSpec` and everything it contains, then
/// `SetDefaults_Pod`), without any admission plugin: what the kubelet applies to a static pod read
/// from a manifest. Idempotent.
pub fn default_pod_scheme(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    default_pod_spec(spec);

    // SetDefaults_Pod: only for pods (not templates), requests default to limits where absent.
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        if let Some(r) = c.resources.as_mut()
            && let Some(limits) = r.limits.clone()
        {
            let requests = r.requests.get_or_insert_with(BTreeMap::new);
            for (k, v) in limits {
                requests.entry(k).or_insert(v);
            }
        }
    }
    spec.enable_service_links.get_or_insert(true);
    if spec.host_network == Some(true) {
        // defaultHostNetworkPorts: with the host's network the host port *is* the container port.
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            for p in c.ports.iter_mut().flatten() {
                if p.host_port.unwrap_or(0) == 0 {
                    p.host_port = Some(p.container_port);
                }
            }
        }
    }
}

/// The defaults of the mutating admission plugins (ServiceAccount, DefaultTolerationSeconds, Priority)
/// on a scheme-defaulted pod.
fn default_pod_admission(pod: &mut Pod) {
    let is_mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    let spec = pod.spec.get_or_insert_with(Default::default);

    // ServiceAccount admission: every pod runs as a service account, "default" unless named. The v1
    // conversion keeps the deprecated `serviceAccount` equal to `serviceAccountName`. The rest of that
    // plugin (the ServiceAccount must exist, the `kube-api-access-*` token volume) needs the API server's
    // objects and lives there (`apiserver::registry::serviceaccount_admission`). Mirror pods are
    // skipped, as upstream.
    if !is_mirror {
        if spec.service_account_name.as_deref().unwrap_or("").is_empty() {
            let deprecated = spec.service_account.clone().filter(|s| !s.is_empty());
            spec.service_account_name = Some(deprecated.unwrap_or_else(|| "default".into()));
        }
        spec.service_account = spec.service_account_name.clone();
    }

    // DefaultTolerationSeconds admission: tolerate not-ready/unreachable nodes for 5 minutes unless
    // the pod already tolerates them (an empty key or effect matches every taint).
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    let tolerates = |taint: &str| {
        tolerations.iter().any(|t| {
            let key = t.key.as_deref().unwrap_or("");
            let effect = t.effect.as_deref().unwrap_or("");
            (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        })
    };
    let (not_ready, unreachable) = (tolerates(TAINT_NOT_READY), tolerates(TAINT_UNREACHABLE));
    for (taint, present) in [(TAINT_NOT_READY, not_ready), (TAINT_UNREACHABLE, unreachable)] {
        if !present {
            tolerations.push(Toleration {
                key: Some(taint.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                value: None,
            });
        }
    }

    // Priority admission: with no global default PriorityClass a pod without a class gets priority 0.
    // The two built-in system classes are known; other classes would need a PriorityClass lookup
    // (upstream rejects unknown ones), so their priority is left as sent.
    let class = spec.priority_class_name.as_deref().unwrap_or("");
    let priority = match class {
        "" => Some(0),
        "system-node-critical" => Some(2_000_001_000),
        "system-cluster-critical" => Some(2_000_000_000),
        _ => None,
    };
    if let Some(p) = priority {
        spec.priority.get_or_insert(p);
    }
    spec.preemption_policy
        .get_or_insert_with(|| "PreemptLowerPriority".into());
}

/// The defaults of a pod template's spec (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob):
/// `SetDefaults_PodSpec` and the container, probe and volume defaults below it, as upstream applies them
/// to any PodSpec it decodes. Not `SetDefaults_Pod` (requests from limits, `enableServiceLinks`, host
/// network ports) and no admission plugin: those act on pods only, so stored templates lack them, as on a
/// real cluster. Idempotent.
pub fn default_pod_template_spec(spec: &mut PodSpec) {
    default_pod_spec(spec);
}

/// `SetDefaults_PodSpec` and everything it contains.
fn default_pod_spec(spec: &mut PodSpec) {
    set_if_empty(&mut spec.dns_policy, "ClusterFirst");
    set_if_empty(&mut spec.restart_policy, "Always");
    spec.security_context.get_or_insert_with(Default::default);
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_TERMINATION_GRACE_PERIOD);
    set_if_empty(&mut spec.scheduler_name, "default-scheduler");
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
    }
    for ec in spec.ephemeral_containers.iter_mut().flatten() {
        // SetDefaults_EphemeralContainer: the container defaults, on the shared fields.
        let mut c = ephemeral_as_container(ec);
        default_container(&mut c);
        *ec = container_as_ephemeral(c, ec.target_container_name.take());
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
}

/// Conversions between an ephemeral container and a [`Container`] with the same fields: upstream casts
/// `EphemeralContainerCommon` to `Container`, k8s-openapi has two structs. The fields are destructured
/// without `..`, so a field added to either type stops the build here.
macro_rules! ephemeral_container_conversions {
    ($($field:ident),* $(,)?) => {
        /// The container fields of an ephemeral container as a [`Container`] (its target container
        /// name left out), for the rules and defaults both kinds share.
        pub fn ephemeral_as_container(ec: &EphemeralContainer) -> Container {
            let EphemeralContainer { $($field,)* target_container_name: _ } = ec.clone();
            Container { $($field,)* }
        }

        fn container_as_ephemeral(c: Container, target_container_name: Option<String>) -> EphemeralContainer {
            let Container { $($field,)* } = c;
            EphemeralContainer { $($field,)* target_container_name }
        }
    };
}

ephemeral_container_conversions!(
    args,
    command,
    env,
    env_from,
    image,
    image_pull_policy,
    lifecycle,
    liveness_probe,
    name,
    ports,
    readiness_probe,
    resize_policy,
    resources,
    restart_policy,
    security_context,
    startup_probe,
    stdin,
    stdin_once,
    termination_message_path,
    termination_message_policy,
    tty,
    volume_devices,
    volume_mounts,
    working_dir,
);

fn set_if_empty(field: &mut Option<String>, value: &str) {
    if field.as_deref().unwrap_or("").is_empty() {
        *field = Some(value.to_string());
    }
}

/// `SetDefaults_Container` plus the defaults of its probes, handlers, ports and env sources.
fn default_container(c: &mut Container) {
    if c.image_pull_policy.as_deref().unwrap_or("").is_empty() {
        c.image_pull_policy = Some(pull_policy(c.image.as_deref().unwrap_or("")).into());
    }
    set_if_empty(&mut c.termination_message_path, "/dev/termination-log");
    set_if_empty(&mut c.termination_message_policy, "File");
    for p in c.ports.iter_mut().flatten() {
        set_if_empty(&mut p.protocol, "TCP");
    }
    for e in c.env.iter_mut().flatten() {
        if let Some(f) = e.value_from.as_mut().and_then(|v| v.field_ref.as_mut()) {
            default_field_selector(f);
        }
    }
    for p in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(p);
    }
    if let Some(l) = c.lifecycle.as_mut() {
        for h in [&mut l.post_start, &mut l.pre_stop].into_iter().flatten() {
            if let Some(g) = h.http_get.as_mut() {
                default_http_get(g);
            }
        }
    }
}

/// `SetDefaults_Probe` (zero means unset) and the handler defaults.
fn default_probe(p: &mut Probe) {
    for (field, value) in [
        (&mut p.timeout_seconds, 1),
        (&mut p.period_seconds, 10),
        (&mut p.success_threshold, 1),
        (&mut p.failure_threshold, 3),
    ] {
        if field.unwrap_or(0) == 0 {
            *field = Some(value);
        }
    }
    if let Some(g) = p.http_get.as_mut() {
        default_http_get(g);
    }
    if let Some(g) = p.grpc.as_mut() {
        // `+default=""` in the v1 types.
        g.service.get_or_insert_with(String::new);
    }
}

/// `SetDefaults_HTTPGetAction`.
fn default_http_get(g: &mut HTTPGetAction) {
    set_if_empty(&mut g.path, "/");
    set_if_empty(&mut g.scheme, "HTTP");
}

/// `SetDefaults_ObjectFieldSelector`.
fn default_field_selector(f: &mut ObjectFieldSelector) {
    set_if_empty(&mut f.api_version, "v1");
}

/// `SetDefaults_Volume` (no source means emptyDir) and the per-source defaults.
fn default_volume(v: &mut Volume) {
    if *v
        == (Volume {
            name: v.name.clone(),
            ..Default::default()
        })
    {
        v.empty_dir = Some(Default::default());
    }
    if let Some(s) = v.secret.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(s) = v.config_map.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(s) = v.downward_api.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_MODE);
        for f in s.items.iter_mut().flatten() {
            if let Some(r) = f.field_ref.as_mut() {
                default_field_selector(r);
            }
        }
    }
    if let Some(s) = v.projected.as_mut() {
        s.default_mode.get_or_insert(DEFAULT_MODE);
        for src in s.sources.iter_mut().flatten() {
            if let Some(t) = src.service_account_token.as_mut() {
                t.expiration_seconds.get_or_insert(3600);
            }
            for f in src
                .downward_api
                .iter_mut()
                .flat_map(|d| d.items.iter_mut().flatten())
            {
                if let Some(r) = f.field_ref.as_mut() {
                    default_field_selector(r);
                }
            }
        }
    }
    if let Some(h) = v.host_path.as_mut() {
        h.type_.get_or_insert_with(String::new);
    }
}

/// The `SetDefaults_Container` pull policy: `Always` for `:latest` or no tag, else `IfNotPresent`.
/// Upstream parses the image with the docker reference grammar; an unparseable reference has no tag
/// and so gets `IfNotPresent`, as does a digest without a tag.
fn pull_policy(image: &str) -> &'static str {
    match image_tag(image) {
        Some((tag, digest)) if tag == Some("latest") || (tag.is_none() && digest.is_none()) => "Always",
        _ => "IfNotPresent",
    }
}

/// Split a docker image reference into (tag, digest), or `None` if it does not parse
/// (`ParseNormalizedNamed`): `[domain[:port]/]path[:tag][@algo:hex]`.
fn image_tag(image: &str) -> Option<(Option<&str>, Option<&str>)> {
    let is_hex64 = image.len() == 64
        && image
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    if image.is_empty() || is_hex64 {
        return None;
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => {
            let (algo, hex) = d.split_once(':')?;
            let algo_ok = !algo.is_empty()
                && algo
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b));
            let hex_ok = hex.len() >= 32
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"=_-".contains(&b));
            if !algo_ok || !hex_ok {
                return None;
            }
            (r, Some(d))
        }
        None => (image, None),
    };
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
        None => (rest, None),
    };
    if let Some(t) = tag {
        let b = t.as_bytes();
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        if b.is_empty()
            || b.len() > 128
            || !word(b[0])
            || !b.iter().all(|&c| word(c) || c == b'.' || c == b'-')
        {
            return None;
        }
    }
    if name.len() > 255 {
        return None;
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    let first = parts[0];
    let has_domain = parts.len() > 1
        && (first.contains('.')
            || first.contains(':')
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase()));
    if has_domain {
        if !valid_domain(first) {
            return None;
        }
        parts.remove(0);
    }
    parts
        .iter()
        .all(|p| valid_path_component(p))
        .then_some((tag, digest))
}

/// A registry host: dot-separated alphanumeric labels (inner '-') or a bracketed IPv6, with a port.
fn valid_domain(d: &str) -> bool {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || d.starts_with('[') => (h, Some(p)),
        _ => (d, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok();
    }
    host.split('.').all(|l| {
        let b = l.as_bytes();
        !b.is_empty()
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-')
    })
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_path_component(p: &str) -> bool {
    let b = p.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &p[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-')) {
            return false;
        }
    }
    true
}

// =============================================================================================
// Quantities (apimachinery/pkg/api/resource)
// =============================================================================================

/// How a quantity was written, which decides how upstream prints it back (`Quantity.String()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// `100m`, `2k`, `5`.
    DecimalSi,
    /// `1Gi`.
    BinarySi,
    /// `1e3`.
    DecimalExponent,
}

/// A parsed quantity: its value in units of 10^-9 (upstream keeps values below a nano rounded up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedQuantity {
    /// The value in units of 10^-9.
    pub nanos: i128,
    /// How it prints.
    pub format: QuantityFormat,
}

const QUANTITY_FORMAT_ERR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const QUANTITY_SUFFIX_ERR: &str = "unable to parse quantity's suffix";
const NANO: i128 = 1_000_000_000;

/// upstream `resource.ParseQuantity`. Values too large for 128 bits saturate (upstream is unbounded).
pub fn parse_quantity(s: &str) -> Result<ParsedQuantity, &'static str> {
    let b = s.as_bytes();
    let mut i = 0;
    let negative = match b.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut mantissa: i128 = 0;
    let mut frac_digits: i32 = 0;
    let mut digits = 0;
    let mut seen_dot = false;
    let mut overflow = false;
    while i < b.len() && (b[i].is_ascii_digit() || (b[i] == b'.' && !seen_dot)) {
        if b[i] == b'.' {
            seen_dot = true;
        } else {
            digits += 1;
            match mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(b[i] - b'0')))
            {
                Some(m) if !overflow => {
                    mantissa = m;
                    if seen_dot {
                        frac_digits += 1;
                    }
                }
                // Past 38 digits: drop further fraction digits, remember integer growth.
                _ => overflow |= !seen_dot,
            }
        }
        i += 1;
    }
    if digits == 0 {
        return Err(QUANTITY_FORMAT_ERR);
    }
    let suffix = &s[i..];
    // The suffix must look like [eEinumkKMGTP]*[-+]?[0-9]*.
    let letters = suffix.bytes().take_while(|c| b"eEinumkKMGTP".contains(c)).count();
    let tail = suffix[letters..]
        .strip_prefix(['+', '-'])
        .unwrap_or(&suffix[letters..]);
    if !tail.bytes().all(|c| c.is_ascii_digit()) {
        return Err(QUANTITY_FORMAT_ERR);
    }
    let (format, pow2, exp10): (QuantityFormat, u32, i32) = match suffix {
        "" => (QuantityFormat::DecimalSi, 0, 0),
        "Ki" => (QuantityFormat::BinarySi, 10, 0),
        "Mi" => (QuantityFormat::BinarySi, 20, 0),
        "Gi" => (QuantityFormat::BinarySi, 30, 0),
        "Ti" => (QuantityFormat::BinarySi, 40, 0),
        "Pi" => (QuantityFormat::BinarySi, 50, 0),
        "Ei" => (QuantityFormat::BinarySi, 60, 0),
        "n" => (QuantityFormat::DecimalSi, 0, -9),
        "u" => (QuantityFormat::DecimalSi, 0, -6),
        "m" => (QuantityFormat::DecimalSi, 0, -3),
        "k" => (QuantityFormat::DecimalSi, 0, 3),
        "M" => (QuantityFormat::DecimalSi, 0, 6),
        "G" => (QuantityFormat::DecimalSi, 0, 9),
        "T" => (QuantityFormat::DecimalSi, 0, 12),
        "P" => (QuantityFormat::DecimalSi, 0, 15),
        "E" => (QuantityFormat::DecimalSi, 0, 18),
        _ => {
            let exp = suffix
                .strip_prefix(['e', 'E'])
                .and_then(|e| e.parse::<i32>().ok())
                .ok_or(QUANTITY_SUFFIX_ERR)?;
            (QuantityFormat::DecimalExponent, 0, exp)
        }
    };
    let saturated = if negative { i128::MIN } else { i128::MAX };
    if overflow {
        return Ok(ParsedQuantity {
            nanos: saturated,
            format,
        });
    }
    let mut v = mantissa.checked_mul(1i128 << pow2);
    let shift = exp10 + 9 - frac_digits;
    v = v.and_then(|v| {
        if shift >= 0 {
            10i128.checked_pow(shift as u32).and_then(|p| v.checked_mul(p))
        } else {
            // Below a nano: round up, as upstream does.
            let p = 10i128.checked_pow((-shift) as u32);
            Some(p.map_or(i128::from(v > 0), |p| (v + p - 1) / p))
        }
    });
    let nanos = match v {
        Some(v) if negative => -v,
        Some(v) => v,
        None => saturated,
    };
    Ok(ParsedQuantity { nanos, format })
}

impl ParsedQuantity {
    /// upstream `Quantity.Add`: the sum keeps this one's format, unless this one is zero.
    pub fn plus(self, other: ParsedQuantity) -> ParsedQuantity {
        ParsedQuantity {
            nanos: self.nanos.saturating_add(other.nanos),
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }

    /// upstream `Quantity.String()`: the canonical form (`0.5` → `500m`, `1024Mi` → `1Gi`).
    pub fn canonical(&self) -> String {
        let n = self.nanos;
        if self.format == QuantityFormat::BinarySi && n.abs() >= 1024 * NANO && n % NANO == 0 {
            let mut v = n / NANO;
            let mut k = 0;
            while k < 6 && v % 1024 == 0 {
                v /= 1024;
                k += 1;
            }
            return format!("{v}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k]);
        }
        if n == 0 {
            return "0".into();
        }
        // The largest exponent (a multiple of 3, from nano) that leaves an integer mantissa.
        let mut exp = -9;
        let mut m = n;
        while m % 1000 == 0 && (self.format == QuantityFormat::DecimalExponent || exp < 18) {
            m /= 1000;
            exp += 3;
        }
        let suffix = match self.format {
            QuantityFormat::DecimalExponent if exp == 0 => String::new(),
            QuantityFormat::DecimalExponent => format!("e{exp}"),
            _ => ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"][((exp + 9) / 3) as usize].to_string(),
        };
        format!("{m}{suffix}")
    }
}

// =============================================================================================
// QoS (pkg/apis/core/helper/qos)
// =============================================================================================

/// upstream `ComputePodQOS`: "Guaranteed" | "Burstable" | "BestEffort". Only cpu and memory count;
/// requests and limits are summed over containers and init containers (pod-level resources are an
/// alpha feature in 1.33 and not honoured).
pub fn qos_class(pod: &Pod) -> &'static str {
    let Some(spec) = &pod.spec else {
        return "BestEffort";
    };
    let mut requests: BTreeMap<&str, i128> = BTreeMap::new();
    let mut limits: BTreeMap<&str, i128> = BTreeMap::new();
    let mut guaranteed = true;
    let positive = |m: Option<&BTreeMap<String, Quantity>>| -> Vec<(&'static str, i128)> {
        let mut out = Vec::new();
        for name in ["cpu", "memory"] {
            if let Some(q) = m.and_then(|m| m.get(name))
                && let Ok(p) = parse_quantity(&q.0)
                && p.nanos > 0
            {
                out.push((name, p.nanos));
            }
        }
        out
    };
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let r = c.resources.as_ref();
        for (name, v) in positive(r.and_then(|r| r.requests.as_ref())) {
            *requests.entry(name).or_default() += v;
        }
        let lims = positive(r.and_then(|r| r.limits.as_ref()));
        if lims.len() < 2 {
            guaranteed = false;
        }
        for (name, v) in lims {
            *limits.entry(name).or_default() += v;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed && requests.iter().all(|(k, v)| limits.get(k) == Some(v)) && requests.len() == limits.len()
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// The status a created pod starts with.
pub fn initial_status(pod: &Pod) -> PodStatus {
    PodStatus {
        phase: Some("Pending".into()),
        qos_class: Some(qos_class(pod).into()),
        ..Default::default()
    }
}

// =============================================================================================
// Validation
// =============================================================================================

const FILE_MODE_ERR: &str = "must be a number between 0 and 0777 (octal), both inclusive";
const NEGATIVE_ERR: &str = "must be greater than or equal to 0";
const MAX_INT32: i64 = i32::MAX as i64;

type Errs = Vec<FieldError>;

fn s(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("")
}

fn invalid_each(errs: &mut Errs, path: &str, value: &str, msgs: Vec<String>) {
    for m in msgs {
        errs.push(FieldError::invalid(path, &json!(value), &m));
    }
}

/// Validation of a pod being created (upstream `ValidatePodCreate`).
pub fn validate_pod_create(pod: &Pod) -> Vec<FieldError> {
    let mut errs = validate_pod_metadata_and_spec(pod);
    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    if spec.ephemeral_containers.as_ref().is_some_and(|e| !e.is_empty()) {
        errs.push(FieldError::forbidden(
            "spec.ephemeralContainers",
            "cannot be set on create",
        ));
    }
    if !s(&spec.node_name).is_empty() && spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()) {
        errs.push(FieldError::forbidden(
            "spec.nodeName",
            "cannot be set until all schedulingGates have been cleared",
        ));
    }
    errs
}

/// upstream `validatePodMetadataAndSpec`: metadata, the spec, and the checks only pods (not templates) get.
fn validate_pod_metadata_and_spec(pod: &Pod) -> Errs {
    let mut errs = validate_object_meta(&pod.metadata, true, NameRule::Subdomain);
    let empty = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty);
    errs.extend(validate_pod_spec(
        spec,
        pod.metadata.name.as_deref().unwrap_or(""),
    ));
    if s(&spec.service_account_name).is_empty() {
        for (vi, v) in spec.volumes.iter().flatten().enumerate() {
            for (si, src) in v
                .projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten())
                .enumerate()
            {
                if src.service_account_token.is_some() {
                    errs.push(FieldError::forbidden(
                        format!("spec.volumes[{vi}].projected.sources[{si}].serviceAccountToken"),
                        "must not be specified when serviceAccountName is not set",
                    ));
                }
            }
        }
    }
    for (kind, list) in [
        ("containers", Some(&spec.containers)),
        ("initContainers", spec.init_containers.as_ref()),
    ] {
        for (i, c) in list.into_iter().flatten().enumerate() {
            validate_image_for_pod(&mut errs, &format!("spec.{kind}[{i}]"), c);
        }
    }
    errs
}

/// upstream `validateContainerOnlyForPod`: pods (not templates) may not pad images with whitespace.
fn validate_image_for_pod(errs: &mut Errs, p: &str, c: &Container) {
    let image = s(&c.image);
    if image.trim() != image {
        errs.push(FieldError::invalid(
            format!("{p}.image"),
            &json!(image),
            "must not have leading or trailing whitespace",
        ));
    }
}

/// upstream `ValidatePodTemplateSpec` for the template at `prefix` (`spec.template`,
/// `spec.jobTemplate.spec.template`): labels, annotations and the pod spec, with every field path under
/// `prefix`. The checks only pods get (image whitespace, projected tokens without a service account) are
/// left out, as upstream leaves them out of templates.
pub fn validate_pod_template_spec(
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
    spec: &PodSpec,
    prefix: &str,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(l) = labels {
        errs.extend(validate_labels(l, &format!("{prefix}.metadata.labels")));
    }
    if let Some(a) = annotations {
        errs.extend(crate::validation::validate_annotations(
            a,
            &format!("{prefix}.metadata.annotations"),
        ));
    }
    // validate_pod_spec reports paths from `spec.`; a template's spec sits under the prefix.
    let from = "spec";
    let to = format!("{prefix}.spec");
    for mut e in validate_pod_spec(spec, "") {
        if let Some(rest) = e.field.strip_prefix(from) {
            e.field = format!("{to}{rest}");
        }
        if let Some(rest) = e.message.strip_prefix(from) {
            e.message = format!("{to}{rest}");
        }
        errs.push(e);
    }
    errs
}

/// upstream `ValidatePodSpec`, in upstream's order.
fn validate_pod_spec(spec: &PodSpec, pod_name: &str) -> Errs {
    let mut errs = Vec::new();
    if spec.termination_grace_period_seconds.is_none() {
        errs.push(FieldError::required("spec.terminationGracePeriodSeconds", ""));
    }
    // Upstream accepts a negative grace period here (deletion turns it into 1), so do we.
    let grace = spec.termination_grace_period_seconds;
    let volumes = validate_volumes(spec.volumes.as_deref().unwrap_or_default(), pod_name, &mut errs);
    let restart_policy = s(&spec.restart_policy);
    validate_containers(&spec.containers, &volumes, grace, &mut errs);
    validate_stop_signals(spec, &mut errs);
    validate_init_containers(
        spec.init_containers.as_deref().unwrap_or_default(),
        &spec.containers,
        &volumes,
        grace,
        &mut errs,
    );
    validate_ephemeral_containers(spec, &volumes, &mut errs);

    // validatePodHostNetworkDeps: in a pod the host port must equal the container port.
    if spec.host_network == Some(true) {
        for (i, c) in spec.containers.iter().enumerate() {
            for (j, p) in c.ports.iter().flatten().enumerate() {
                if p.host_port.unwrap_or(0) != p.container_port {
                    errs.push(FieldError::invalid(
                        format!("spec.containers[{i}].ports[{j}].hostPort"),
                        &json!(p.host_port.unwrap_or(0)),
                        "must match `containerPort` when `hostNetwork` is true",
                    ));
                }
            }
        }
    }
    one_of(
        &mut errs,
        "spec.restartPolicy",
        restart_policy,
        &["Always", "OnFailure", "Never"],
    );
    let dns_policy = s(&spec.dns_policy);
    one_of(
        &mut errs,
        "spec.dnsPolicy",
        dns_policy,
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    if let Some(sel) = &spec.node_selector {
        errs.extend(validate_labels(sel, "spec.nodeSelector"));
    }
    if let Some(sc) = &spec.security_context {
        let p = "spec.securityContext";
        id_range(&mut errs, &format!("{p}.fsGroup"), sc.fs_group);
        id_range(&mut errs, &format!("{p}.runAsUser"), sc.run_as_user);
        id_range(&mut errs, &format!("{p}.runAsGroup"), sc.run_as_group);
        for (g, gid) in sc.supplemental_groups.iter().flatten().enumerate() {
            id_range(&mut errs, &format!("{p}.supplementalGroups[{g}]"), Some(*gid));
        }
        if sc.fs_group_change_policy.is_some() {
            let v = s(&sc.fs_group_change_policy);
            if !["Always", "OnRootMismatch"].contains(&v) {
                errs.push(FieldError::not_supported(
                    format!("{p}.fsGroupChangePolicy"),
                    &json!(v),
                    &["Always", "OnRootMismatch"],
                ));
            }
        }
        if let Some(sp) = &sc.seccomp_profile {
            validate_seccomp(
                &mut errs,
                &format!("{p}.seccompProfile"),
                &sp.type_,
                sp.localhost_profile.is_some(),
            );
        }
    }
    validate_dns_config(spec, dns_policy, &mut errs);
    for (i, g) in spec.readiness_gates.iter().flatten().enumerate() {
        let path = format!("spec.readinessGates[{i}].conditionType");
        invalid_each(
            &mut errs,
            &path,
            &g.condition_type,
            qualified_name_errors(&g.condition_type),
        );
    }
    let mut gates = BTreeSet::new();
    for (i, g) in spec.scheduling_gates.iter().flatten().enumerate() {
        let path = format!("spec.schedulingGates[{i}]");
        invalid_each(&mut errs, &path, &g.name, qualified_name_errors(&g.name));
        if !gates.insert(g.name.as_str()) {
            errs.push(FieldError::duplicate(path, &json!(g.name)));
        }
    }
    for (field, value, rule) in [
        (
            "serviceAccountName",
            &spec.service_account_name,
            NameRule::Subdomain,
        ),
        ("nodeName", &spec.node_name, NameRule::Subdomain),
    ] {
        if !s(value).is_empty() {
            invalid_each(
                &mut errs,
                &format!("spec.{field}"),
                s(value),
                name_errors(rule, s(value), false),
            );
        }
    }
    if let Some(v) = spec.active_deadline_seconds
        && !(1..=MAX_INT32).contains(&v)
    {
        errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            &json!(v),
            &inclusive_range_error(1, MAX_INT32),
        ));
    }
    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        if !s(value).is_empty() {
            invalid_each(
                &mut errs,
                &format!("spec.{field}"),
                s(value),
                dns1123_label_errors(s(value)),
            );
        }
    }
    validate_tolerations(spec.tolerations.as_deref().unwrap_or_default(), &mut errs);
    for (i, a) in spec.host_aliases.iter().flatten().enumerate() {
        if a.ip.parse::<std::net::IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                format!("spec.hostAliases[{i}].ip"),
                &json!(a.ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
        for (j, h) in a.hostnames.iter().flatten().enumerate() {
            invalid_each(
                &mut errs,
                &format!("spec.hostAliases[{i}].hostnames[{j}]"),
                h,
                dns1123_subdomain_errors(h),
            );
        }
    }
    for (field, value) in [
        ("priorityClassName", &spec.priority_class_name),
        ("runtimeClassName", &spec.runtime_class_name),
    ] {
        // priorityClassName is checked only when non-empty, runtimeClassName whenever present.
        if (field == "runtimeClassName" && value.is_some()) || !s(value).is_empty() {
            invalid_each(
                &mut errs,
                &format!("spec.{field}"),
                s(value),
                dns1123_subdomain_errors(s(value)),
            );
        }
    }
    if spec.preemption_policy.is_some() {
        one_of(
            &mut errs,
            "spec.preemptionPolicy",
            s(&spec.preemption_policy),
            &["PreemptLowerPriority", "Never"],
        );
    }
    if let Some(overhead) = &spec.overhead {
        let r = ResourceRequirements {
            limits: Some(overhead.clone()),
            ..Default::default()
        };
        validate_resources(&r, "spec.overhead", &mut errs);
    }
    errs
}

/// A required enum field: `Required` when empty, `Unsupported value` when unknown.
fn one_of(errs: &mut Errs, path: &str, value: &str, supported: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !supported.contains(&value) {
        errs.push(FieldError::not_supported(path, &json!(value), supported));
    }
}

/// upstream `IsValidUserID` / `IsValidGroupID`.
fn id_range(errs: &mut Errs, path: &str, id: Option<i64>) {
    if let Some(id) = id
        && !(0..=MAX_INT32).contains(&id)
    {
        errs.push(FieldError::invalid(
            path,
            &json!(id),
            &inclusive_range_error(0, MAX_INT32),
        ));
    }
}

fn validate_seccomp(errs: &mut Errs, path: &str, type_: &str, has_localhost_profile: bool) {
    let supported = ["Localhost", "RuntimeDefault", "Unconfined"];
    if type_.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.type"),
            "type is required when seccompProfile is set",
        ));
    } else if !supported.contains(&type_) {
        errs.push(FieldError::not_supported(
            format!("{path}.type"),
            &json!(type_),
            &supported,
        ));
    }
    if type_ == "Localhost" && !has_localhost_profile {
        errs.push(FieldError::required(
            format!("{path}.localhostProfile"),
            "must be set when seccomp type is Localhost",
        ));
    }
}

/// upstream `validatePodDNSConfig` (without the relaxed-search details).
fn validate_dns_config(spec: &PodSpec, dns_policy: &str, errs: &mut Errs) {
    let cfg = spec.dns_config.as_ref();
    if dns_policy == "None" {
        let Some(c) = cfg else {
            errs.push(FieldError::required(
                "spec.dnsConfig",
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
            return;
        };
        if c.nameservers.as_ref().is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(
                "spec.dnsConfig.nameservers",
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            ));
            return;
        }
    }
    let Some(c) = cfg else { return };
    let ns = c.nameservers.as_deref().unwrap_or_default();
    if ns.len() > 3 {
        errs.push(invalid_printed(
            "spec.dnsConfig.nameservers",
            &crate::validation::go_string_slice(ns),
            "must not have more than 3 nameservers",
        ));
    }
    for (i, n) in ns.iter().enumerate() {
        if n.parse::<std::net::IpAddr>().is_err() {
            errs.push(FieldError::invalid(
                format!("spec.dnsConfig.nameservers[{i}]"),
                &json!(n),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    for (i, o) in c.options.iter().flatten().enumerate() {
        if s(&o.name).is_empty() {
            errs.push(FieldError::required(
                format!("spec.dnsConfig.options[{i}]"),
                "must not be empty",
            ));
        }
    }
}

/// upstream `ValidateTolerations`.
fn validate_tolerations(tolerations: &[Toleration], errs: &mut Errs) {
    for (i, t) in tolerations.iter().enumerate() {
        let p = format!("spec.tolerations[{i}]");
        let (key, op, value, effect) = (s(&t.key), s(&t.operator), s(&t.value), s(&t.effect));
        if !key.is_empty() {
            invalid_each(errs, &format!("{p}.key"), key, qualified_name_errors(key));
        }
        if key.is_empty() && op != "Exists" {
            errs.push(FieldError::invalid(
                format!("{p}.operator"),
                &json!(op),
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(FieldError::invalid(
                format!("{p}.effect"),
                &json!(effect),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = label_value_errors(value);
                if !msgs.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        &json!(value),
                        &msgs.join(";"),
                    ));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        format!("{p}.operator"),
                        &json!(value),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            _ => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                &json!(op),
                &["Equal", "Exists"],
            )),
        }
        if !effect.is_empty() && !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect) {
            errs.push(FieldError::not_supported(
                format!("{p}.effect"),
                &json!(effect),
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Volumes
// ---------------------------------------------------------------------------------------------

/// upstream `ValidateVolumes`: returns the valid volumes by name (what mounts may refer to).
fn validate_volumes<'a>(
    volumes: &'a [Volume],
    pod_name: &str,
    errs: &mut Errs,
) -> BTreeMap<&'a str, &'a Volume> {
    let mut valid = BTreeMap::new();
    let mut names = BTreeSet::new();
    let created_pvcs: BTreeSet<String> = if pod_name.is_empty() {
        BTreeSet::new()
    } else {
        volumes
            .iter()
            .filter(|v| v.ephemeral.is_some())
            .map(|v| format!("{pod_name}-{}", v.name))
            .collect()
    };
    for (i, v) in volumes.iter().enumerate() {
        let p = format!("spec.volumes[{i}]");
        let mut el = validate_volume_source(v, &p);
        if v.name.is_empty() {
            el.push(FieldError::required(format!("{p}.name"), ""));
        } else {
            invalid_each(
                &mut el,
                &format!("{p}.name"),
                &v.name,
                dns1123_label_errors(&v.name),
            );
        }
        if names.contains(v.name.as_str()) {
            el.push(FieldError::duplicate(format!("{p}.name"), &json!(v.name)));
        }
        if el.is_empty() {
            names.insert(v.name.as_str());
            valid.insert(v.name.as_str(), v);
        } else {
            errs.extend(el);
        }
        if let Some(c) = &v.persistent_volume_claim
            && created_pvcs.contains(&c.claim_name)
        {
            errs.push(FieldError::invalid(
                format!("{p}.persistentVolumeClaim.claimName"),
                &json!(c.claim_name),
                "must not reference a PVC that gets created for an ephemeral volume",
            ));
        }
    }
    valid
}

/// upstream `validateVolumeSource`: exactly one source, each checked. Sources are visited in upstream's
/// order (which decides which one is reported as the extra); rarely used plugins are only counted.
fn validate_volume_source(v: &Volume, p: &str) -> Errs {
    let mut errs = Vec::new();
    // (path segment as upstream spells it in the "more than 1" error, present)
    let sources: [(&str, bool); 30] = [
        ("emptyDir", v.empty_dir.is_some()),
        ("hostPath", v.host_path.is_some()),
        ("gitRepo", v.git_repo.is_some()),
        ("gcePersistentDisk", v.gce_persistent_disk.is_some()),
        ("awsElasticBlockStore", v.aws_elastic_block_store.is_some()),
        ("secret", v.secret.is_some()),
        ("nfs", v.nfs.is_some()),
        ("iscsi", v.iscsi.is_some()),
        ("glusterfs", v.glusterfs.is_some()),
        ("flocker", v.flocker.is_some()),
        ("persistentVolumeClaim", v.persistent_volume_claim.is_some()),
        ("rbd", v.rbd.is_some()),
        ("cinder", v.cinder.is_some()),
        ("cephFS", v.cephfs.is_some()),
        ("quobyte", v.quobyte.is_some()),
        // upstream's typo, kept: users see it.
        ("downwarAPI", v.downward_api.is_some()),
        ("fc", v.fc.is_some()),
        ("flexVolume", v.flex_volume.is_some()),
        ("configMap", v.config_map.is_some()),
        ("azureFile", v.azure_file.is_some()),
        ("vsphereVolume", v.vsphere_volume.is_some()),
        ("photonPersistentDisk", v.photon_persistent_disk.is_some()),
        ("portworxVolume", v.portworx_volume.is_some()),
        ("azureDisk", v.azure_disk.is_some()),
        ("storageos", v.storageos.is_some()),
        ("projected", v.projected.is_some()),
        ("scaleIO", v.scale_io.is_some()),
        ("csi", v.csi.is_some()),
        ("ephemeral", v.ephemeral.is_some()),
        ("image", v.image.is_some()),
    ];
    let mut count = 0;
    for (name, present) in sources {
        if !present {
            continue;
        }
        if count > 0 {
            errs.push(FieldError::forbidden(
                format!("{p}.{name}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        match name {
            "emptyDir" => {
                let limit = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref());
                if limit
                    .and_then(|q| parse_quantity(&q.0).ok())
                    .is_some_and(|q| q.nanos < 0)
                {
                    errs.push(FieldError::forbidden(
                        format!("{p}.emptyDir.sizeLimit"),
                        "SizeLimit field must be a valid resource quantity",
                    ));
                }
            }
            "hostPath" => {
                let h = v.host_path.as_ref().expect("present");
                let hp = format!("{p}.hostPath");
                if h.path.is_empty() {
                    errs.push(FieldError::required(format!("{hp}.path"), ""));
                } else {
                    no_backsteps(&mut errs, &format!("{hp}.path"), &h.path);
                    let types = [
                        "",
                        "BlockDevice",
                        "CharDevice",
                        "Directory",
                        "DirectoryOrCreate",
                        "File",
                        "FileOrCreate",
                        "Socket",
                    ];
                    if let Some(t) = &h.type_
                        && !types.contains(&t.as_str())
                    {
                        errs.push(FieldError::not_supported(format!("{hp}.type"), &json!(t), &types));
                    }
                }
            }
            "secret" => {
                let sv = v.secret.as_ref().expect("present");
                if s(&sv.secret_name).is_empty() {
                    errs.push(FieldError::required(format!("{p}.secret.secretName"), ""));
                }
                file_mode(&mut errs, &format!("{p}.secret.defaultMode"), sv.default_mode);
                key_to_paths(&mut errs, &format!("{p}.secret.items"), sv.items.as_deref());
            }
            "configMap" => {
                let c = v.config_map.as_ref().expect("present");
                if c.name.is_empty() {
                    errs.push(FieldError::required(format!("{p}.configMap.name"), ""));
                }
                file_mode(&mut errs, &format!("{p}.configMap.defaultMode"), c.default_mode);
                key_to_paths(&mut errs, &format!("{p}.configMap.items"), c.items.as_deref());
            }
            "nfs" => {
                let n = v.nfs.as_ref().expect("present");
                if n.server.is_empty() {
                    errs.push(FieldError::required(format!("{p}.nfs.server"), ""));
                }
                if n.path.is_empty() {
                    errs.push(FieldError::required(format!("{p}.nfs.path"), ""));
                }
                if !n.path.starts_with('/') {
                    errs.push(FieldError::invalid(
                        format!("{p}.nfs.path"),
                        &json!(n.path),
                        "must be an absolute path",
                    ));
                }
            }
            "persistentVolumeClaim"
                if v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name.is_empty()) =>
            {
                errs.push(FieldError::required(
                    format!("{p}.persistentVolumeClaim.claimName"),
                    "",
                ));
            }
            "downwarAPI" => {
                let d = v.downward_api.as_ref().expect("present");
                let dp = format!("{p}.downwardAPI");
                file_mode(&mut errs, &format!("{dp}.defaultMode"), d.default_mode);
                for f in d.items.iter().flatten() {
                    downward_api_file(&mut errs, &dp, f);
                }
            }
            "projected" => validate_projected(v, &format!("{p}.projected"), &mut errs),
            "csi" if v.csi.as_ref().is_some_and(|c| c.driver.is_empty()) => {
                errs.push(FieldError::required(format!("{p}.csi.driver"), ""));
            }
            _ => {}
        }
    }
    if count == 0 {
        errs.push(FieldError::required(p, "must specify a volume type"));
    }
    errs
}

fn validate_projected(v: &Volume, p: &str, errs: &mut Errs) {
    let proj = v.projected.as_ref().expect("present");
    file_mode(errs, &format!("{p}.defaultMode"), proj.default_mode);
    let mut paths = BTreeSet::new();
    for (i, src) in proj.sources.iter().flatten().enumerate() {
        let sp = format!("{p}.sources[{i}]");
        let mut n = 0;
        let mut dup = |path: &str, reported: &str, errs: &mut Errs| {
            if !path.is_empty() && !paths.insert(path.to_string()) {
                errs.push(FieldError::invalid(
                    p,
                    &json!(reported),
                    "conflicting duplicate paths",
                ));
            }
        };
        for (kind, name, items) in [
            (
                "secret",
                src.secret.as_ref().map(|x| &x.name),
                src.secret.as_ref().and_then(|x| x.items.as_deref()),
            ),
            (
                "configMap",
                src.config_map.as_ref().map(|x| &x.name),
                src.config_map.as_ref().and_then(|x| x.items.as_deref()),
            ),
        ] {
            let Some(name) = name else { continue };
            n += 1;
            if name.is_empty() {
                errs.push(FieldError::required(format!("{sp}.{kind}.name"), ""));
            }
            for (j, kp) in items.unwrap_or_default().iter().enumerate() {
                key_to_path(errs, &format!("{sp}.{kind}.items[{j}]"), kp);
                dup(&kp.path, name, errs);
            }
        }
        if let Some(d) = &src.downward_api {
            n += 1;
            for f in d.items.iter().flatten() {
                downward_api_file(errs, &format!("{sp}.downwardAPI"), f);
                dup(&f.path, &f.path, errs);
            }
        }
        if let Some(t) = &src.service_account_token {
            n += 1;
            let exp = t.expiration_seconds.unwrap_or(0);
            let ep = format!("{sp}.serviceAccountToken.expirationSeconds");
            if exp < 600 {
                errs.push(FieldError::invalid(
                    &ep,
                    &json!(exp),
                    "may not specify a duration less than 10 minutes",
                ));
            }
            if exp > 1 << 32 {
                errs.push(FieldError::invalid(
                    &ep,
                    &json!(exp),
                    "may not specify a duration larger than 2^32 seconds",
                ));
            }
            if t.path.is_empty() {
                errs.push(FieldError::required(format!("{p}.path"), ""));
            } else {
                local_non_reserved_path(errs, &format!("{p}.path"), &t.path);
            }
        }
        if src.cluster_trust_bundle.is_some() {
            n += 1;
        }
        if n > 1 {
            errs.push(FieldError::forbidden(
                sp,
                "may not specify more than 1 volume type per source",
            ));
        }
    }
}

fn file_mode(errs: &mut Errs, path: &str, mode: Option<i32>) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::invalid(path, &json!(m), FILE_MODE_ERR));
    }
}

fn key_to_paths(errs: &mut Errs, path: &str, items: Option<&[KeyToPath]>) {
    for (i, kp) in items.unwrap_or_default().iter().enumerate() {
        key_to_path(errs, &format!("{path}[{i}]"), kp);
    }
}

/// upstream `validateKeyToPath`.
fn key_to_path(errs: &mut Errs, p: &str, kp: &KeyToPath) {
    if kp.key.is_empty() {
        errs.push(FieldError::required(format!("{p}.key"), ""));
    }
    if kp.path.is_empty() {
        errs.push(FieldError::required(format!("{p}.path"), ""));
    }
    local_non_reserved_path(errs, &format!("{p}.path"), &kp.path);
    file_mode(errs, &format!("{p}.mode"), kp.mode);
}

/// upstream `validateDownwardAPIVolumeFile`; `p` is the source's path (upstream reports item errors there).
fn downward_api_file(errs: &mut Errs, p: &str, f: &k8s_openapi::api::core::v1::DownwardAPIVolumeFile) {
    if f.path.is_empty() {
        errs.push(FieldError::required(format!("{p}.path"), ""));
    }
    local_non_reserved_path(errs, &format!("{p}.path"), &f.path);
    if let Some(r) = &f.field_ref {
        let supported = [
            "metadata.annotations",
            "metadata.labels",
            "metadata.name",
            "metadata.namespace",
            "metadata.uid",
        ];
        field_selector(errs, &format!("{p}.fieldRef"), r, &supported);
        if f.resource_field_ref.is_some() {
            errs.push(FieldError::invalid(
                p,
                &json!("resource"),
                "fieldRef and resourceFieldRef can not be specified simultaneously",
            ));
        }
    } else if let Some(r) = &f.resource_field_ref {
        let rp = format!("{p}.resourceFieldRef");
        if s(&r.container_name).is_empty() {
            errs.push(FieldError::required(format!("{rp}.containerName"), ""));
        } else {
            resource_field(errs, &rp, &r.resource);
        }
    } else {
        errs.push(FieldError::required(
            p,
            "one of fieldRef and resourceFieldRef is required",
        ));
    }
    file_mode(errs, &format!("{p}.mode"), f.mode);
}

/// upstream `validateLocalDescendingPath`.
fn local_descending_path(errs: &mut Errs, p: &str, target: &str) {
    if target.starts_with('/') {
        errs.push(FieldError::invalid(p, &json!(target), "must be a relative path"));
    }
    no_backsteps(errs, p, target);
}

fn no_backsteps(errs: &mut Errs, p: &str, target: &str) {
    if target.split('/').any(|part| part == "..") {
        errs.push(FieldError::invalid(p, &json!(target), "must not contain '..'"));
    }
}

/// upstream `ValidateLocalNonReservedPath`.
fn local_non_reserved_path(errs: &mut Errs, p: &str, target: &str) {
    local_descending_path(errs, p, target);
    if target.starts_with("..") && !target.starts_with("../") {
        errs.push(FieldError::invalid(p, &json!(target), "must not start with '..'"));
    }
}

/// upstream `validateObjectFieldSelector` with `ConvertDownwardAPIFieldLabel` for v1.
fn field_selector(errs: &mut Errs, p: &str, f: &ObjectFieldSelector, supported: &[&str]) {
    let version = s(&f.api_version);
    if version.is_empty() {
        errs.push(FieldError::required(format!("{p}.apiVersion"), ""));
        return;
    }
    if f.field_path.is_empty() {
        errs.push(FieldError::required(format!("{p}.fieldPath"), ""));
        return;
    }
    let path = f.field_path.as_str();
    // fieldpath.SplitMaybeSubscriptedPath: `metadata.labels['key']`.
    let subscripted = path
        .strip_suffix("']")
        .and_then(|p| p.split_once("['"))
        .filter(|(_, sub)| !sub.is_empty());
    let base = subscripted.map_or(path, |(b, _)| b);
    let known = [
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    ];
    let conversion_err = if version != "v1" {
        Some(format!("unsupported pod version: {version}"))
    } else if !known.contains(&base)
        || (subscripted.is_some() && !["metadata.annotations", "metadata.labels"].contains(&base))
    {
        Some(format!("field label not supported: {path}"))
    } else {
        None
    };
    if let Some(e) = conversion_err {
        errs.push(FieldError::invalid(
            format!("{p}.fieldPath"),
            &json!(path),
            &format!("error converting fieldPath: {e}"),
        ));
        return;
    }
    match subscripted {
        Some((b, sub)) => {
            let key = if b == "metadata.annotations" {
                sub.to_lowercase()
            } else {
                sub.to_string()
            };
            invalid_each(errs, p, &key, qualified_name_errors(&key));
        }
        None => {
            if !supported.contains(&base) {
                errs.push(FieldError::not_supported(
                    format!("{p}.fieldPath"),
                    &json!(base),
                    supported,
                ));
            }
        }
    }
}

/// upstream `validateContainerResourceFieldSelector` (resource part; divisors are not checked).
fn resource_field(errs: &mut Errs, p: &str, resource: &str) {
    let supported = [
        "limits.cpu",
        "limits.ephemeral-storage",
        "limits.memory",
        "requests.cpu",
        "requests.ephemeral-storage",
        "requests.memory",
    ];
    if resource.is_empty() {
        errs.push(FieldError::required(format!("{p}.resource"), ""));
    } else if !supported.contains(&resource)
        && !resource.starts_with("requests.hugepages-")
        && !resource.starts_with("limits.hugepages-")
    {
        errs.push(FieldError::not_supported(
            format!("{p}.resource"),
            &json!(resource),
            &supported,
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Containers
// ---------------------------------------------------------------------------------------------

/// upstream `validateContainers`.
fn validate_containers(
    containers: &[Container],
    volumes: &BTreeMap<&str, &Volume>,
    grace: Option<i64>,
    errs: &mut Errs,
) {
    if containers.is_empty() {
        errs.push(FieldError::required("spec.containers", ""));
        return;
    }
    let mut names = BTreeSet::new();
    for (i, c) in containers.iter().enumerate() {
        let p = format!("spec.containers[{i}]");
        validate_container_common(c, volumes, &p, errs);
        if !names.insert(c.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}.name"), &json!(c.name)));
        }
        validate_probes_and_lifecycle(c, grace, &p, errs);
        if c.restart_policy.is_some() {
            errs.push(FieldError::forbidden(
                format!("{p}.restartPolicy"),
                "may not be set for non-init containers",
            ));
        }
    }
    host_port_conflicts(containers, "spec.containers", 0, errs);
}

/// upstream `validateInitContainers`: names are unique across init and regular containers; only
/// restartable (sidecar) init containers may have probes and lifecycle hooks.
fn validate_init_containers(
    inits: &[Container],
    regular: &[Container],
    volumes: &BTreeMap<&str, &Volume>,
    grace: Option<i64>,
    errs: &mut Errs,
) {
    let mut names: BTreeSet<&str> = regular.iter().map(|c| c.name.as_str()).collect();
    for (i, c) in inits.iter().enumerate() {
        let p = format!("spec.initContainers[{i}]");
        validate_container_common(c, volumes, &p, errs);
        let restart_always = c.restart_policy.as_deref() == Some("Always");
        if let Some(rp) = &c.restart_policy
            && rp != "Always"
        {
            errs.push(FieldError::not_supported(
                format!("{p}.restartPolicy"),
                &json!(rp),
                &["Always"],
            ));
        }
        if names.contains(c.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}.name"), &json!(c.name)));
        } else if !c.name.is_empty() {
            names.insert(c.name.as_str());
        }
        // Init containers run one by one, so host ports only conflict within one of them.
        host_port_conflicts(std::slice::from_ref(c), "spec.initContainers", i, errs);
        if restart_always {
            validate_probes_and_lifecycle(c, grace, &p, errs);
        } else {
            let forbidden = [
                ("lifecycle", c.lifecycle.is_some()),
                ("livenessProbe", c.liveness_probe.is_some()),
                ("readinessProbe", c.readiness_probe.is_some()),
                ("startupProbe", c.startup_probe.is_some()),
            ];
            for (field, set) in forbidden {
                if set {
                    errs.push(FieldError::forbidden(
                        format!("{p}.{field}"),
                        "may not be set for init containers without restartPolicy=Always",
                    ));
                }
            }
        }
        if c.resize_policy.as_ref().is_some_and(|r| !r.is_empty()) && !restart_always {
            // upstream prints the policy list with %#v; we print it as JSON.
            let printed = serde_json::to_string(&c.resize_policy).unwrap_or_default();
            errs.push(invalid_printed(
                format!("{p}.resizePolicy"),
                &printed,
                "must not be set for init containers",
            ));
        }
    }
}

/// The fields of an ephemeral container upstream's `allowedEphemeralContainerFields` leaves out, in the
/// struct's field order (the order of the errors), with whether each is set (non-zero in Go's terms: a
/// list, pointer or map that is there at all, even empty).
fn ephemeral_fields_set(ec: &EphemeralContainer) -> [(&'static str, bool); 8] {
    let resources = ec
        .resources
        .as_ref()
        .is_some_and(|r| r.limits.is_some() || r.requests.is_some() || r.claims.is_some());
    [
        ("ports", ec.ports.is_some()),
        ("resources", resources),
        ("resizePolicy", ec.resize_policy.is_some()),
        ("restartPolicy", ec.restart_policy.is_some()),
        ("livenessProbe", ec.liveness_probe.is_some()),
        ("readinessProbe", ec.readiness_probe.is_some()),
        ("startupProbe", ec.startup_probe.is_some()),
        ("lifecycle", ec.lifecycle.is_some()),
    ]
}

/// upstream `validateEphemeralContainers`: the common container rules, names unique across every kind of
/// container, a target that names a container or init container, none of the fields that would make the
/// pod depend on the container (ports, probes, lifecycle, resources, restart and resize policies), and no
/// subPath mounts (bind mounts that outlive the container).
fn validate_ephemeral_containers(spec: &PodSpec, volumes: &BTreeMap<&str, &Volume>, errs: &mut Errs) {
    const FORBIDDEN: &str = "cannot be set for an Ephemeral Container";
    let others: BTreeSet<&str> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect();
    let mut names = others.clone();
    for (i, ec) in spec.ephemeral_containers.iter().flatten().enumerate() {
        let p = format!("spec.ephemeralContainers[{i}]");
        let c = ephemeral_as_container(ec);
        validate_container_common(&c, volumes, &p, errs);
        validate_image_for_pod(errs, &p, &c);
        if !names.insert(ec.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}.name"), &json!(ec.name)));
        }
        let target = s(&ec.target_container_name);
        if !target.is_empty() && !others.contains(target) {
            errs.push(not_found(format!("{p}.targetContainerName"), target));
        }
        for (field, set) in ephemeral_fields_set(ec) {
            if set {
                errs.push(FieldError::forbidden(format!("{p}.{field}"), FORBIDDEN));
            }
        }
        for (j, m) in ec.volume_mounts.iter().flatten().enumerate() {
            for (field, value) in [("subPath", &m.sub_path), ("subPathExpr", &m.sub_path_expr)] {
                if !s(value).is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{p}.volumeMounts[{j}].{field}"),
                        FORBIDDEN,
                    ));
                }
            }
        }
    }
}

/// upstream `AccumulateUniqueHostPorts`: `offset` is the index of the first container in `containers`.
fn host_port_conflicts(containers: &[Container], list_path: &str, offset: usize, errs: &mut Errs) {
    let mut seen = BTreeSet::new();
    for (ci, c) in containers.iter().enumerate() {
        for (pi, port) in c.ports.iter().flatten().enumerate() {
            let hp = port.host_port.unwrap_or(0);
            if hp == 0 {
                continue;
            }
            let key = format!("{}/{}/{hp}", s(&port.protocol), s(&port.host_ip));
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(
                    format!("{list_path}[{}].ports[{pi}].hostPort", ci + offset),
                    &json!(key),
                ));
            }
        }
    }
}

/// upstream `validateContainerCommon`.
fn validate_container_common(c: &Container, volumes: &BTreeMap<&str, &Volume>, p: &str, errs: &mut Errs) {
    if c.name.is_empty() {
        errs.push(FieldError::required(format!("{p}.name"), ""));
    } else {
        invalid_each(errs, &format!("{p}.name"), &c.name, dns1123_label_errors(&c.name));
    }
    // Upstream only checks emptiness here; whitespace-only images fail the pod-only trim check.
    if s(&c.image).is_empty() {
        errs.push(FieldError::required(format!("{p}.image"), ""));
    }
    one_of(
        errs,
        &format!("{p}.terminationMessagePolicy"),
        s(&c.termination_message_policy),
        &["File", "FallbackToLogsOnError"],
    );
    validate_ports(c, p, errs);
    validate_env(c, p, errs);
    validate_volume_mounts(c, volumes, p, errs);
    let policy = s(&c.image_pull_policy);
    let pp = format!("{p}.imagePullPolicy");
    if policy.is_empty() {
        errs.push(FieldError::required(pp, ""));
    } else if !["Always", "IfNotPresent", "Never"].contains(&policy) {
        errs.push(FieldError::not_supported(
            pp,
            &json!(policy),
            &["Always", "IfNotPresent", "Never"],
        ));
    }
    if let Some(r) = &c.resources {
        validate_resources(r, &format!("{p}.resources"), errs);
    }
    if let Some(sc) = &c.security_context {
        let sp = format!("{p}.securityContext");
        id_range(errs, &format!("{sp}.runAsUser"), sc.run_as_user);
        id_range(errs, &format!("{sp}.runAsGroup"), sc.run_as_group);
        if let Some(pm) = &sc.proc_mount
            && !["Default", "Unmasked"].contains(&pm.as_str())
        {
            errs.push(FieldError::not_supported(
                format!("{sp}.procMount"),
                &json!(pm),
                &["Default", "Unmasked"],
            ));
        }
        if let Some(sp2) = &sc.seccomp_profile {
            validate_seccomp(
                errs,
                &format!("{sp}.seccompProfile"),
                &sp2.type_,
                sp2.localhost_profile.is_some(),
            );
        }
        // `privileged: true` is accepted: kubeling runs as with `--allow-privileged=true` (kubeadm's
        // setting), not the bare kube-apiserver default.
    }
}

/// upstream `validateContainerPorts`.
fn validate_ports(c: &Container, p: &str, errs: &mut Errs) {
    let mut names = BTreeSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let ip = format!("{p}.ports[{i}]");
        let name = s(&port.name);
        if !name.is_empty() {
            let msgs = port_name_errors(name);
            if !msgs.is_empty() {
                invalid_each(errs, &format!("{ip}.name"), name, msgs);
            } else if !names.insert(name) {
                errs.push(FieldError::duplicate(format!("{ip}.name"), &json!(name)));
            }
        }
        if port.container_port == 0 {
            errs.push(FieldError::required(format!("{ip}.containerPort"), ""));
        } else {
            for m in port_num_errors(i64::from(port.container_port)) {
                errs.push(FieldError::invalid(
                    format!("{ip}.containerPort"),
                    &json!(port.container_port),
                    &m,
                ));
            }
        }
        let hp = port.host_port.unwrap_or(0);
        if hp != 0 {
            for m in port_num_errors(i64::from(hp)) {
                errs.push(FieldError::invalid(format!("{ip}.hostPort"), &json!(hp), &m));
            }
        }
        let proto = s(&port.protocol);
        if proto.is_empty() {
            errs.push(FieldError::required(format!("{ip}.protocol"), ""));
        } else if !["SCTP", "TCP", "UDP"].contains(&proto) {
            errs.push(FieldError::not_supported(
                format!("{ip}.protocol"),
                &json!(proto),
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
}

/// upstream `ValidateEnv` and `ValidateEnvFrom` (the relaxed 1.33 name rule).
fn validate_env(c: &Container, p: &str, errs: &mut Errs) {
    for (i, e) in c.env.iter().flatten().enumerate() {
        let ep = format!("{p}.env[{i}]");
        if e.name.is_empty() {
            errs.push(FieldError::required(format!("{ep}.name"), ""));
        } else {
            invalid_each(errs, &format!("{ep}.name"), &e.name, env_var_name_errors(&e.name));
        }
        let Some(from) = &e.value_from else { continue };
        let vp = format!("{ep}.valueFrom");
        let mut n = 0;
        if let Some(f) = &from.field_ref {
            n += 1;
            let supported = [
                "metadata.name",
                "metadata.namespace",
                "metadata.uid",
                "spec.nodeName",
                "spec.serviceAccountName",
                "status.hostIP",
                "status.hostIPs",
                "status.podIP",
                "status.podIPs",
            ];
            field_selector(errs, &format!("{vp}.fieldRef"), f, &supported);
        }
        if let Some(r) = &from.resource_field_ref {
            n += 1;
            resource_field(errs, &format!("{vp}.resourceFieldRef"), &r.resource);
        }
        for (kind, sel) in [
            (
                "configMapKeyRef",
                from.config_map_key_ref.as_ref().map(|k| (&k.name, &k.key)),
            ),
            (
                "secretKeyRef",
                from.secret_key_ref.as_ref().map(|k| (&k.name, &k.key)),
            ),
        ] {
            let Some((name, key)) = sel else { continue };
            n += 1;
            let kp = format!("{vp}.{kind}");
            invalid_each(errs, &format!("{kp}.name"), name, dns1123_subdomain_errors(name));
            if key.is_empty() {
                errs.push(FieldError::required(format!("{kp}.key"), ""));
            } else {
                invalid_each(errs, &format!("{kp}.key"), key, config_map_key_errors(key));
            }
        }
        if n == 0 {
            errs.push(FieldError::invalid(
                &vp,
                &json!(""),
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !s(&e.value).is_empty() {
            errs.push(FieldError::invalid(
                &vp,
                &json!(""),
                "may not be specified when `value` is not empty",
            ));
        } else if n > 1 {
            errs.push(FieldError::invalid(
                &vp,
                &json!(""),
                "may not have more than one field specified at a time",
            ));
        }
    }
    let fp = format!("{p}.envFrom");
    for (i, e) in c.env_from.iter().flatten().enumerate() {
        let ip = format!("{fp}[{i}]");
        let prefix = s(&e.prefix);
        if !prefix.is_empty() {
            invalid_each(errs, &format!("{ip}.prefix"), prefix, env_var_name_errors(prefix));
        }
        let mut n = 0;
        for (kind, name) in [
            ("configMapRef", e.config_map_ref.as_ref().map(|r| &r.name)),
            ("secretRef", e.secret_ref.as_ref().map(|r| &r.name)),
        ] {
            let Some(name) = name else { continue };
            n += 1;
            let np = format!("{ip}.{kind}.name");
            if name.is_empty() {
                errs.push(FieldError::required(np, ""));
            } else {
                invalid_each(errs, &np, name, name_errors(NameRule::Subdomain, name, true));
            }
        }
        // upstream reports these on the list's path, not the item's.
        if n == 0 {
            errs.push(FieldError::invalid(
                &fp,
                &json!(""),
                "must specify one of: `configMapRef` or `secretRef`",
            ));
        } else if n > 1 {
            errs.push(FieldError::invalid(
                &fp,
                &json!(""),
                "may not have more than one field specified at a time",
            ));
        }
    }
}

/// upstream `ValidateVolumeMounts` (mount propagation and recursive read-only are not checked).
fn validate_volume_mounts(c: &Container, volumes: &BTreeMap<&str, &Volume>, p: &str, errs: &mut Errs) {
    let mp = format!("{p}.volumeMounts");
    let mut paths = BTreeSet::new();
    let devices: BTreeMap<&str, &str> = c
        .volume_devices
        .iter()
        .flatten()
        .map(|d| (d.name.as_str(), d.device_path.as_str()))
        .collect();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let ip = format!("{mp}[{i}]");
        if m.name.is_empty() {
            errs.push(FieldError::required(format!("{ip}.name"), ""));
        }
        if !volumes.contains_key(m.name.as_str()) {
            errs.push(not_found(format!("{ip}.name"), &m.name));
        }
        if m.mount_path.is_empty() {
            errs.push(FieldError::required(format!("{ip}.mountPath"), ""));
        }
        if !paths.insert(m.mount_path.as_str()) {
            errs.push(FieldError::invalid(
                format!("{ip}.mountPath"),
                &json!(m.mount_path),
                "must be unique",
            ));
        }
        if devices.contains_key(m.name.as_str()) {
            errs.push(FieldError::invalid(
                format!("{ip}.name"),
                &json!(m.name),
                "must not already exist in volumeDevices",
            ));
        }
        if devices.values().any(|d| *d == m.mount_path) {
            errs.push(FieldError::invalid(
                format!("{ip}.mountPath"),
                &json!(m.mount_path),
                "must not already exist as a path in volumeDevices",
            ));
        }
        let sub = s(&m.sub_path);
        let sub_expr = s(&m.sub_path_expr);
        if volumes.get(m.name.as_str()).is_some_and(|v| v.image.is_some()) {
            if !sub.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{ip}.subPath"),
                    &json!(sub),
                    "not allowed in image volume sources",
                ));
            }
            if !sub_expr.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{ip}.subPathExpr"),
                    &json!(sub_expr),
                    "not allowed in image volume sources",
                ));
            }
        }
        // upstream reports subPath problems on the list's path (`volumeMounts.subPath`); kept.
        if !sub.is_empty() {
            local_descending_path(errs, &format!("{mp}.subPath"), sub);
        }
        if !sub_expr.is_empty() {
            if !sub.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{ip}.subPathExpr"),
                    &json!(sub_expr),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
            local_descending_path(errs, &format!("{mp}.subPathExpr"), sub_expr);
        }
    }
}

/// upstream `validateContainerStopSignal` (ContainerStopSignals; kubeling enables it): `lifecycle.stopSignal`
/// needs `spec.os.name`, and on Linux one of the signals a Linux container can be stopped with.
fn validate_stop_signals(spec: &PodSpec, errs: &mut Errs) {
    let lists = [
        ("containers", Some(&spec.containers)),
        ("initContainers", spec.init_containers.as_ref()),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let Some(signal) = c.lifecycle.as_ref().and_then(|l| l.stop_signal.as_deref()) else {
                continue;
            };
            let path = format!("spec.{list}[{i}].lifecycle.stopSignal");
            match spec.os.as_ref().map(|o| o.name.as_str()) {
                None => errs.push(FieldError::forbidden(
                    path,
                    "may not be set for containers with empty `spec.os.name`",
                )),
                Some("linux") => {
                    let supported = linux_stop_signals();
                    if !supported.iter().any(|s| s == signal) {
                        let names: Vec<&str> = supported.iter().map(String::as_str).collect();
                        errs.push(FieldError::not_supported(path, &json!(signal), &names));
                    }
                }
                Some(_) => {}
            }
        }
    }
}

/// upstream `supportedStopSignalsLinux`, sorted as Go's `sets.List` sorts them.
fn linux_stop_signals() -> Vec<String> {
    let mut v: Vec<String> = [
        "SIGABRT",
        "SIGALRM",
        "SIGBUS",
        "SIGCHLD",
        "SIGCLD",
        "SIGCONT",
        "SIGFPE",
        "SIGHUP",
        "SIGILL",
        "SIGINT",
        "SIGIO",
        "SIGIOT",
        "SIGKILL",
        "SIGPIPE",
        "SIGPOLL",
        "SIGPROF",
        "SIGPWR",
        "SIGQUIT",
        "SIGSEGV",
        "SIGSTKFLT",
        "SIGSTOP",
        "SIGSYS",
        "SIGTERM",
        "SIGTRAP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGUSR1",
        "SIGUSR2",
        "SIGVTALRM",
        "SIGWINCH",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGRTMIN",
        "SIGRTMAX",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    v.extend((1..=15).map(|n| format!("SIGRTMIN+{n}")));
    v.extend((1..=14).map(|n| format!("SIGRTMAX-{n}")));
    v.sort();
    v
}

/// Liveness, readiness, startup probes and lifecycle hooks (regular and sidecar containers).
fn validate_probes_and_lifecycle(c: &Container, grace: Option<i64>, p: &str, errs: &mut Errs) {
    if let Some(l) = &c.lifecycle {
        for (field, h) in [("postStart", &l.post_start), ("preStop", &l.pre_stop)] {
            if let Some(h) = h {
                validate_handler(
                    Handler::from_lifecycle(h),
                    grace,
                    &format!("{p}.lifecycle.{field}"),
                    errs,
                );
            }
        }
    }
    for (field, probe) in [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ] {
        let Some(probe) = probe else { continue };
        let pp = format!("{p}.{field}");
        validate_probe(probe, grace, &pp, errs);
        let success = probe.success_threshold.unwrap_or(0);
        if field != "readinessProbe" && success != 1 {
            errs.push(FieldError::invalid(
                format!("{pp}.successThreshold"),
                &json!(success),
                "must be 1",
            ));
        }
        if field == "readinessProbe"
            && let Some(t) = probe.termination_grace_period_seconds
        {
            errs.push(FieldError::invalid(
                format!("{pp}.terminationGracePeriodSeconds"),
                &json!(t),
                "must not be set for readinessProbes",
            ));
        }
    }
}

/// upstream `validateProbe`.
fn validate_probe(probe: &Probe, grace: Option<i64>, p: &str, errs: &mut Errs) {
    validate_handler(Handler::from_probe(probe), grace, p, errs);
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        let v = value.unwrap_or(0);
        if v < 0 {
            errs.push(FieldError::invalid(
                format!("{p}.{field}"),
                &json!(v),
                NEGATIVE_ERR,
            ));
        }
    }
    if let Some(t) = probe.termination_grace_period_seconds
        && t <= 0
    {
        errs.push(FieldError::invalid(
            format!("{p}.terminationGracePeriodSeconds"),
            &json!(t),
            "must be greater than 0",
        ));
    }
}

/// upstream `commonHandler`: probes have exec/httpGet/tcpSocket/grpc, lifecycle hooks exec/httpGet/
/// tcpSocket/sleep.
struct Handler<'a> {
    exec: Option<&'a k8s_openapi::api::core::v1::ExecAction>,
    http_get: Option<&'a HTTPGetAction>,
    tcp_port: Option<&'a IntOrString>,
    grpc_port: Option<i32>,
    sleep: Option<i64>,
}

impl<'a> Handler<'a> {
    fn from_probe(p: &'a Probe) -> Self {
        Handler {
            exec: p.exec.as_ref(),
            http_get: p.http_get.as_ref(),
            tcp_port: p.tcp_socket.as_ref().map(|t| &t.port),
            grpc_port: p.grpc.as_ref().map(|g| g.port),
            sleep: None,
        }
    }

    fn from_lifecycle(h: &'a LifecycleHandler) -> Self {
        Handler {
            exec: h.exec.as_ref(),
            http_get: h.http_get.as_ref(),
            tcp_port: h.tcp_socket.as_ref().map(|t| &t.port),
            grpc_port: None,
            sleep: h.sleep.as_ref().map(|s| s.seconds),
        }
    }
}

/// upstream `validateHandler`: exactly one handler type.
fn validate_handler(h: Handler, grace: Option<i64>, p: &str, errs: &mut Errs) {
    let mut n = 0;
    let mut one = |field: &str, present: bool, errs: &mut Errs| -> bool {
        if !present {
            return false;
        }
        if n > 0 {
            errs.push(FieldError::forbidden(
                format!("{p}.{field}"),
                "may not specify more than 1 handler type",
            ));
            return false;
        }
        n += 1;
        true
    };
    if one("exec", h.exec.is_some(), errs)
        && h.exec
            .is_some_and(|e| e.command.as_ref().is_none_or(Vec::is_empty))
    {
        errs.push(FieldError::required(format!("{p}.exec.command"), ""));
    }
    if one("httpGet", h.http_get.is_some(), errs) {
        let g = h.http_get.expect("present");
        let gp = format!("{p}.httpGet");
        if s(&g.path).is_empty() {
            errs.push(FieldError::required(format!("{gp}.path"), ""));
        }
        port_num_or_name(errs, &format!("{gp}.port"), &g.port);
        let scheme = s(&g.scheme);
        if !["HTTP", "HTTPS"].contains(&scheme) {
            errs.push(FieldError::not_supported(
                format!("{gp}.scheme"),
                &json!(scheme),
                &["HTTP", "HTTPS"],
            ));
        }
        for hdr in g.http_headers.iter().flatten() {
            invalid_each(
                errs,
                &format!("{gp}.httpHeaders"),
                &hdr.name,
                http_header_name_errors(&hdr.name),
            );
        }
    }
    if one("tcpSocket", h.tcp_port.is_some(), errs) {
        port_num_or_name(errs, &format!("{p}.tcpSocket.port"), h.tcp_port.expect("present"));
    }
    if one("grpc", h.grpc_port.is_some(), errs) {
        port_num_or_name(
            errs,
            &format!("{p}.grpc.port"),
            &IntOrString::Int(h.grpc_port.expect("present")),
        );
    }
    if one("sleep", h.sleep.is_some(), errs) {
        // PodLifecycleSleepActionAllowZero is on by default in 1.33.
        let secs = h.sleep.expect("present");
        if let Some(g) = grace
            && (secs < 0 || secs > g)
        {
            errs.push(FieldError::invalid(
                format!("{p}.sleep"),
                &json!(secs),
                &format!("must be non-negative and less than terminationGracePeriodSeconds ({g})"),
            ));
        }
    }
    if n == 0 {
        errs.push(FieldError::required(p, "must specify a handler type"));
    }
}

/// upstream `ValidatePortNumOrName`.
fn port_num_or_name(errs: &mut Errs, p: &str, port: &IntOrString) {
    match port {
        IntOrString::Int(n) => {
            for m in port_num_errors(i64::from(*n)) {
                errs.push(FieldError::invalid(p, &json!(n), &m));
            }
        }
        IntOrString::String(name) => invalid_each(errs, p, name, port_name_errors(name)),
    }
}

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

/// upstream `IsStandardResourceName` (the names a bare, unprefixed resource may have).
fn is_standard_resource_name(name: &str) -> bool {
    let base = name
        .strip_prefix("requests.")
        .or_else(|| name.strip_prefix("limits."))
        .unwrap_or(name);
    base.starts_with("hugepages-")
        || [
            "cpu",
            "memory",
            "ephemeral-storage",
            "storage",
            "pods",
            "services",
            "replicationcontrollers",
            "resourcequotas",
            "secrets",
            "configmaps",
            "persistentvolumeclaims",
            "services.nodeports",
            "services.loadbalancers",
        ]
        .contains(&base)
}

/// upstream `IsNativeResource`: unprefixed or in the kubernetes.io domain; these may be overcommitted
/// (requests below limits), except hugepages.
fn is_overcommit_allowed(name: &str) -> bool {
    (!name.contains('/') || name.contains("kubernetes.io/")) && !name.starts_with("hugepages-")
}

/// upstream `ValidateContainerResourceRequirements`. Unparseable quantities are reported as 422 field
/// errors; upstream rejects them while decoding the request (400) with the same message.
fn validate_resources(r: &ResourceRequirements, p: &str, errs: &mut Errs) {
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    let requests = r.requests.as_ref().unwrap_or(&empty);
    let (lim_path, req_path) = (format!("{p}.limits"), format!("{p}.requests"));
    let mut cpu_or_memory = false;
    let mut hugepages = false;
    let mut parsed_limits = BTreeMap::new();
    for (name, q) in limits {
        let fp = format!("{lim_path}[{name}]");
        resource_name(errs, &fp, name);
        if let Some(pq) = quantity_value(errs, &fp, name, q) {
            parsed_limits.insert(name.as_str(), pq);
        }
        hugepages |= name.starts_with("hugepages-");
        cpu_or_memory |= name == "cpu" || name == "memory";
    }
    for (name, q) in requests {
        let fp = format!("{req_path}[{name}]");
        resource_name(errs, &fp, name);
        let parsed = quantity_value(errs, &fp, name, q);
        match (parsed, parsed_limits.get(name.as_str())) {
            (Some(req), Some(lim)) => {
                let (rs, ls) = (req.canonical(), lim.canonical());
                if req.nanos != lim.nanos && !is_overcommit_allowed(name) {
                    errs.push(FieldError::invalid(
                        &req_path,
                        &json!(rs),
                        &format!("must be equal to {name} limit of {ls}"),
                    ));
                } else if req.nanos > lim.nanos {
                    errs.push(FieldError::invalid(
                        &req_path,
                        &json!(rs),
                        &format!("must be less than or equal to {name} limit of {ls}"),
                    ));
                }
            }
            (_, None) if !limits.contains_key(name) && !is_overcommit_allowed(name) => {
                errs.push(FieldError::required(
                    &lim_path,
                    "Limit must be set for non overcommitable resources",
                ));
            }
            _ => {}
        }
        hugepages |= name.starts_with("hugepages-");
        cpu_or_memory |= name == "cpu" || name == "memory";
    }
    if hugepages && !cpu_or_memory {
        errs.push(FieldError::forbidden(p, "HugePages require cpu or memory"));
    }
}

/// upstream `validateContainerResourceName`.
fn resource_name(errs: &mut Errs, p: &str, name: &str) {
    let msgs = qualified_name_errors(name);
    if !msgs.is_empty() {
        invalid_each(errs, p, name, msgs);
        return;
    }
    // ResourceName has a String() method, so upstream prints it unquoted.
    if !name.contains('/') {
        if !is_standard_resource_name(name) {
            errs.push(invalid_printed(
                p,
                name,
                "must be a standard resource type or fully qualified",
            ));
        } else if !(["cpu", "memory", "ephemeral-storage"].contains(&name) || name.starts_with("hugepages-"))
        {
            errs.push(invalid_printed(
                p,
                name,
                "must be a standard resource for containers",
            ));
        }
    } else if !name.contains("kubernetes.io/") && name.starts_with("requests.") {
        errs.push(invalid_printed(
            p,
            name,
            "doesn't follow extended resource name standard",
        ));
    }
}

/// Parse a quantity and apply upstream `ValidateResourceQuantityValue`.
fn quantity_value(errs: &mut Errs, p: &str, name: &str, q: &Quantity) -> Option<ParsedQuantity> {
    let pq = match parse_quantity(&q.0) {
        Ok(pq) => pq,
        Err(e) => {
            errs.push(FieldError::invalid(p, &json!(q.0), e));
            return None;
        }
    };
    if pq.nanos < 0 {
        errs.push(FieldError::invalid(p, &json!(pq.canonical()), NEGATIVE_ERR));
    }
    // Extended resources (prefixed, outside kubernetes.io) are counted in whole units.
    if name.contains('/') && !name.contains("kubernetes.io/") && pq.nanos % NANO != 0 {
        errs.push(invalid_printed(p, &pq.canonical(), "must be an integer"));
    }
    Some(pq)
}

// =============================================================================================
// Update
// =============================================================================================

/// upstream `updatablePodSpecFields`, joined with "," as upstream does.
const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Upstream's `ValidatePodSpecificAnnotationUpdates`: the mirror pod annotation
/// (`kubernetes.io/config.mirror`) may not be added, removed or changed, so a pod never turns into a mirror
/// pod or back.
fn validate_mirror_annotation_update(new: &Pod, old: &Pod) -> Vec<FieldError> {
    const MIRROR: &str = "kubernetes.io/config.mirror";
    let empty = BTreeMap::new();
    let new_a = new.metadata.annotations.as_ref().unwrap_or(&empty);
    let old_a = old.metadata.annotations.as_ref().unwrap_or(&empty);
    let mut errs = Vec::new();
    for (k, v) in old_a {
        if k.starts_with(MIRROR) && new_a.get(k) != Some(v) {
            errs.push(FieldError::forbidden(
                format!("metadata.annotations[{k}]"),
                "may not remove or update mirror pod annotation",
            ));
        }
    }
    for k in new_a.keys() {
        if k.starts_with(MIRROR) && !old_a.contains_key(k) {
            errs.push(FieldError::forbidden(
                format!("metadata.annotations[{k}]"),
                "may not add mirror pod annotation",
            ));
        }
    }
    errs
}

/// upstream `ValidatePodUpdate`: metadata update rules, the mirror pod annotation fixed, the new pod must be valid, and the spec may only
/// change in images, activeDeadlineSeconds (set, or lowered), tolerations (additions), scheduling gates
/// (removals) and a negative grace period going to 1.
pub fn validate_pod_update(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mut errs = validate_object_meta_update(&new.metadata, &old.metadata);
    errs.extend(validate_pod_metadata_and_spec(new));
    errs.extend(validate_mirror_annotation_update(new, old));
    let empty = PodSpec::default();
    let (ns, os) = (
        new.spec.as_ref().unwrap_or(&empty),
        old.spec.as_ref().unwrap_or(&empty),
    );

    let empty_list = Vec::new();
    let lists = [
        ("containers", &ns.containers, &os.containers),
        (
            "initContainers",
            ns.init_containers.as_ref().unwrap_or(&empty_list),
            os.init_containers.as_ref().unwrap_or(&empty_list),
        ),
    ];
    for (kind, nl, ol) in lists {
        if nl.len() != ol.len() {
            errs.push(FieldError::forbidden(
                format!("spec.{kind}"),
                "pod updates may not add or remove containers",
            ));
            return errs;
        }
        for (i, c) in nl.iter().enumerate() {
            let image = s(&c.image);
            if image.is_empty() {
                errs.push(FieldError::required(format!("spec.{kind}[{i}].image"), ""));
            }
            if image.trim() != image {
                errs.push(FieldError::invalid(
                    format!("spec.{kind}[{i}].image"),
                    &json!(image),
                    "must not have leading or trailing whitespace",
                ));
            }
        }
    }

    match (ns.active_deadline_seconds, os.active_deadline_seconds) {
        (Some(n), _) if !(0..=MAX_INT32).contains(&n) => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                &json!(n),
                &inclusive_range_error(0, MAX_INT32),
            ));
            return errs;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(FieldError::invalid(
                "spec.activeDeadlineSeconds",
                &json!(n),
                "must be less than or equal to previous value",
            ));
            return errs;
        }
        // upstream prints the nil pointer as the string "null", quoted.
        (None, Some(_)) => errs.push(FieldError::invalid(
            "spec.activeDeadlineSeconds",
            &json!("null"),
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // validateOnlyAddedTolerations: every old toleration must still be there (its seconds may change).
    let new_tols = ns.tolerations.as_deref().unwrap_or_default();
    let same = |a: &Toleration, b: &Toleration| {
        s(&a.key) == s(&b.key)
            && s(&a.operator) == s(&b.operator)
            && s(&a.value) == s(&b.value)
            && s(&a.effect) == s(&b.effect)
    };
    if !os
        .tolerations
        .iter()
        .flatten()
        .all(|o| new_tols.iter().any(|n| same(o, n)))
    {
        errs.push(FieldError::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    } else {
        validate_tolerations(new_tols, &mut errs);
    }

    // validateOnlyDeletedSchedulingGates.
    let old_gates: BTreeSet<&str> = os
        .scheduling_gates
        .iter()
        .flatten()
        .map(|g| g.name.as_str())
        .collect();
    for (i, g) in ns.scheduling_gates.iter().flatten().enumerate() {
        if !old_gates.contains(g.name.as_str()) {
            errs.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                &format!(
                    "only deletion is allowed, but found new scheduling gate '{}'",
                    g.name
                ),
            ));
        }
    }

    // Munge the updatable fields back to the old values; anything still different is forbidden.
    // Mutable nodeSelector/nodeAffinity of scheduling-gated pods is not ported: it is refused here.
    let mut munged = ns.clone();
    for (c, o) in munged.containers.iter_mut().zip(&os.containers) {
        c.image.clone_from(&o.image);
    }
    for (c, o) in munged
        .init_containers
        .iter_mut()
        .flatten()
        .zip(os.init_containers.iter().flatten())
    {
        c.image.clone_from(&o.image);
    }
    munged.active_deadline_seconds = os.active_deadline_seconds;
    munged.scheduling_gates.clone_from(&os.scheduling_gates);
    munged.tolerations.clone_from(&os.tolerations);
    if os.termination_grace_period_seconds.is_some_and(|g| g < 0)
        && munged.termination_grace_period_seconds == Some(1)
    {
        munged.termination_grace_period_seconds = os.termination_grace_period_seconds;
    }
    let (a, b) = (semantic_json(os), semantic_json(&munged));
    if a != b {
        // upstream appends go-cmp's full diff of the internal PodSpec; we list the changed paths with
        // their old (-) and new (+) JSON values instead.
        let mut diff = String::new();
        json_diff("spec", &a, &b, &mut diff);
        errs.push(FieldError::forbidden(
            "spec",
            &format!("pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}\n{diff}"),
        ));
    }
    errs
}

/// upstream `ValidatePodEphemeralContainersUpdate`, for the `ephemeralcontainers` subresource (whose
/// strategy has already reset everything but `spec.ephemeralContainers` from the stored pod): the pod
/// must be valid, a mirror pod takes none, and existing ephemeral containers stay as they are (matched by
/// name, as a patch need not keep the order).
pub fn validate_pod_ephemeral_containers_update(new: &Pod, old: &Pod) -> Vec<FieldError> {
    let mut errs = validate_object_meta_update(&new.metadata, &old.metadata);
    errs.extend(validate_pod_metadata_and_spec(new));
    errs.extend(validate_mirror_annotation_update(new, old));
    let is_mirror = old
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
    if is_mirror {
        // Upstream reports this on `field.NewPath("")`, which prints as `[]` (kubernetes#113935).
        return vec![FieldError::forbidden(
            "[]",
            "static pods do not support ephemeral containers",
        )];
    }
    let list = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.clone())
            .unwrap_or_default()
    };
    let (new_list, old_list) = (list(new), list(old));
    let by_name: BTreeMap<&str, &EphemeralContainer> =
        new_list.iter().map(|c| (c.name.as_str(), c)).collect();
    for (i, o) in old_list.iter().enumerate() {
        let path = "spec.ephemeralContainers";
        match by_name.get(o.name.as_str()) {
            None => errs.push(FieldError::forbidden(
                path,
                &format!("existing ephemeral containers {:?} may not be removed\n", o.name),
            )),
            Some(n) => {
                let (a, b) = (semantic_container(o), semantic_container(n));
                if a != b {
                    // upstream appends go-cmp's diff of the two containers; we list the changed paths.
                    let mut diff = String::new();
                    json_diff(&format!("{path}[{i}]"), &a, &b, &mut diff);
                    errs.push(FieldError::forbidden(
                        path,
                        &format!(
                            "existing ephemeral containers {:?} may not be changed\n{diff}",
                            o.name
                        ),
                    ));
                }
            }
        }
    }
    errs
}

/// An ephemeral container as JSON for upstream's `Semantic.DeepEqual` (nil and empty lists are equal
/// there), with an empty `resources` dropped: in Go it is a struct, so `{}` and absent are one zero value.
fn semantic_container(ec: &EphemeralContainer) -> Value {
    let mut v = serde_json::to_value(ec).unwrap_or(Value::Null);
    prune(&mut v);
    if let Some(o) = v.as_object_mut()
        && o.get("resources")
            .is_some_and(|r| r.as_object().is_some_and(|m| m.is_empty()))
    {
        o.remove("resources");
    }
    v
}

/// A spec as JSON for upstream's `Semantic.DeepEqual`: nulls and empty lists dropped (nil and empty
/// slices are equal there) and quantities compared by value (canonical form).
fn semantic_json(spec: &PodSpec) -> Value {
    let mut v = crate::tree::pod_spec_to_tree(spec).unwrap_or(Value::Null);
    if let Some(cs) = v.get_mut("containers").and_then(Value::as_array_mut) {
        canonical_resources(cs);
    }
    if let Some(cs) = v.get_mut("initContainers").and_then(Value::as_array_mut) {
        canonical_resources(cs);
    }
    prune(&mut v);
    v
}

fn canonical_resources(containers: &mut [Value]) {
    for c in containers {
        for kind in ["limits", "requests"] {
            if let Some(m) = c
                .pointer_mut(&format!("/resources/{kind}"))
                .and_then(Value::as_object_mut)
            {
                for q in m.values_mut() {
                    if let Some(p) = q.as_str().and_then(|s| parse_quantity(s).ok()) {
                        *q = Value::String(p.canonical());
                    }
                }
            }
        }
    }
}

fn prune(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.values_mut().for_each(prune);
            m.retain(|_, x| !x.is_null() && x.as_array().is_none_or(|a| !a.is_empty()));
        }
        Value::Array(a) => a.iter_mut().for_each(prune),
        _ => {}
    }
}

/// Lines `  <path>:\n-   <old>\n+   <new>` for every leaf that differs.
fn json_diff(path: &str, old: &Value, new: &Value, out: &mut String) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let (x, y) = (a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null));
                if x != y {
                    json_diff(&format!("{path}.{k}"), x, y, out);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    json_diff(&format!("{path}[{i}]"), x, y, out);
                }
            }
        }
        _ => out.push_str(&format!("  {path}:\n-   {old}\n+   {new}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapVolumeSource, ContainerPort, EnvVar, ExecAction, HTTPGetAction, SecretVolumeSource,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn container(name: &str, image: &str) -> Container {
        Container {
            name: name.into(),
            image: Some(image.into()),
            ..Default::default()
        }
    }

    fn pod_with(containers: Vec<Container>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            status: None,
        }
    }

    fn defaulted(containers: Vec<Container>) -> Pod {
        let mut p = pod_with(containers);
        default_pod(&mut p);
        p
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.message.clone()).collect()
    }

    fn res(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect(),
        )
    }

    fn with_resources(limits: &[(&str, &str)], requests: &[(&str, &str)]) -> Container {
        Container {
            resources: Some(ResourceRequirements {
                limits: if limits.is_empty() { None } else { res(limits) },
                requests: if requests.is_empty() { None } else { res(requests) },
                ..Default::default()
            }),
            ..container("c", "nginx")
        }
    }

    // ----- defaulting -----

    #[test]
    fn pull_policy_follows_the_image_tag() {
        let table = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.25", "IfNotPresent"),
            ("docker.io/library/nginx:1.25", "IfNotPresent"),
            ("localhost:5000/img", "Always"),
            ("localhost:5000/img:v1", "IfNotPresent"),
            ("registry.example.com:443/team/app", "Always"),
            (
                "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "IfNotPresent",
            ),
            (
                "nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "Always",
            ),
            // Unparseable references have no tag: IfNotPresent, as upstream.
            ("Nginx", "IfNotPresent"),
            ("", "IfNotPresent"),
        ];
        for (image, want) in table {
            let p = defaulted(vec![container("c", image)]);
            let got = p.spec.unwrap().containers[0].image_pull_policy.clone().unwrap();
            assert_eq!(got, want, "image {image:?}");
        }
    }

    #[test]
    fn explicit_pull_policy_is_kept() {
        let c = Container {
            image_pull_policy: Some("Never".into()),
            ..container("c", "nginx")
        };
        let p = defaulted(vec![c]);
        assert_eq!(
            p.spec.unwrap().containers[0].image_pull_policy.as_deref(),
            Some("Never")
        );
    }

    #[test]
    fn pod_spec_and_container_defaults_match_upstream() {
        let p = defaulted(vec![Container {
            ports: Some(vec![ContainerPort {
                container_port: 80,
                ..Default::default()
            }]),
            ..container("c", "nginx:1")
        }]);
        let spec = p.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(spec.termination_grace_period_seconds, Some(30));
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.enable_service_links, Some(true));
        assert!(spec.security_context.is_some());
        let c = &spec.containers[0];
        assert_eq!(
            c.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
        let port = &c.ports.as_ref().unwrap()[0];
        assert_eq!(port.protocol.as_deref(), Some("TCP"));
        assert_eq!(port.host_port, None);
    }

    #[test]
    fn probe_defaults_fill_zero_fields_and_http_get_path_scheme() {
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            period_seconds: Some(5),
            ..Default::default()
        };
        let p = defaulted(vec![Container {
            liveness_probe: Some(probe),
            ..container("c", "nginx")
        }]);
        let pr = p.spec.unwrap().containers[0].liveness_probe.clone().unwrap();
        assert_eq!(
            (
                pr.timeout_seconds,
                pr.period_seconds,
                pr.success_threshold,
                pr.failure_threshold
            ),
            (Some(1), Some(5), Some(1), Some(3))
        );
        let g = pr.http_get.unwrap();
        assert_eq!(
            (g.path.as_deref(), g.scheme.as_deref()),
            (Some("/"), Some("HTTP"))
        );
    }

    #[test]
    fn host_network_defaults_host_port_to_container_port() {
        let mut p = pod_with(vec![Container {
            ports: Some(vec![ContainerPort {
                container_port: 8080,
                ..Default::default()
            }]),
            ..container("c", "nginx")
        }]);
        p.spec.as_mut().unwrap().host_network = Some(true);
        default_pod(&mut p);
        assert_eq!(
            p.spec.as_ref().unwrap().containers[0].ports.as_ref().unwrap()[0].host_port,
            Some(8080)
        );
        assert!(validate_pod_create(&p).is_empty());
    }

    #[test]
    fn volumes_get_default_mode_420_and_empty_source_becomes_empty_dir() {
        let mut p = pod_with(vec![container("c", "nginx")]);
        p.spec.as_mut().unwrap().volumes = Some(vec![
            Volume {
                name: "scratch".into(),
                ..Default::default()
            },
            Volume {
                name: "cm".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: "x".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Volume {
                name: "sec".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some("s".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]);
        default_pod(&mut p);
        let v = p.spec.as_ref().unwrap().volumes.as_ref().unwrap();
        assert!(v[0].empty_dir.is_some());
        assert_eq!(v[1].config_map.as_ref().unwrap().default_mode, Some(420));
        assert_eq!(v[2].secret.as_ref().unwrap().default_mode, Some(420));
        assert!(validate_pod_create(&p).is_empty());
    }

    #[test]
    fn requests_default_to_limits_only_where_absent() {
        let p = defaulted(vec![with_resources(
            &[("cpu", "500m"), ("memory", "128Mi")],
            &[("cpu", "100m")],
        )]);
        let r = p.spec.unwrap().containers[0].resources.clone().unwrap();
        assert_eq!(r.requests, res(&[("cpu", "100m"), ("memory", "128Mi")]));
    }

    #[test]
    fn admission_defaults_service_account_tolerations_and_priority() {
        let p = defaulted(vec![container("c", "nginx")]);
        let spec = p.spec.unwrap();
        assert_eq!(spec.service_account_name.as_deref(), Some("default"));
        assert_eq!(spec.service_account.as_deref(), Some("default"));
        assert_eq!(spec.priority, Some(0));
        assert_eq!(spec.preemption_policy.as_deref(), Some("PreemptLowerPriority"));
        let tols = spec.tolerations.unwrap();
        let keys: Vec<_> = tols
            .iter()
            .map(|t| (t.key.clone().unwrap(), t.toleration_seconds))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("node.kubernetes.io/not-ready".into(), Some(300)),
                ("node.kubernetes.io/unreachable".into(), Some(300))
            ]
        );
        assert!(
            tols.iter()
                .all(|t| t.operator.as_deref() == Some("Exists") && t.effect.as_deref() == Some("NoExecute"))
        );
        // No projected token volume: kubeling has no token controller.
        assert!(spec.volumes.is_none());
    }

    #[test]
    fn scheme_defaults_alone_leave_admission_fields_unset() {
        let mut p = pod_with(vec![container("c", "nginx")]);
        default_pod_scheme(&mut p);
        let scheme = p.clone();
        let spec = p.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(spec.enable_service_links, Some(true));
        assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            (
                spec.service_account_name,
                spec.tolerations,
                spec.priority,
                spec.preemption_policy
            ),
            (None, None, None, None)
        );
        // The full defaulting is the scheme defaults plus admission: same result either way.
        let mut full = pod_with(vec![container("c", "nginx")]);
        default_pod(&mut full);
        let mut after_scheme = scheme;
        default_pod(&mut after_scheme);
        assert_eq!(after_scheme, full);
    }

    #[test]
    fn defaulting_is_idempotent_and_respects_existing_tolerations() {
        let mut p = pod_with(vec![container("c", "nginx")]);
        p.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
        default_pod(&mut p);
        let once = p.clone();
        default_pod(&mut p);
        assert_eq!(p, once);
        // A toleration with empty key and effect tolerates everything: nothing is added.
        assert_eq!(p.spec.unwrap().tolerations.unwrap().len(), 1);
    }

    // ----- validation -----

    #[test]
    fn a_defaulted_minimal_pod_is_valid() {
        assert_eq!(
            messages(&validate_pod_create(&defaulted(vec![container("web", "nginx")]))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn missing_containers_are_required() {
        let p = defaulted(vec![]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec!["spec.containers: Required value"]
        );
    }

    #[test]
    fn container_name_and_image_errors_have_upstream_paths() {
        let p = defaulted(vec![
            container("ok", "nginx"),
            container("Bad_Name", ""),
            container("ok", "  "),
        ]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.containers[1].image: Required value",
                "spec.containers[2].name: Duplicate value: \"ok\"",
                "spec.containers[2].image: Invalid value: \"  \": must not have leading or trailing whitespace",
            ]
        );
    }

    #[test]
    fn init_container_names_must_not_clash_with_containers() {
        let mut p = pod_with(vec![container("app", "nginx")]);
        p.spec.as_mut().unwrap().init_containers = Some(vec![container("app", "busybox")]);
        default_pod(&mut p);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec!["spec.initContainers[0].name: Duplicate value: \"app\""]
        );
    }

    #[test]
    fn ports_are_range_checked_and_names_unique() {
        let ports = vec![
            ContainerPort {
                container_port: 70000,
                name: Some("http".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 80,
                name: Some("http".into()),
                protocol: Some("HTTP".into()),
                ..Default::default()
            },
            ContainerPort {
                container_port: 0,
                host_port: Some(-1),
                ..Default::default()
            },
        ];
        let p = defaulted(vec![Container {
            ports: Some(ports),
            ..container("c", "nginx")
        }]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
                "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
                "spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
                "spec.containers[0].ports[2].containerPort: Required value",
                "spec.containers[0].ports[2].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
            ]
        );
    }

    #[test]
    fn env_names_and_sources_are_checked() {
        let env = vec![
            EnvVar {
                name: "A=B".into(),
                value: Some("x".into()),
                value_from: None,
            },
            EnvVar {
                name: "".into(),
                ..Default::default()
            },
            EnvVar {
                name: "X".into(),
                value_from: Some(Default::default()),
                ..Default::default()
            },
        ];
        let p = defaulted(vec![Container {
            env: Some(env),
            ..container("c", "nginx")
        }]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                "spec.containers[0].env[1].name: Required value",
                "spec.containers[0].env[2].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ]
        );
    }

    #[test]
    fn volume_mounts_must_name_a_volume_and_volumes_need_one_source() {
        let mut p = pod_with(vec![Container {
            volume_mounts: Some(vec![k8s_openapi::api::core::v1::VolumeMount {
                name: "data".into(),
                mount_path: "/data".into(),
                ..Default::default()
            }]),
            ..container("c", "nginx")
        }]);
        p.spec.as_mut().unwrap().volumes = Some(vec![Volume {
            name: "two".into(),
            empty_dir: Some(Default::default()),
            config_map: Some(ConfigMapVolumeSource {
                name: "cm".into(),
                default_mode: Some(0o1777),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        default_pod(&mut p);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type",
                "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
            ]
        );
    }

    #[test]
    fn restart_and_dns_policies_must_be_known() {
        let mut p = defaulted(vec![container("c", "nginx")]);
        let spec = p.spec.as_mut().unwrap();
        spec.restart_policy = Some("Sometimes".into());
        spec.dns_policy = Some("Google".into());
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
                "spec.dnsPolicy: Unsupported value: \"Google\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\"",
            ]
        );
    }

    #[test]
    fn only_init_containers_may_set_restart_policy_always() {
        let mut p = pod_with(vec![Container {
            restart_policy: Some("Always".into()),
            ..container("c", "nginx")
        }]);
        p.spec.as_mut().unwrap().init_containers = Some(vec![Container {
            restart_policy: Some("Never".into()),
            ..container("i", "busybox")
        }]);
        default_pod(&mut p);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
                "spec.initContainers[0].restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            ]
        );
    }

    #[test]
    fn stop_signals_need_the_pod_os_and_a_linux_signal() {
        let mut p = defaulted(vec![Container {
            lifecycle: Some(k8s_openapi::api::core::v1::Lifecycle {
                stop_signal: Some("SIGUSR1".into()),
                ..Default::default()
            }),
            ..container("c", "nginx")
        }]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].lifecycle.stopSignal: Forbidden: may not be set for containers with empty `spec.os.name`"
            ]
        );
        p.spec.as_mut().unwrap().os = Some(k8s_openapi::api::core::v1::PodOS { name: "linux".into() });
        assert!(validate_pod_create(&p).is_empty());
        p.spec.as_mut().unwrap().containers[0]
            .lifecycle
            .as_mut()
            .unwrap()
            .stop_signal = Some("SIGNOPE".into());
        let got = messages(&validate_pod_create(&p));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with(
                "spec.containers[0].lifecycle.stopSignal: Unsupported value: \"SIGNOPE\": supported values: \"SIGABRT\", \"SIGALRM\""
            ),
            "{got:?}"
        );
    }

    #[test]
    fn probes_need_one_handler_and_liveness_success_threshold_one() {
        let two_handlers = Probe {
            exec: Some(ExecAction {
                command: Some(vec!["true".into()]),
            }),
            tcp_socket: Some(Default::default()),
            success_threshold: Some(2),
            ..Default::default()
        };
        let none = Probe {
            initial_delay_seconds: Some(-1),
            ..Default::default()
        };
        let p = defaulted(vec![Container {
            liveness_probe: Some(two_handlers),
            readiness_probe: Some(none),
            ..container("c", "nginx")
        }]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
                "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
                "spec.containers[0].readinessProbe: Required value: must specify a handler type",
                "spec.containers[0].readinessProbe.initialDelaySeconds: Invalid value: -1: must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn plain_init_containers_may_not_have_probes() {
        let mut p = pod_with(vec![container("c", "nginx")]);
        let probe = Probe {
            exec: Some(ExecAction {
                command: Some(vec!["true".into()]),
            }),
            ..Default::default()
        };
        p.spec.as_mut().unwrap().init_containers = Some(vec![Container {
            readiness_probe: Some(probe),
            ..container("i", "busybox")
        }]);
        default_pod(&mut p);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"
            ]
        );
    }

    #[test]
    fn requests_above_limits_name_the_limit_canonically() {
        let p = defaulted(vec![with_resources(&[("cpu", "0.5")], &[("cpu", "1")])]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 500m"
            ]
        );
    }

    #[test]
    fn bad_quantities_and_resource_names_are_422_field_errors() {
        // Requests only: limits would be copied into requests and reported twice, as upstream does.
        let p = defaulted(vec![with_resources(
            &[],
            &[("cpu", "lots"), ("cpus", "1"), ("memory", "-1Gi")],
        )]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].resources.requests[cpu]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                "spec.containers[0].resources.requests[cpus]: Invalid value: cpus: must be a standard resource type or fully qualified",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Gi\": must be greater than or equal to 0",
            ]
        );
    }

    #[test]
    fn extended_resources_need_equal_requests_and_limits() {
        let p = defaulted(vec![with_resources(
            &[("example.com/gpu", "2")],
            &[("example.com/gpu", "1")],
        )]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2"
            ]
        );
    }

    #[test]
    fn scheduling_and_identity_fields_are_validated() {
        let mut p = defaulted(vec![container("c", "nginx")]);
        let spec = p.spec.as_mut().unwrap();
        spec.active_deadline_seconds = Some(0);
        spec.node_name = Some("Node_1".into());
        spec.hostname = Some("a.b".into());
        spec.security_context.as_mut().unwrap().run_as_user = Some(-1);
        let msgs = messages(&validate_pod_create(&p));
        assert_eq!(
            msgs[0],
            "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"
        );
        assert!(
            msgs[1].starts_with("spec.nodeName: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain")
        );
        assert_eq!(
            msgs[2],
            "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"
        );
        assert_eq!(
            msgs[3],
            "spec.hostname: Invalid value: \"a.b\": must not contain dots"
        );
        assert_eq!(msgs.len(), 4);
    }

    #[test]
    fn undefaulted_required_enums_are_reported() {
        let p = pod_with(vec![container("c", "nginx")]);
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec![
                "spec.terminationGracePeriodSeconds: Required value",
                "spec.containers[0].terminationMessagePolicy: Required value",
                "spec.containers[0].imagePullPolicy: Required value",
                "spec.restartPolicy: Required value",
                "spec.dnsPolicy: Required value",
            ]
        );
    }

    #[test]
    fn metadata_is_validated_with_the_spec() {
        let mut p = defaulted(vec![container("c", "nginx")]);
        p.metadata.namespace = None;
        assert_eq!(
            messages(&validate_pod_create(&p)),
            vec!["metadata.namespace: Required value"]
        );
    }

    // ----- quantities and QoS -----

    #[test]
    fn quantities_parse_and_print_canonically() {
        let table = [
            ("100m", "100m"),
            ("0.5", "500m"),
            ("1", "1"),
            ("1000m", "1"),
            ("128Mi", "128Mi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("1G", "1G"),
            ("1e3", "1e3"),
            ("500k", "500k"),
            ("1500", "1500"),
            ("+2", "2"),
        ];
        for (input, want) in table {
            assert_eq!(
                parse_quantity(input).unwrap().canonical(),
                want,
                "input {input:?}"
            );
        }
        assert_eq!(
            parse_quantity("1e3").unwrap().nanos,
            parse_quantity("1k").unwrap().nanos
        );
        assert_eq!(parse_quantity("1Ki").unwrap().nanos, 1024 * NANO);
        for bad in ["", "abc", "1.2.3", "1x", "1Kb", "Mi"] {
            assert!(parse_quantity(bad).is_err(), "input {bad:?}");
        }
    }

    #[test]
    fn qos_classes_follow_upstream() {
        let both = [("cpu", "500m"), ("memory", "128Mi")];
        let table: Vec<(Vec<Container>, &str)> = vec![
            (vec![container("c", "nginx")], "BestEffort"),
            (vec![with_resources(&both, &[])], "Guaranteed"),
            (vec![with_resources(&both, &both)], "Guaranteed"),
            (vec![with_resources(&both, &[("cpu", "100m")])], "Burstable"),
            (vec![with_resources(&[("cpu", "500m")], &[])], "Burstable"),
            (vec![with_resources(&[], &[("memory", "1Gi")])], "Burstable"),
            (
                vec![with_resources(&both, &[]), container("d", "nginx")],
                "Burstable",
            ),
            (
                vec![with_resources(&[("example.com/gpu", "1")], &[])],
                "BestEffort",
            ),
        ];
        for (containers, want) in table {
            let p = defaulted(containers.clone());
            assert_eq!(qos_class(&p), want, "containers {containers:?}");
        }
        let p = defaulted(vec![with_resources(&both, &[])]);
        let st = initial_status(&p);
        assert_eq!(
            (st.phase.as_deref(), st.qos_class.as_deref()),
            (Some("Pending"), Some("Guaranteed"))
        );
    }

    #[test]
    fn init_containers_count_towards_qos() {
        let mut p = pod_with(vec![with_resources(&[("cpu", "1"), ("memory", "1Gi")], &[])]);
        p.spec.as_mut().unwrap().init_containers = Some(vec![container("i", "busybox")]);
        default_pod(&mut p);
        assert_eq!(qos_class(&p), "Burstable");
    }

    // ----- update -----

    fn stored() -> Pod {
        let mut p = defaulted(vec![Container {
            command: Some(vec!["sleep".into(), "1".into()]),
            ..container("c", "nginx:1")
        }]);
        p.metadata.resource_version = Some("5".into());
        p.metadata.uid = Some("u1".into());
        p
    }

    #[test]
    fn image_and_label_changes_are_allowed() {
        let old = stored();
        let mut new = old.clone();
        new.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
        new.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
        assert_eq!(messages(&validate_pod_update(&new, &old)), Vec::<String>::new());
    }

    #[test]
    fn command_change_is_forbidden_with_upstream_message() {
        let old = stored();
        let mut new = old.clone();
        new.spec.as_mut().unwrap().containers[0].command = Some(vec!["sleep".into(), "2".into()]);
        let errs = validate_pod_update(&new, &old);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].reason, "FieldValueForbidden");
        assert_eq!(errs[0].field, "spec");
        let want = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n";
        assert!(errs[0].message.starts_with(want), "{}", errs[0].message);
        assert!(
            errs[0]
                .message
                .contains("spec.containers[0].command[1]:\n-   \"1\"\n+   \"2\""),
            "{}",
            errs[0].message
        );
    }

    #[test]
    fn toleration_removal_is_forbidden_but_additions_and_seconds_changes_are_not() {
        let old = stored();
        let mut new = old.clone();
        new.spec.as_mut().unwrap().tolerations.as_mut().unwrap().remove(0);
        assert_eq!(
            messages(&validate_pod_update(&new, &old)),
            vec![
                "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"
            ]
        );
        let mut new = old.clone();
        let tols = new.spec.as_mut().unwrap().tolerations.as_mut().unwrap();
        tols[0].toleration_seconds = Some(10);
        tols.push(Toleration {
            key: Some("k".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        });
        assert_eq!(messages(&validate_pod_update(&new, &old)), Vec::<String>::new());
    }

    #[test]
    fn active_deadline_may_be_set_or_lowered_but_not_raised_or_removed() {
        let mut old = stored();
        let mut new = old.clone();
        new.spec.as_mut().unwrap().active_deadline_seconds = Some(100);
        assert!(validate_pod_update(&new, &old).is_empty());
        old.spec.as_mut().unwrap().active_deadline_seconds = Some(100);
        new.spec.as_mut().unwrap().active_deadline_seconds = Some(50);
        assert!(validate_pod_update(&new, &old).is_empty());
        new.spec.as_mut().unwrap().active_deadline_seconds = Some(200);
        assert_eq!(
            messages(&validate_pod_update(&new, &old)),
            vec![
                "spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"
            ]
        );
        new.spec.as_mut().unwrap().active_deadline_seconds = None;
        assert_eq!(
            messages(&validate_pod_update(&new, &old)),
            vec![
                "spec.activeDeadlineSeconds: Invalid value: \"null\": must not update from a positive integer to nil value"
            ]
        );
    }

    #[test]
    fn negative_grace_period_may_become_one() {
        let mut old = stored();
        old.spec.as_mut().unwrap().termination_grace_period_seconds = Some(-1);
        let mut new = old.clone();
        new.spec.as_mut().unwrap().termination_grace_period_seconds = Some(1);
        assert!(validate_pod_update(&new, &old).is_empty());
        new.spec.as_mut().unwrap().termination_grace_period_seconds = Some(2);
        assert_eq!(validate_pod_update(&new, &old)[0].field, "spec");
    }

    #[test]
    fn adding_a_container_or_renaming_the_pod_is_rejected() {
        let old = stored();
        let mut new = old.clone();
        new.spec
            .as_mut()
            .unwrap()
            .containers
            .push(container("d", "nginx"));
        default_pod(&mut new);
        new.metadata.name = Some("q".into());
        assert_eq!(
            messages(&validate_pod_update(&new, &old)),
            vec![
                "metadata.name: Invalid value: \"q\": field is immutable",
                "spec.containers: Forbidden: pod updates may not add or remove containers",
            ]
        );
    }

    #[test]
    fn equal_quantities_in_another_spelling_are_not_a_change() {
        let old = defaulted(vec![with_resources(&[("cpu", "1")], &[])]);
        let mut new = old.clone();
        new.spec.as_mut().unwrap().containers[0].resources = Some(ResourceRequirements {
            limits: res(&[("cpu", "1000m")]),
            requests: res(&[("cpu", "1")]),
            ..Default::default()
        });
        assert!(validate_pod_update(&new, &old).is_empty());
    }

    #[test]
    fn the_updated_spec_must_still_validate() {
        let old = stored();
        let mut new = old.clone();
        new.spec.as_mut().unwrap().containers[0].image = Some(String::new());
        assert_eq!(
            messages(&validate_pod_update(&new, &old)),
            vec![
                "spec.containers[0].image: Required value",
                "spec.containers[0].image: Required value"
            ]
        );
    }

    #[test]
    fn the_mirror_pod_annotation_may_not_be_added_removed_or_changed() {
        let key = "kubernetes.io/config.mirror";
        let with = |v: Option<&str>| {
            let mut p = stored();
            let a = p.metadata.annotations.get_or_insert_with(Default::default);
            a.remove(key);
            if let Some(v) = v {
                a.insert(key.to_string(), v.to_string());
            }
            p
        };
        let path = "metadata.annotations[kubernetes.io/config.mirror]: Forbidden";
        let added = messages(&validate_pod_update(&with(Some("h")), &with(None)));
        assert_eq!(added, [format!("{path}: may not add mirror pod annotation")]);
        let removed = messages(&validate_pod_update(&with(None), &with(Some("h"))));
        assert_eq!(
            removed,
            [format!("{path}: may not remove or update mirror pod annotation")]
        );
        let changed = messages(&validate_pod_update(&with(Some("x")), &with(Some("h"))));
        assert_eq!(
            changed,
            [format!("{path}: may not remove or update mirror pod annotation")]
        );
        assert!(validate_pod_update(&with(Some("h")), &with(Some("h"))).is_empty());
    }

    // ---- ephemeral containers -------------------------------------------------------------------

    /// A defaulted pod with a container `app`, an init container `init`, a volume `data` and
    /// `ephemeral` as its ephemeral containers.
    fn debug_pod(ephemeral: Value) -> Pod {
        let mut p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [{"name": "app", "image": "nginx:1.27"}],
                "initContainers": [{"name": "init", "image": "busybox:1.36"}],
                "volumes": [{"name": "data"}],
                "ephemeralContainers": ephemeral,
            },
        }))
        .unwrap();
        default_pod(&mut p);
        p
    }

    fn add_ephemeral(ephemeral: Value) -> Vec<String> {
        messages(&validate_pod_ephemeral_containers_update(
            &debug_pod(ephemeral),
            &debug_pod(Value::Null),
        ))
    }

    #[test]
    fn ephemeral_containers_get_the_container_defaults_and_keep_their_target() {
        let p = debug_pod(json!([
            {"name": "a", "image": "kubeling/testbox:0.1", "targetContainerName": "app",
             "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
            {"name": "b", "image": "busybox"},
            {"name": "c", "image": "busybox:latest", "imagePullPolicy": "Never",
             "terminationMessagePolicy": "FallbackToLogsOnError"},
        ]));
        let got: Vec<_> = p
            .spec
            .unwrap()
            .ephemeral_containers
            .unwrap()
            .into_iter()
            .map(|e| {
                let field_ref = e.env.and_then(|env| env[0].value_from.clone()?.field_ref);
                (
                    e.image_pull_policy.unwrap(),
                    e.termination_message_path.unwrap(),
                    e.termination_message_policy.unwrap(),
                    e.target_container_name,
                    field_ref.and_then(|f| f.api_version),
                )
            })
            .collect();
        let path = "/dev/termination-log".to_string();
        assert_eq!(
            got,
            vec![
                (
                    "IfNotPresent".into(),
                    path.clone(),
                    "File".into(),
                    Some("app".into()),
                    Some("v1".into())
                ),
                ("Always".into(), path.clone(), "File".into(), None, None),
                ("Never".into(), path, "FallbackToLogsOnError".into(), None, None),
            ]
        );
    }

    #[test]
    fn an_ephemeral_container_converts_to_a_container_and_back_unchanged() {
        let ec: EphemeralContainer = serde_json::from_value(json!({
            "name": "dbg", "image": "busybox", "command": ["sh"], "args": ["-c", "true"], "workingDir": "/",
            "env": [{"name": "A", "value": "1"}], "stdin": true, "stdinOnce": true, "tty": true,
            "targetContainerName": "app", "securityContext": {"privileged": true},
            "volumeMounts": [{"name": "data", "mountPath": "/d"}],
        }))
        .unwrap();
        let c = ephemeral_as_container(&ec);
        assert_eq!(
            (c.name.as_str(), c.tty, c.working_dir.as_deref()),
            ("dbg", Some(true), Some("/"))
        );
        assert_eq!(container_as_ephemeral(c, ec.target_container_name.clone()), ec);
    }

    #[test]
    fn ephemeral_container_rules_have_upstreams_paths_and_messages() {
        let forbidden = |field: &str| {
            format!(
                "spec.ephemeralContainers[0].{field}: Forbidden: cannot be set for an Ephemeral Container"
            )
        };
        let probe = json!({"exec": {"command": ["true"]}});
        let cases: Vec<(&str, Value, Vec<String>)> = vec![
            (
                "what kubectl debug sends is valid",
                json!([{"name": "dbg", "image": "kubeling/testbox:0.1", "targetContainerName": "app",
                        "resources": {}, "terminationMessagePolicy": "File", "stdin": true, "tty": true,
                        "env": [{"name": "A", "value": "1"}], "securityContext": {"runAsUser": 0},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]),
                vec![],
            ),
            (
                "a target may be an init container",
                json!([{"name": "dbg", "image": "busybox", "targetContainerName": "init"}]),
                vec![],
            ),
            (
                "the name of a container",
                json!([{"name": "app", "image": "busybox"}]),
                vec!["spec.ephemeralContainers[0].name: Duplicate value: \"app\"".into()],
            ),
            (
                "the name of an init container",
                json!([{"name": "init", "image": "busybox"}]),
                vec!["spec.ephemeralContainers[0].name: Duplicate value: \"init\"".into()],
            ),
            (
                "the name of another ephemeral container",
                json!([{"name": "dbg", "image": "busybox"}, {"name": "dbg", "image": "busybox"}]),
                vec!["spec.ephemeralContainers[1].name: Duplicate value: \"dbg\"".into()],
            ),
            (
                "a target that does not exist",
                json!([{"name": "dbg", "image": "busybox", "targetContainerName": "nope"}]),
                vec!["spec.ephemeralContainers[0].targetContainerName: Not found: \"nope\"".into()],
            ),
            (
                "a target that is another ephemeral container",
                json!([{"name": "a", "image": "busybox"},
                       {"name": "b", "image": "busybox", "targetContainerName": "a"}]),
                vec!["spec.ephemeralContainers[1].targetContainerName: Not found: \"a\"".into()],
            ),
            (
                "ports",
                json!([{"name": "dbg", "image": "busybox", "ports": [{"containerPort": 80}]}]),
                vec![forbidden("ports")],
            ),
            (
                "resources",
                json!([{"name": "dbg", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}]),
                vec![forbidden("resources")],
            ),
            (
                "every other field the allow list leaves out, in the struct's order",
                json!([{"name": "dbg", "image": "busybox", "restartPolicy": "Always",
                        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                        "livenessProbe": probe, "readinessProbe": probe, "startupProbe": probe,
                        "lifecycle": {"preStop": probe}}]),
                ["resizePolicy", "restartPolicy", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle"]
                    .map(forbidden)
                    .to_vec(),
            ),
            (
                "no image",
                json!([{"name": "dbg"}]),
                vec!["spec.ephemeralContainers[0].image: Required value".into()],
            ),
            (
                "an image padded with whitespace",
                json!([{"name": "dbg", "image": " busybox"}]),
                vec![
                    "spec.ephemeralContainers[0].image: Invalid value: \" busybox\": must not have leading or \
                     trailing whitespace"
                        .into(),
                ],
            ),
            (
                "a name that is not a DNS label",
                json!([{"name": "Dbg", "image": "busybox"}]),
                vec![format!(
                    "spec.ephemeralContainers[0].name: Invalid value: \"Dbg\": {}",
                    dns1123_label_errors("Dbg")[0]
                )],
            ),
            (
                "a mount of a volume the pod does not have",
                json!([{"name": "dbg", "image": "busybox", "volumeMounts": [{"name": "nope", "mountPath": "/n"}]}]),
                vec!["spec.ephemeralContainers[0].volumeMounts[0].name: Not found: \"nope\"".into()],
            ),
            (
                "subPath and subPathExpr mounts",
                json!([{"name": "dbg", "image": "busybox", "volumeMounts": [
                    {"name": "data", "mountPath": "/a", "subPath": "x"},
                    {"name": "data", "mountPath": "/b", "subPathExpr": "$(POD)"}]}]),
                vec![forbidden("volumeMounts[0].subPath"), forbidden("volumeMounts[1].subPathExpr")],
            ),
            (
                "an env var with a bad source",
                json!([{"name": "dbg", "image": "busybox", "env": [{"name": "A", "valueFrom": {}}]}]),
                vec![
                    "spec.ephemeralContainers[0].env[0].valueFrom: Invalid value: \"\": must specify one of: \
                     `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
                        .into(),
                ],
            ),
            (
                "an unknown terminationMessagePolicy",
                json!([{"name": "dbg", "image": "busybox", "terminationMessagePolicy": "Bogus"}]),
                vec![
                    "spec.ephemeralContainers[0].terminationMessagePolicy: Unsupported value: \"Bogus\": \
                     supported values: \"File\", \"FallbackToLogsOnError\""
                        .into(),
                ],
            ),
        ];
        for (what, ephemeral, want) in cases {
            assert_eq!(add_ephemeral(ephemeral), want, "{what}");
        }
    }

    #[test]
    fn existing_ephemeral_containers_may_be_reordered_but_not_changed_or_removed() {
        let dbg = json!({"name": "dbg", "image": "busybox:1", "resources": {}});
        let other = json!({"name": "other", "image": "busybox:1"});
        let old = debug_pod(json!([dbg, other]));
        let check = |new: Value| messages(&validate_pod_ephemeral_containers_update(&debug_pod(new), &old));
        assert!(check(json!([other, dbg])).is_empty(), "the order is free");
        let mut without_resources = dbg.clone();
        without_resources.as_object_mut().unwrap().remove("resources");
        assert!(
            check(json!([without_resources, other, {"name": "new", "image": "busybox"}])).is_empty(),
            "an empty resources is no change, and more may be added"
        );
        assert_eq!(
            check(json!([other])),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be removed\n"
            ]
        );
        let mut changed = dbg.clone();
        changed["image"] = json!("busybox:2");
        assert_eq!(
            check(json!([changed, other])),
            [
                "spec.ephemeralContainers: Forbidden: existing ephemeral containers \"dbg\" may not be changed\n  \
                 spec.ephemeralContainers[0].image:\n-   \"busybox:1\"\n+   \"busybox:2\"\n"
            ]
        );
    }

    #[test]
    fn mirror_pods_take_no_ephemeral_containers_but_terminated_pods_do() {
        let mut old = debug_pod(Value::Null);
        old.metadata.annotations = Some(BTreeMap::from([(MIRROR_POD_ANNOTATION.to_string(), "h".into())]));
        let mut new = debug_pod(json!([{"name": "dbg", "image": "busybox"}]));
        new.metadata.annotations.clone_from(&old.metadata.annotations);
        let errs = validate_pod_ephemeral_containers_update(&new, &old);
        assert_eq!(
            messages(&errs),
            ["[]: Forbidden: static pods do not support ephemeral containers"]
        );
        assert_eq!(
            (errs[0].field.as_str(), errs[0].detail()),
            ("[]", "Forbidden: static pods do not support ephemeral containers")
        );
        // Upstream has no rule for finished pods: the container is added, the kubelet never starts it.
        let mut old = debug_pod(Value::Null);
        old.status = Some(PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let mut new = debug_pod(json!([{"name": "dbg", "image": "busybox"}]));
        new.status.clone_from(&old.status);
        assert!(validate_pod_ephemeral_containers_update(&new, &old).is_empty());
    }

    #[test]
    fn a_pod_update_may_not_change_ephemeral_containers_and_a_create_may_not_set_them() {
        let old = debug_pod(json!([{"name": "dbg", "image": "busybox"}]));
        let new =
            debug_pod(json!([{"name": "dbg", "image": "busybox"}, {"name": "more", "image": "busybox"}]));
        let errs = messages(&validate_pod_update(&new, &old));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("spec: Forbidden: pod updates may not change fields other than")
                && errs[0].contains("spec.ephemeralContainers"),
            "{errs:?}"
        );
        assert!(validate_pod_update(&old, &old).is_empty());
        assert_eq!(
            messages(&validate_pod_create(&old)),
            ["spec.ephemeralContainers: Forbidden: cannot be set on create"]
        );
    }
}
