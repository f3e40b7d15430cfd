//! A pod's DNS settings, host name and extra hosts, decided as the kubelet does
//! (`pkg/kubelet/network/dns/dns.go`, `GetPodDNS`; `kubelet_pods.go`, `GeneratePodHostNameAndDomain`), and put
//! on the sandbox (pause) container, whose resolv.conf and hosts file the app containers share: Docker writes
//! the files from `Dns`/`DnsSearch`/`DnsOptions`, `Hostname`/`Domainname` and `ExtraHosts`, and the worker
//! then rewrites the sandbox's resolv.conf with the kubelet's exact text ([`resolv_conf_text`], as dockershim
//! did), which also keeps Docker's embedded resolver (127.0.0.11) out of pods on a user-defined network.
//!
//! Deliberate differences, from letting Docker write the hosts file rather than bind-mounting the kubelet's
//! own: the hostname FQDN line comes from the sandbox's `Domainname` (which also sets the UTS domain name, that
//! upstream leaves unset), and each hostAlias hostname gets a line of its own without the
//! `# Entries added by HostAliases.` header. For `dnsPolicy: Default` without `dnsConfig` the pod gets the
//! resolv.conf Docker derives from the host's (loopback resolvers replaced), which is what a pod can reach.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;

use crate::runtime::DnsConfig;

/// kubelet: `validation.MaxDNSNameservers`.
pub const MAX_NAMESERVERS: usize = 3;
/// kubelet: `validation.MaxDNSSearchPaths`.
pub const MAX_SEARCH_PATHS: usize = 32;
/// kubelet: `validation.MaxDNSSearchListChars`.
pub const MAX_SEARCH_LIST_CHARS: usize = 2048;
/// `utilvalidation.DNS1123SubdomainMaxLength`: longer search domains are dropped.
const MAX_SEARCH_DOMAIN_LEN: usize = 253;
/// kubelet: `defaultDNSOptions`.
const DEFAULT_DNS_OPTIONS: &[&str] = &["ndots:5"];

/// The node's DNS settings (kubelet `--cluster-dns`, `--cluster-domain`, `--resolv-conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    /// The cluster DNS Service's IPs; empty: ClusterFirst pods fall back to the host's settings.
    pub cluster_dns: Vec<String>,
    /// The cluster domain (`cluster.local`).
    pub cluster_domain: String,
    /// The host's resolv.conf; `None` (`--resolv-conf=""`) means nameserver 127.0.0.1 and no search.
    pub resolv_conf: Option<PathBuf>,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            cluster_dns: Vec::new(),
            cluster_domain: "cluster.local".to_owned(),
            resolv_conf: Some(PathBuf::from("/etc/resolv.conf")),
        }
    }
}

/// A parsed resolv.conf.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    /// `nameserver` lines, in order.
    pub nameservers: Vec<String>,
    /// The last `search` line's domains, trailing dots trimmed, `.` dropped.
    pub searches: Vec<String>,
    /// `options`, merged by name (a later one replaces an earlier one of the same name in place).
    pub options: Vec<String>,
}

/// kubelet `parseResolvConf`.
pub fn parse_resolv_conf(text: &str) -> ResolvConf {
    let mut conf = ResolvConf::default();
    for line in text.lines() {
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["nameserver", server, ..] => conf.nameservers.push((*server).to_owned()),
            ["search", domains @ ..] => {
                conf.searches = domains
                    .iter()
                    .filter(|d| **d != ".")
                    .map(|d| d.trim_end_matches('.').to_owned())
                    .collect();
            }
            ["options", options @ ..] => {
                conf.options = append_options(
                    std::mem::take(&mut conf.options),
                    options.iter().map(|o| (*o).to_owned()),
                );
            }
            _ => {}
        }
    }
    conf
}

/// kubelet `appendOptions`/`mergeDNSOptions`: options keyed by the name before `:`; a later one wins, in the
/// place of the first (upstream's order is Go map order; this one is stable).
fn append_options(mut options: Vec<String>, new: impl IntoIterator<Item = String>) -> Vec<String> {
    let name = |o: &str| o.split(':').next().unwrap_or_default().to_owned();
    for option in new {
        match options.iter().position(|o| name(o) == name(&option)) {
            Some(i) => options[i] = option,
            None => options.push(option),
        }
    }
    options
}

fn omit_duplicates(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// kubelet `podDNSType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDnsType {
    /// The cluster DNS.
    Cluster,
    /// The node's resolv.conf.
    Host,
    /// Only `dnsConfig`.
    None,
}

/// kubelet `getPodDNSType`: ClusterFirst on the host network falls back to Default. An empty policy (a
/// static pod that was not defaulted) is ClusterFirst.
pub fn pod_dns_type(pod: &Pod) -> PodDnsType {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    match spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst")
    {
        "None" => PodDnsType::None,
        "ClusterFirstWithHostNet" => PodDnsType::Cluster,
        "Default" => PodDnsType::Host,
        _ if host_network => PodDnsType::Host,
        _ => PodDnsType::Cluster,
    }
}

/// A warning event the kubelet records while forming the pod's DNS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsWarning {
    /// `MissingClusterDNS` or `DNSConfigForming`.
    pub reason: &'static str,
    /// The message, as upstream's.
    pub message: String,
}

/// The pod's DNS settings for the sandbox and the warnings to record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDns {
    /// What the sandbox gets; all empty: Docker's host-derived resolv.conf.
    pub config: DnsConfig,
    /// Warning events for the pod.
    pub warnings: Vec<DnsWarning>,
}

/// kubelet `GetPodDNS`: the resolv.conf content of `pod`, given the node's settings and the text of its
/// resolv.conf (`None` when `--resolv-conf` is empty).
pub fn pod_dns(pod: &Pod, settings: &DnsSettings, host_resolv_conf: Option<&str>) -> PodDns {
    let mut warnings = Vec::new();
    let host = || match host_resolv_conf {
        Some(text) => parse_resolv_conf(text),
        None => ResolvConf {
            nameservers: vec!["127.0.0.1".to_owned()],
            searches: vec![".".to_owned()],
            options: Vec::new(),
        },
    };
    let pod_dns_config = pod.spec.as_ref().and_then(|s| s.dns_config.as_ref());
    let mut kind = pod_dns_type(pod);
    if kind == PodDnsType::Cluster && settings.cluster_dns.is_empty() {
        warnings.push(DnsWarning {
            reason: "MissingClusterDNS",
            message: "pod: \"".to_owned()
                + &crate::sources::full_name(pod)
                + "\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
        });
        kind = PodDnsType::Host;
    }
    let mut conf = match kind {
        PodDnsType::None => ResolvConf::default(),
        PodDnsType::Cluster => {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let host = host();
            let searches = if settings.cluster_domain.is_empty() {
                host.searches
            } else {
                let domain = &settings.cluster_domain;
                let mut s = vec![
                    format!("{namespace}.svc.{domain}"),
                    format!("svc.{domain}"),
                    domain.clone(),
                ];
                s.extend(host.searches);
                omit_duplicates(s)
            };
            ResolvConf {
                nameservers: settings.cluster_dns.clone(),
                searches,
                options: DEFAULT_DNS_OPTIONS.iter().map(|o| (*o).to_owned()).collect(),
            }
        }
        // Docker derives the host's file itself (and makes it reachable from a container), unless dnsConfig
        // has to be merged into it or --resolv-conf is empty.
        PodDnsType::Host if pod_dns_config.is_none() && host_resolv_conf.is_some() => {
            return PodDns {
                config: DnsConfig::default(),
                warnings,
            };
        }
        PodDnsType::Host => host(),
    };
    if let Some(extra) = pod_dns_config {
        conf.nameservers = omit_duplicates(
            conf.nameservers
                .into_iter()
                .chain(extra.nameservers.iter().flatten().cloned())
                .collect(),
        );
        conf.searches = omit_duplicates(
            conf.searches
                .into_iter()
                .chain(extra.searches.iter().flatten().cloned())
                .collect(),
        );
        conf.options = append_options(
            conf.options,
            extra.options.iter().flatten().map(|o| match &o.value {
                Some(v) => format!("{}:{v}", o.name.as_deref().unwrap_or_default()),
                None => o.name.clone().unwrap_or_default(),
            }),
        );
    }
    fit_limits(&mut conf, &mut warnings);
    PodDns {
        config: DnsConfig {
            servers: conf.nameservers,
            // Docker: a lone "." search domain writes no search line (the host's would be kept otherwise).
            searches: if conf.searches.is_empty() {
                vec![".".to_owned()]
            } else {
                conf.searches
            },
            options: conf.options,
        },
        warnings,
    }
}

/// kubelet `formDNSConfigFitsLimits` and `formDNSSearchFitsLimits`.
fn fit_limits(conf: &mut ResolvConf, warnings: &mut Vec<DnsWarning>) {
    if conf.nameservers.len() > MAX_NAMESERVERS {
        conf.nameservers.truncate(MAX_NAMESERVERS);
        warnings.push(DnsWarning {
            reason: "DNSConfigForming",
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                conf.nameservers.join(" ")
            ),
        });
    }
    let mut exceeded = false;
    if conf.searches.len() > MAX_SEARCH_PATHS {
        conf.searches.truncate(MAX_SEARCH_PATHS);
        exceeded = true;
    }
    let before = conf.searches.len();
    conf.searches.retain(|s| s.len() <= MAX_SEARCH_DOMAIN_LEN);
    exceeded |= conf.searches.len() != before;
    let line_len = conf.searches.join(" ").len();
    if line_len > MAX_SEARCH_LIST_CHARS {
        let mut cut_len = 0;
        let mut cut = 0;
        for s in conf.searches.iter().rev() {
            cut_len += s.len() + 1;
            cut += 1;
            if line_len - cut_len <= MAX_SEARCH_LIST_CHARS {
                break;
            }
        }
        conf.searches.truncate(conf.searches.len() - cut);
        exceeded = true;
    }
    if exceeded {
        warnings.push(DnsWarning {
            reason: "DNSConfigForming",
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                conf.searches.join(" ")
            ),
        });
    }
}

/// The resolv.conf text of `config` as dockershim's `rewriteResolvFile` writes it: nameservers, then one
/// search line and one options line when there are any (Docker's "." no-search marker is not a domain).
pub fn resolv_conf_text(config: &DnsConfig) -> String {
    let mut lines: Vec<String> = config.servers.iter().map(|s| format!("nameserver {s}")).collect();
    let searches: Vec<&str> = config
        .searches
        .iter()
        .map(String::as_str)
        .filter(|s| *s != ".")
        .collect();
    if !searches.is_empty() {
        lines.push(format!("search {}", searches.join(" ")));
    }
    if !config.options.is_empty() {
        lines.push(format!("options {}", config.options.join(" ")));
    }
    if !lines.is_empty() {
        lines.push(String::new());
    }
    lines.join("\n")
}

/// kubelet `truncatePodHostnameIfNeeded`: at most 63 characters, without a trailing `-` or `.`.
pub fn truncate_hostname(hostname: &str) -> &str {
    if hostname.len() <= 63 {
        return hostname;
    }
    hostname[..63].trim_end_matches(['-', '.'])
}

/// The pod's host name and domain (kubelet `GeneratePodHostNameAndDomain`): `spec.hostname` or the pod name,
/// truncated; the domain `<subdomain>.<ns>.svc.<cluster domain>` when a subdomain is set. With
/// `setHostnameAsFQDN` the host name is the FQDN (the domain is then not set apart).
pub fn hostname_and_domain(pod: &Pod, cluster_domain: &str) -> (String, Option<String>) {
    let spec = pod.spec.as_ref();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let hostname = spec
        .and_then(|s| s.hostname.as_deref())
        .filter(|h| !h.is_empty())
        .unwrap_or(name);
    let hostname = truncate_hostname(hostname).to_owned();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let domain = spec
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())
        .map(|sub| format!("{sub}.{namespace}.svc.{cluster_domain}"));
    if spec.and_then(|s| s.set_hostname_as_fqdn) == Some(true)
        && let Some(domain) = &domain
    {
        return (format!("{hostname}.{domain}"), None);
    }
    (hostname, domain)
}

/// Docker `ExtraHosts` entries (`hostname:ip`) for the pod's `hostAliases`, in order.
pub fn extra_hosts(pod: &Pod) -> Vec<String> {
    let mut out = Vec::new();
    for alias in pod.spec.iter().flat_map(|s| s.host_aliases.iter().flatten()) {
        let ip = &alias.ip;
        for name in alias.hostnames.iter().flatten() {
            out.push(format!("{name}:{ip}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
