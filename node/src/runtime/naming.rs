//! Docker names and labels of kubeling's containers, and the small conversions around them (dockershim
//! `naming.go`, `labels.go`, `helpers.go`; kubelet-behaviour §8.1-8.2). Docker is the only record of what
//! runs, so these strings are the node agent's database schema: the pod workers find a pod's containers by
//! these labels and recover restart counts, hashes and grace periods from them after a restart. Pure
//! functions, shared by the Docker runtime and the fake.

use std::collections::{BTreeMap, HashMap};

use super::{ContainerConfig, ContainerKind, Owner, SandboxConfig};

/// dockershim: `kubePrefix`, the first field of every name.
pub const KUBE_PREFIX: &str = "k8s";
/// dockershim: `nameDelimiter`.
pub const NAME_DELIMITER: &str = "_";
/// leaky: `PodInfraContainerName`, the container name of sandboxes.
pub const POD_INFRA_CONTAINER_NAME: &str = "POD";

/// types: `KubernetesPodNameLabel`.
pub const LABEL_POD_NAME: &str = "io.kubernetes.pod.name";
/// types: `KubernetesPodNamespaceLabel`.
pub const LABEL_POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
/// types: `KubernetesPodUIDLabel`.
pub const LABEL_POD_UID: &str = "io.kubernetes.pod.uid";
/// types: `KubernetesContainerNameLabel`.
pub const LABEL_CONTAINER_NAME: &str = "io.kubernetes.container.name";
/// dockershim: `containerTypeLabelKey`.
pub const LABEL_CONTAINER_TYPE: &str = "io.kubernetes.docker.type";
/// dockershim: `containerTypeLabelSandbox`.
pub const CONTAINER_TYPE_SANDBOX: &str = "podsandbox";
/// dockershim: `containerTypeLabelContainer`.
pub const CONTAINER_TYPE_CONTAINER: &str = "container";
/// dockershim: `sandboxIDLabelKey`.
pub const LABEL_SANDBOX_ID: &str = "io.kubernetes.sandbox.id";
/// dockershim: `annotationPrefix`; CRI annotations become Docker labels with this prefix.
pub const ANNOTATION_PREFIX: &str = "annotation.";

/// kuberuntime: `containerHashLabel` (an annotation since 1.x, hence stored as `annotation.…`).
pub const ANNOTATION_CONTAINER_HASH: &str = "io.kubernetes.container.hash";
/// kuberuntime: `containerRestartCountLabel`.
pub const ANNOTATION_CONTAINER_RESTART_COUNT: &str = "io.kubernetes.container.restartCount";
/// kuberuntime: `containerTerminationMessagePathLabel`.
pub const ANNOTATION_TERMINATION_MESSAGE_PATH: &str = "io.kubernetes.container.terminationMessagePath";
/// kuberuntime: `containerTerminationMessagePolicyLabel`.
pub const ANNOTATION_TERMINATION_MESSAGE_POLICY: &str = "io.kubernetes.container.terminationMessagePolicy";
/// kuberuntime: `podTerminationGracePeriodLabel`.
pub const ANNOTATION_POD_TERMINATION_GRACE_PERIOD: &str = "io.kubernetes.pod.terminationGracePeriod";
/// kuberuntime: `containerPreStopHandlerLabel`.
pub const ANNOTATION_PRE_STOP_HANDLER: &str = "io.kubernetes.container.preStopHandler";
/// kuberuntime: `containerPortsLabel`.
pub const ANNOTATION_CONTAINER_PORTS: &str = "io.kubernetes.container.ports";

/// kubeling's own: the cluster a container belongs to, so clusters sharing a Docker engine stay apart.
pub const LABEL_KUBELING_CLUSTER: &str = "io.kubeling.cluster";
/// kubeling's own: the node agent that created the container.
pub const LABEL_KUBELING_NODE: &str = "io.kubeling.node";
/// kubeling's own, on the pause image: SHA-256 of the pause binary it was built from.
pub const LABEL_KUBELING_PAUSE: &str = "io.kubeling.pause";

/// kubelet: the hostname limit of `truncatePodHostnameIfNeeded` (a DNS label).
pub const HOSTNAME_MAX_LENGTH: usize = 63;

/// cm: `MinShares`, `SharesPerCPU`, `MilliCPUToCPU`, `MaxShares` (`pkg/kubelet/cm/helpers_linux.go`).
pub const MIN_SHARES: i64 = 2;
/// See [`MIN_SHARES`].
pub const SHARES_PER_CPU: i64 = 1024;
/// See [`MIN_SHARES`].
pub const MILLI_CPU_TO_CPU: i64 = 1000;
/// See [`MIN_SHARES`].
pub const MAX_SHARES: i64 = 262_144;

/// `k8s_POD_<pod>_<namespace>_<uid>_<attempt>`.
pub fn sandbox_name(pod: &str, namespace: &str, uid: &str, attempt: u32) -> String {
    [
        KUBE_PREFIX,
        POD_INFRA_CONTAINER_NAME,
        pod,
        namespace,
        uid,
        &attempt.to_string(),
    ]
    .join(NAME_DELIMITER)
}

/// `k8s_<container>_<pod>_<namespace>_<uid>_<restartCount>`.
pub fn container_name(container: &str, pod: &str, namespace: &str, uid: &str, restart_count: u32) -> String {
    [
        KUBE_PREFIX,
        container,
        pod,
        namespace,
        uid,
        &restart_count.to_string(),
    ]
    .join(NAME_DELIMITER)
}

/// The fields of a kubelet-made Docker name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedName {
    /// Container name, `POD` for sandboxes.
    pub container: String,
    /// Pod name.
    pub pod: String,
    /// Namespace.
    pub namespace: String,
    /// Pod UID.
    pub uid: String,
    /// Attempt (restartCount for containers).
    pub attempt: u32,
}

/// dockershim `parseContainerName`: 6 fields, or 7 with a random suffix after a name conflict; a leading
/// `/` (as Docker lists names) is ignored.
pub fn parse_container_name(name: &str) -> Option<ParsedName> {
    let name = name.strip_prefix('/').unwrap_or(name);
    let parts: Vec<&str> = name.split(NAME_DELIMITER).collect();
    if !(parts.len() == 6 || parts.len() == 7) || parts[0] != KUBE_PREFIX {
        return None;
    }
    Some(ParsedName {
        container: parts[1].to_owned(),
        pod: parts[2].to_owned(),
        namespace: parts[3].to_owned(),
        uid: parts[4].to_owned(),
        attempt: parts[5].parse().ok()?,
    })
}

fn owner_labels(owner: &Owner, labels: &mut HashMap<String, String>) {
    labels.insert(LABEL_KUBELING_CLUSTER.to_owned(), owner.cluster.clone());
    labels.insert(LABEL_KUBELING_NODE.to_owned(), owner.node.clone());
}

fn annotate(labels: &mut HashMap<String, String>, key: &str, value: impl Into<String>) {
    labels.insert(format!("{ANNOTATION_PREFIX}{key}"), value.into());
}

/// The sandbox's Docker labels (§8.2): pod labels, pod identity, type, `POD`, annotations, owner.
pub fn sandbox_labels(config: &SandboxConfig, owner: &Owner) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in &config.annotations {
        annotate(&mut labels, key, value.clone());
    }
    // The kubelet's own labels come last so a pod label cannot impersonate them.
    labels.insert(LABEL_POD_NAME.to_owned(), config.pod_name.clone());
    labels.insert(LABEL_POD_NAMESPACE.to_owned(), config.namespace.clone());
    labels.insert(LABEL_POD_UID.to_owned(), config.uid.clone());
    labels.insert(
        LABEL_CONTAINER_TYPE.to_owned(),
        ContainerKind::Sandbox.as_label().to_owned(),
    );
    labels.insert(
        LABEL_CONTAINER_NAME.to_owned(),
        POD_INFRA_CONTAINER_NAME.to_owned(),
    );
    owner_labels(owner, &mut labels);
    labels
}

/// An app or init container's Docker labels (§8.2).
pub fn container_labels(config: &ContainerConfig, owner: &Owner) -> HashMap<String, String> {
    let mut labels = HashMap::new();
    for (key, value) in &config.annotations {
        annotate(&mut labels, key, value.clone());
    }
    annotate(&mut labels, ANNOTATION_CONTAINER_HASH, config.hash.clone());
    annotate(
        &mut labels,
        ANNOTATION_CONTAINER_RESTART_COUNT,
        config.restart_count.to_string(),
    );
    annotate(
        &mut labels,
        ANNOTATION_TERMINATION_MESSAGE_PATH,
        config.termination_message_path.clone(),
    );
    annotate(
        &mut labels,
        ANNOTATION_TERMINATION_MESSAGE_POLICY,
        config.termination_message_policy.clone(),
    );
    if let Some(grace) = config.termination_grace_period {
        annotate(
            &mut labels,
            ANNOTATION_POD_TERMINATION_GRACE_PERIOD,
            grace.to_string(),
        );
    }
    if let Some(handler) = &config.pre_stop_handler {
        annotate(&mut labels, ANNOTATION_PRE_STOP_HANDLER, handler.clone());
    }
    if let Some(ports) = &config.ports {
        annotate(&mut labels, ANNOTATION_CONTAINER_PORTS, ports.clone());
    }
    labels.insert(LABEL_POD_NAME.to_owned(), config.pod_name.clone());
    labels.insert(LABEL_POD_NAMESPACE.to_owned(), config.namespace.clone());
    labels.insert(LABEL_POD_UID.to_owned(), config.uid.clone());
    labels.insert(LABEL_CONTAINER_NAME.to_owned(), config.name.clone());
    labels.insert(
        LABEL_CONTAINER_TYPE.to_owned(),
        ContainerKind::Container.as_label().to_owned(),
    );
    labels.insert(LABEL_SANDBOX_ID.to_owned(), config.sandbox_id.clone());
    owner_labels(owner, &mut labels);
    labels
}

/// Sorted copy of a label map, for the plain types.
pub(crate) fn sorted(labels: HashMap<String, String>) -> BTreeMap<String, String> {
    labels.into_iter().collect()
}

/// kubelet `truncatePodHostnameIfNeeded`: at most 63 characters, without a trailing `-` or `.` left by the
/// cut.
pub fn truncate_pod_hostname(hostname: &str) -> &str {
    if hostname.len() <= HOSTNAME_MAX_LENGTH {
        return hostname;
    }
    // Hostnames are ASCII (DNS labels), so a byte cut is a character cut; stay safe on odd input anyway.
    let mut end = HOSTNAME_MAX_LENGTH;
    while !hostname.is_char_boundary(end) {
        end -= 1;
    }
    hostname[..end].trim_end_matches(['-', '.'])
}

/// Splits an image reference into (name, tag, digest) by Docker's rules: the tag is after the last `:` that
/// follows the last `/` (so a registry port is not a tag), the digest after `@`.
pub fn split_image_reference(image: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    match rest[last_slash..].rfind(':') {
        Some(colon) => {
            let at = last_slash + colon;
            (&rest[..at], Some(&rest[at + 1..]), digest)
        }
        None => (rest, None, digest),
    }
}

/// kubelet `applyDefaultImageTag`: `:latest` when there is neither tag nor digest.
pub fn normalize_image(image: &str) -> String {
    match split_image_reference(image) {
        (_, None, None) => format!("{image}:latest"),
        _ => image.to_owned(),
    }
}

/// True for references Docker could never accept (kubelet: `InvalidImageName`).
pub fn is_valid_image_reference(image: &str) -> bool {
    let (name, tag, _) = split_image_reference(image);
    !name.is_empty()
        && !image.contains(char::is_whitespace)
        && !name.contains(|c: char| c.is_ascii_uppercase())
        && tag.is_none_or(|t| !t.is_empty())
}

/// kubelet `MilliCPUToShares`: requests become relative CPU weight, at least 2 and at most 262144.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> i64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    (milli_cpu * SHARES_PER_CPU / MILLI_CPU_TO_CPU).clamp(MIN_SHARES, MAX_SHARES)
}

/// A CPU limit in millicores as Docker's `NanoCpus`. Upstream sets a CFS quota over a 100 ms period
/// instead; `NanoCpus` is Docker's own spelling of the same quota.
pub fn milli_cpu_to_nano_cpus(milli_cpu: i64) -> i64 {
    milli_cpu.saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            cluster: "c1".into(),
            node: "n1".into(),
        }
    }

    #[test]
    fn names_follow_dockershim_and_parse_back() {
        let sandbox = sandbox_name("web", "default", "uid-1", 2);
        assert_eq!(sandbox, "k8s_POD_web_default_uid-1_2");
        let app = container_name("nginx", "web", "default", "uid-1", 5);
        assert_eq!(app, "k8s_nginx_web_default_uid-1_5");
        let parsed = parse_container_name(&format!("/{app}")).unwrap();
        assert_eq!(
            parsed,
            ParsedName {
                container: "nginx".into(),
                pod: "web".into(),
                namespace: "default".into(),
                uid: "uid-1".into(),
                attempt: 5
            }
        );
        assert_eq!(
            parse_container_name(&format!("{sandbox}_deadbeef"))
                .unwrap()
                .attempt,
            2
        );
        assert_eq!(parse_container_name("k8s_a_b_c_d"), None);
        assert_eq!(parse_container_name("foo_a_b_c_d_1"), None);
        assert_eq!(parse_container_name("k8s_a_b_c_d_x"), None);
    }

    #[test]
    fn sandbox_labels_carry_pod_identity_annotations_and_owner() {
        let config = SandboxConfig {
            pod_name: "web".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            annotations: [("kubernetes.io/config.source".to_owned(), "api".to_owned())].into(),
            ..SandboxConfig::default()
        };
        let labels = sorted(sandbox_labels(&config, &owner()));
        let want: BTreeMap<String, String> = [
            ("app", "web"),
            ("annotation.kubernetes.io/config.source", "api"),
            ("io.kubernetes.pod.name", "web"),
            ("io.kubernetes.pod.namespace", "ns"),
            ("io.kubernetes.pod.uid", "u"),
            ("io.kubernetes.docker.type", "podsandbox"),
            ("io.kubernetes.container.name", "POD"),
            ("io.kubeling.cluster", "c1"),
            ("io.kubeling.node", "n1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(labels, want);
    }

    #[test]
    fn a_pod_label_cannot_override_the_kubelet_labels() {
        let config = SandboxConfig {
            uid: "real".into(),
            labels: [(LABEL_POD_UID.to_owned(), "fake".to_owned())].into(),
            ..SandboxConfig::default()
        };
        assert_eq!(sandbox_labels(&config, &owner())[LABEL_POD_UID], "real");
    }

    #[test]
    fn container_labels_carry_the_recovery_annotations() {
        let config = ContainerConfig {
            pod_name: "web".into(),
            namespace: "ns".into(),
            uid: "u".into(),
            name: "nginx".into(),
            restart_count: 3,
            sandbox_id: "sb".into(),
            hash: "abc123".into(),
            termination_message_path: "/dev/termination-log".into(),
            termination_message_policy: "File".into(),
            termination_grace_period: Some(30),
            ..ContainerConfig::default()
        };
        let labels = container_labels(&config, &owner());
        for (k, v) in [
            ("io.kubernetes.container.name", "nginx"),
            ("io.kubernetes.docker.type", "container"),
            ("io.kubernetes.sandbox.id", "sb"),
            ("annotation.io.kubernetes.container.hash", "abc123"),
            ("annotation.io.kubernetes.container.restartCount", "3"),
            (
                "annotation.io.kubernetes.container.terminationMessagePath",
                "/dev/termination-log",
            ),
            (
                "annotation.io.kubernetes.container.terminationMessagePolicy",
                "File",
            ),
            ("annotation.io.kubernetes.pod.terminationGracePeriod", "30"),
            ("io.kubeling.cluster", "c1"),
            ("io.kubeling.node", "n1"),
        ] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert!(!labels.contains_key("annotation.io.kubernetes.container.preStopHandler"));
    }

    #[test]
    fn hostname_is_truncated_to_a_dns_label() {
        assert_eq!(truncate_pod_hostname("web"), "web");
        let long = format!("{}-.x", "a".repeat(61));
        assert_eq!(truncate_pod_hostname(&long), "a".repeat(61));
    }

    #[test]
    fn image_references_split_and_default_to_latest() {
        assert_eq!(split_image_reference("nginx"), ("nginx", None, None));
        assert_eq!(split_image_reference("nginx:1.2"), ("nginx", Some("1.2"), None));
        assert_eq!(
            split_image_reference("localhost:5000/a/b"),
            ("localhost:5000/a/b", None, None)
        );
        assert_eq!(
            split_image_reference("localhost:5000/a:v1"),
            ("localhost:5000/a", Some("v1"), None)
        );
        assert_eq!(
            split_image_reference("a@sha256:00"),
            ("a", None, Some("sha256:00"))
        );
        assert_eq!(normalize_image("nginx"), "nginx:latest");
        assert_eq!(
            normalize_image("localhost:5000/nginx"),
            "localhost:5000/nginx:latest"
        );
        assert_eq!(normalize_image("nginx:1"), "nginx:1");
        assert_eq!(normalize_image("nginx@sha256:00"), "nginx@sha256:00");
        assert!(is_valid_image_reference("kubeling/pause:3.10"));
        assert!(!is_valid_image_reference("Nginx"));
        assert!(is_valid_image_reference("nginx:V1"));
        assert!(!is_valid_image_reference("nginx:"));
        assert!(!is_valid_image_reference("a b"));
        assert!(!is_valid_image_reference(""));
    }

    #[test]
    fn cpu_requests_become_shares_within_upstream_bounds() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(250), 256);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), 262_144);
        assert_eq!(milli_cpu_to_nano_cpus(500), 500_000_000);
    }
}
