//! Printers of the kinds served as plain data (step 7), ported from upstream's `printers.go` (1.33) and
//! kube-aggregator's APIService printer: each kind is a [`KindPrinter`], its columns and a cells function,
//! found by [`for_resource`]. Same conventions as `table.rs`: pure functions of the stored JSON and `now`.

use jiff::Timestamp;
use serde_json::Value;

use super::{
    AGE, Column, NAME, age, col, format_label_selector, get, human_duration, int, list, name, string,
};

/// A kind's printer: columns and how a row's cells are computed.
#[derive(Debug)]
pub struct KindPrinter {
    pub(super) columns: &'static [Column],
    pub(super) cells: fn(&Value, Timestamp) -> Vec<Value>,
}

impl PartialEq for KindPrinter {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for KindPrinter {}

/// The printer of `group`/`plural`, when it is one of these kinds.
pub(super) fn for_resource(group: &str, plural: &str) -> Option<&'static KindPrinter> {
    Some(match (group, plural) {
        ("", "podtemplates") => &POD_TEMPLATE,
        ("", "componentstatuses") => &COMPONENT_STATUS,
        ("networking.k8s.io", "ingresses") => &INGRESS,
        ("networking.k8s.io", "ingressclasses") => &INGRESS_CLASS,
        ("networking.k8s.io", "networkpolicies") => &NETWORK_POLICY,
        ("networking.k8s.io", "servicecidrs") => &SERVICE_CIDR,
        ("networking.k8s.io", "ipaddresses") => &IP_ADDRESS,
        ("autoscaling", "horizontalpodautoscalers") => &HPA,
        ("scheduling.k8s.io", "priorityclasses") => &PRIORITY_CLASS,
        ("node.k8s.io", "runtimeclasses") => &RUNTIME_CLASS,
        ("certificates.k8s.io", "certificatesigningrequests") => &CSR,
        ("storage.k8s.io", "csidrivers") => &CSI_DRIVER,
        ("storage.k8s.io", "csinodes") => &CSI_NODE,
        ("storage.k8s.io", "csistoragecapacities") => &CSI_STORAGE_CAPACITY,
        ("storage.k8s.io", "volumeattachments") => &VOLUME_ATTACHMENT,
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations" | "validatingwebhookconfigurations",
        ) => &WEBHOOK_CONFIGURATION,
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => &VALIDATING_ADMISSION_POLICY,
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => &POLICY_BINDING,
        ("apiregistration.k8s.io", "apiservices") => &API_SERVICE,
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => &FLOW_SCHEMA,
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => &PRIORITY_LEVEL,
        _ => return None,
    })
}

fn none_if_empty(s: String) -> Value {
    if s.is_empty() { "<none>".into() } else { s.into() }
}

fn strings(v: &Value, path: &[&str]) -> Vec<String> {
    list(v, path)
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

/// labels.FormatLabels: `k=v,k2=v2` sorted by key, `<none>` when empty.
fn format_labels(v: Option<&Value>) -> String {
    let pairs: Vec<String> = v
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

const POD_TEMPLATE: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col("Containers", "string", "Names of each container in the template."),
        col(
            "Images",
            "string",
            "Images referenced by each container in the template.",
        ),
        col("Pod Labels", "string", "The labels for the pod template."),
    ],
    cells: |t, _| {
        let containers = list(t, &["template", "spec", "containers"]);
        let names: Vec<&str> = containers.iter().map(|c| string(c, &["name"])).collect();
        let images: Vec<&str> = containers.iter().map(|c| string(c, &["image"])).collect();
        vec![
            name(t),
            names.join(",").into(),
            images.join(",").into(),
            format_labels(get(t, &["template", "metadata", "labels"])).into(),
        ]
    },
};

const COMPONENT_STATUS: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col("Status", "string", "Status of the component conditions"),
        col("Message", "string", "Message of the component conditions"),
        col("Error", "string", "Error of the component conditions"),
    ],
    cells: |cs, _| {
        let healthy = list(cs, &["conditions"])
            .iter()
            .find(|c| string(c, &["type"]) == "Healthy");
        let (status, message, error) = match healthy {
            Some(c) => (
                if string(c, &["status"]) == "True" {
                    "Healthy"
                } else {
                    "Unhealthy"
                },
                string(c, &["message"]),
                string(c, &["error"]),
            ),
            None => ("Unknown", "", ""),
        };
        vec![name(cs), status.into(), message.into(), error.into()]
    },
};

/// printers.go formatHosts: up to three hosts (`*` for a rule without one), then `+ N more...`.
fn format_hosts(rules: &[Value]) -> String {
    let hosts: Vec<&str> = rules
        .iter()
        .map(|r| match string(r, &["host"]) {
            "" => "*",
            h => h,
        })
        .collect();
    let mut out = hosts.iter().take(3).copied().collect::<Vec<_>>().join(",");
    if hosts.len() > 3 {
        out.push_str(&format!(" + {} more...", hosts.len() - 3));
    }
    out
}

fn load_balancer_addresses(obj: &Value) -> String {
    list(obj, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            let ip = string(i, &["ip"]);
            let host = string(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !host.is_empty() {
                Some(host)
            } else {
                None
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

const INGRESS: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col("Class", "string", "The name of the IngressClass resource."),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ],
    cells: |ing, now| {
        let class = match string(ing, &["spec", "ingressClassName"]) {
            "" => "<none>",
            c => c,
        };
        let ports = if list(ing, &["spec", "tls"]).is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            name(ing),
            class.into(),
            format_hosts(list(ing, &["spec", "rules"])).into(),
            load_balancer_addresses(ing).into(),
            ports.into(),
            age(ing, now),
        ]
    },
};

const INGRESS_CLASS: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Controller",
            "string",
            "Controller that is responsible for handling this class",
        ),
        col(
            "Parameters",
            "string",
            "A reference to a resource with additional parameters",
        ),
        AGE,
    ],
    cells: |ic, now| {
        let parameters = match get(ic, &["spec", "parameters"]) {
            Some(p) => {
                let mut s = string(p, &["kind"]).to_string();
                if let Some(g) = get(p, &["apiGroup"]).and_then(Value::as_str) {
                    s = format!("{s}.{g}");
                }
                format!("{s}/{}", string(p, &["name"]))
            }
            None => "<none>".into(),
        };
        vec![
            name(ic),
            string(ic, &["spec", "controller"]).into(),
            parameters.into(),
            age(ic, now),
        ]
    },
};

const NETWORK_POLICY: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Pod-Selector",
            "string",
            "Label selector of the pods the policy applies to",
        ),
        AGE,
    ],
    cells: |np, now| {
        vec![
            name(np),
            format_label_selector(get(np, &["spec", "podSelector"])).into(),
            age(np, now),
        ]
    },
};

const SERVICE_CIDR: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col("CIDRs", "string", "list of IP blocks in CIDR notation"),
        AGE,
    ],
    cells: |s, now| {
        vec![
            name(s),
            strings(s, &["spec", "cidrs"]).join(",").into(),
            age(s, now),
        ]
    },
};

const IP_ADDRESS: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "ParentRef",
            "string",
            "The reference to the object holding this IP address",
        ),
    ],
    cells: |ip, _| {
        let parent = match get(ip, &["spec", "parentRef"]) {
            Some(p) => {
                let resource = match string(p, &["group"]) {
                    "" => string(p, &["resource"]).to_string(),
                    g => format!("{}.{g}", string(p, &["resource"])),
                };
                match string(p, &["namespace"]) {
                    "" => format!("{resource}/{}", string(p, &["name"])),
                    ns => format!("{resource}/{ns}/{}", string(p, &["name"])),
                }
            }
            None => "<none>".into(),
        };
        vec![name(ip), parent.into()]
    },
};

/// printers.go formatHPAMetrics for the CPU/memory utilization targets a user sets most; other metric
/// kinds print `<metric type>` as upstream does for what it cannot show.
fn hpa_targets(hpa: &Value) -> String {
    // autoscaling/v1 form
    if let Some(target) = get(hpa, &["spec", "targetCPUUtilizationPercentage"]) {
        let current = get(hpa, &["status", "currentCPUUtilizationPercentage"])
            .map(|c| format!("{c}%"))
            .unwrap_or_else(|| "<unknown>".into());
        return format!("cpu: {current}/{target}%");
    }
    let metrics = list(hpa, &["spec", "metrics"]);
    if metrics.is_empty() {
        return "<none>".into();
    }
    let current = list(hpa, &["status", "currentMetrics"]);
    let parts: Vec<String> = metrics
        .iter()
        .take(4)
        .map(|m| {
            let kind = string(m, &["type"]);
            match kind {
                "Resource" | "ContainerResource" => {
                    let key = if kind == "Resource" {
                        "resource"
                    } else {
                        "containerResource"
                    };
                    let res = string(m, &[key, "name"]);
                    let now = current
                        .iter()
                        .find(|c| string(c, &[key, "name"]) == res)
                        .and_then(|c| get(c, &[key, "current"]));
                    match get(m, &[key, "target", "averageUtilization"]) {
                        Some(u) => {
                            let cur = now
                                .and_then(|c| get(c, &["averageUtilization"]))
                                .map(|c| format!("{c}%"))
                                .unwrap_or_else(|| "<unknown>".into());
                            format!("{res}: {cur}/{u}%")
                        }
                        None => {
                            let target = get(m, &[key, "target", "averageValue"])
                                .or_else(|| get(m, &[key, "target", "value"]))
                                .and_then(Value::as_str)
                                .unwrap_or("");
                            let cur = now
                                .and_then(|c| get(c, &["averageValue"]))
                                .and_then(Value::as_str)
                                .unwrap_or("<unknown>");
                            format!("{res}: {cur}/{target}")
                        }
                    }
                }
                other => format!("<{}>", other.to_lowercase()),
            }
        })
        .collect();
    let mut out = parts.join(", ");
    if metrics.len() > 4 {
        out.push_str(&format!(" + {} more...", metrics.len() - 4));
    }
    out
}

const HPA: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Reference",
            "string",
            "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
        ),
        col(
            "Targets",
            "string",
            "the metrics used to calculate the desired replica count",
        ),
        col(
            "MinPods",
            "string",
            "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
        ),
        col(
            "MaxPods",
            "integer",
            "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
        ),
        col(
            "Replicas",
            "integer",
            "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
        ),
        AGE,
    ],
    cells: |hpa, now| {
        let reference = format!(
            "{}/{}",
            string(hpa, &["spec", "scaleTargetRef", "kind"]),
            string(hpa, &["spec", "scaleTargetRef", "name"])
        );
        let min = match get(hpa, &["spec", "minReplicas"]) {
            Some(m) => m.to_string(),
            None => "<unset>".into(),
        };
        vec![
            name(hpa),
            reference.into(),
            hpa_targets(hpa).into(),
            min.into(),
            int(hpa, &["spec", "maxReplicas"]).into(),
            int(hpa, &["status", "currentReplicas"]).into(),
            age(hpa, now),
        ]
    },
};

const PRIORITY_CLASS: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Value",
            "integer",
            "value represents the integer value of this priority class.",
        ),
        col(
            "Global-Default",
            "boolean",
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        ),
        AGE,
        col(
            "PreemptionPolicy",
            "string",
            "preemptionPolicy is the Policy for preempting pods with lower priority.",
        ),
    ],
    cells: |pc, now| {
        vec![
            name(pc),
            int(pc, &["value"]).into(),
            get(pc, &["globalDefault"])
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .into(),
            age(pc, now),
            string(pc, &["preemptionPolicy"]).into(),
        ]
    },
};

const RUNTIME_CLASS: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Handler",
            "string",
            "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class.",
        ),
        AGE,
    ],
    cells: |rc, now| vec![name(rc), string(rc, &["handler"]).into(), age(rc, now)],
};

const CSR: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        AGE,
        col("SignerName", "string", "Only track the certificate signer name"),
        col(
            "Requestor",
            "string",
            "Name of the user who requested the certificate",
        ),
        col(
            "RequestedDuration",
            "string",
            "Requested duration of the certificate",
        ),
        col("Condition", "string", "The state of the signing request"),
    ],
    cells: |csr, now| {
        let mut conditions: Vec<&str> = list(csr, &["status", "conditions"])
            .iter()
            .map(|c| string(c, &["type"]))
            .collect();
        if get(csr, &["status", "certificate"]).is_some_and(|c| c.as_str().is_some_and(|s| !s.is_empty())) {
            conditions.push("Issued");
        }
        let condition = if conditions.is_empty() {
            "Pending".to_string()
        } else {
            conditions.join(",")
        };
        let duration = match get(csr, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
            Some(s) => human_duration(jiff::SignedDuration::from_secs(s)),
            None => "<none>".into(),
        };
        vec![
            name(csr),
            age(csr, now),
            string(csr, &["spec", "signerName"]).into(),
            string(csr, &["spec", "username"]).into(),
            duration.into(),
            condition.into(),
        ]
    },
};

fn bool_or(obj: &Value, path: &[&str], default: &str) -> Value {
    match get(obj, path).and_then(Value::as_bool) {
        Some(b) => b.to_string().into(),
        None => default.into(),
    }
}

const CSI_DRIVER: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "AttachRequired",
            "boolean",
            "Indicates this CSI volume driver requires an attach operation",
        ),
        col(
            "PodInfoOnMount",
            "boolean",
            "Indicates this CSI volume driver requires additional pod information during mount operations",
        ),
        col(
            "StorageCapacity",
            "boolean",
            "Indicates this CSI volume driver reports storage capacity",
        ),
        col(
            "TokenRequests",
            "string",
            "Indicates this CSI volume driver requires the pods' service account tokens",
        ),
        col(
            "RequiresRepublish",
            "boolean",
            "Indicates this CSI volume driver requires NodePublishVolume to be called periodically",
        ),
        col(
            "Modes",
            "string",
            "Volume lifecycle modes supported by the driver",
        ),
        AGE,
    ],
    cells: |d, now| {
        let tokens: Vec<&str> = list(d, &["spec", "tokenRequests"])
            .iter()
            .map(|t| string(t, &["audience"]))
            .collect();
        let modes = strings(d, &["spec", "volumeLifecycleModes"]).join(",");
        vec![
            name(d),
            bool_or(d, &["spec", "attachRequired"], "true"),
            bool_or(d, &["spec", "podInfoOnMount"], "false"),
            bool_or(d, &["spec", "storageCapacity"], "false"),
            if tokens.is_empty() {
                "<unset>".into()
            } else {
                tokens.join(",").into()
            },
            bool_or(d, &["spec", "requiresRepublish"], "false"),
            none_if_empty(modes),
            age(d, now),
        ]
    },
};

const CSI_NODE: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Drivers",
            "integer",
            "Drivers indicates the number of CSI drivers registered on the node",
        ),
        AGE,
    ],
    cells: |n, now| vec![name(n), list(n, &["spec", "drivers"]).len().into(), age(n, now)],
};

const CSI_STORAGE_CAPACITY: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "StorageClassName",
            "string",
            "The name of the StorageClass that the reported capacity applies to",
        ),
        col("Capacity", "string", "The capacity reported by the CSI driver"),
    ],
    cells: |c, _| {
        let capacity = match string(c, &["capacity"]) {
            "" => "<unset>",
            q => q,
        };
        vec![name(c), string(c, &["storageClassName"]).into(), capacity.into()]
    },
};

const VOLUME_ATTACHMENT: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Attacher",
            "string",
            "Attacher indicates the name of the volume driver that MUST handle this request",
        ),
        col("PV", "string", "Name of the persistent volume to attach"),
        col("Node", "string", "The node that the volume should be attached to"),
        col(
            "Attached",
            "boolean",
            "Indicates the volume is successfully attached",
        ),
        AGE,
    ],
    cells: |va, now| {
        vec![
            name(va),
            string(va, &["spec", "attacher"]).into(),
            string(va, &["spec", "source", "persistentVolumeName"]).into(),
            string(va, &["spec", "nodeName"]).into(),
            get(va, &["status", "attached"])
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .into(),
            age(va, now),
        ]
    },
};

const WEBHOOK_CONFIGURATION: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Webhooks",
            "integer",
            "Webhooks indicates the number of webhooks registered in this configuration",
        ),
        AGE,
    ],
    cells: |w, now| vec![name(w), list(w, &["webhooks"]).len().into(), age(w, now)],
};

const VALIDATING_ADMISSION_POLICY: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Validations",
            "integer",
            "Validations indicates the number of validation rules defined in this configuration",
        ),
        col(
            "ParamKind",
            "string",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ],
    cells: |p, now| {
        let param_kind = match get(p, &["spec", "paramKind"]) {
            Some(k) => format!("{}/{}", string(k, &["apiVersion"]), string(k, &["kind"])),
            None => "<unset>".into(),
        };
        vec![
            name(p),
            list(p, &["spec", "validations"]).len().into(),
            param_kind.into(),
            age(p, now),
        ]
    },
};

const POLICY_BINDING: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "PolicyName",
            "string",
            "PolicyName indicates the policy definition which the policy binding binded to",
        ),
        col(
            "ParamRef",
            "string",
            "ParamRef indicates the param resource which sets the configration param",
        ),
        AGE,
    ],
    cells: |b, now| {
        let param_ref = match get(b, &["spec", "paramRef"]) {
            Some(r) => {
                let ns = match string(r, &["namespace"]) {
                    "" => "*",
                    ns => ns,
                };
                let n = match string(r, &["name"]) {
                    "" => format!("{} ({})", "*", format_label_selector(get(r, &["selector"]))),
                    n => n.to_string(),
                };
                format!("{ns}/{n}")
            }
            None => "<unset>".into(),
        };
        vec![
            name(b),
            string(b, &["spec", "policyName"]).into(),
            param_ref.into(),
            age(b, now),
        ]
    },
};

const API_SERVICE: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "Service",
            "string",
            "The reference to the service that hosts this API endpoint.",
        ),
        col("Available", "string", "Whether this service is available."),
        AGE,
    ],
    cells: |s, now| {
        let service = match get(s, &["spec", "service"]) {
            Some(svc) => format!("{}/{}", string(svc, &["namespace"]), string(svc, &["name"])),
            None => "Local".into(),
        };
        let available = list(s, &["status", "conditions"])
            .iter()
            .find(|c| string(c, &["type"]) == "Available")
            .map(|c| match string(c, &["status"]) {
                "True" => "True".to_string(),
                st => format!("{st} ({})", string(c, &["reason"])),
            })
            .unwrap_or_else(|| "Unknown".into());
        vec![name(s), service.into(), available.into(), age(s, now)]
    },
};

const FLOW_SCHEMA: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col(
            "PriorityLevel",
            "string",
            "Name of the priority level to which the flow schema belongs",
        ),
        col(
            "MatchingPrecedence",
            "string",
            "Matching precedence of the flow schema",
        ),
        col(
            "DistinguisherMethod",
            "string",
            "Distinguisher method of the flow schema",
        ),
        AGE,
        col(
            "MissingPL",
            "string",
            "Whether the priority level configuration referenced by this flow schema is missing",
        ),
    ],
    cells: |fs, now| {
        let method = match string(fs, &["spec", "distinguisherMethod", "type"]) {
            "" => "<none>",
            m => m,
        };
        let missing = list(fs, &["status", "conditions"])
            .iter()
            .find(|c| string(c, &["type"]) == "Dangling")
            .map(|c| string(c, &["status"]).to_string())
            .unwrap_or_else(|| "?".into());
        vec![
            name(fs),
            string(fs, &["spec", "priorityLevelConfiguration", "name"]).into(),
            int(fs, &["spec", "matchingPrecedence"]).to_string().into(),
            method.into(),
            age(fs, now),
            missing.into(),
        ]
    },
};

const PRIORITY_LEVEL: KindPrinter = KindPrinter {
    columns: &[
        NAME,
        col("Type", "string", "Type of the priority level configuration"),
        col(
            "NominalConcurrencyShares",
            "string",
            "Concurrency shares of the priority level",
        ),
        col("Queues", "string", "Number of queues of the priority level"),
        col("HandSize", "string", "Hand size of the priority level"),
        col(
            "QueueLengthLimit",
            "string",
            "Length limit of the queue of the priority level",
        ),
        AGE,
    ],
    cells: |pl, now| {
        let none = || Value::from("<none>");
        let (shares, queues, hand, limit) = match string(pl, &["spec", "type"]) {
            "Limited" => {
                let shares = int(pl, &["spec", "limited", "nominalConcurrencyShares"]).to_string();
                match get(pl, &["spec", "limited", "limitResponse", "queuing"]) {
                    Some(q) => (
                        Value::from(shares),
                        Value::from(int(q, &["queues"]).to_string()),
                        Value::from(int(q, &["handSize"]).to_string()),
                        Value::from(int(q, &["queueLengthLimit"]).to_string()),
                    ),
                    None => (Value::from(shares), none(), none(), none()),
                }
            }
            _ => (none(), none(), none(), none()),
        };
        vec![
            name(pl),
            string(pl, &["spec", "type"]).into(),
            shares,
            queues,
            hand,
            limit,
            age(pl, now),
        ]
    },
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn now() -> Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    fn cells(group: &str, plural: &str, obj: &Value) -> Vec<Value> {
        let p = for_resource(group, plural).unwrap();
        let c = (p.cells)(obj, now());
        assert_eq!(c.len(), p.columns.len(), "{plural}: a cell per column");
        c
    }

    #[test]
    fn ingress_shows_class_hosts_address_and_ports() {
        let ing = json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"ingressClassName": "nginx", "tls": [{}],
                     "rules": [{"host": "a.example"}, {}, {"host": "c"}, {"host": "d"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}});
        assert_eq!(
            cells("networking.k8s.io", "ingresses", &ing),
            vec![
                json!("web"),
                json!("nginx"),
                json!("a.example,*,c + 1 more..."),
                json!("10.0.0.1"),
                json!("80, 443"),
                json!("60m")
            ]
        );
    }

    #[test]
    fn hpa_targets_read_both_versions() {
        let v2 = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 5, "minReplicas": 1,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
        let c = cells("autoscaling", "horizontalpodautoscalers", &v2);
        assert_eq!(c[1], "Deployment/web");
        assert_eq!(c[2], "cpu: 12%/80%");
        assert_eq!(c[3], "1");
        let v1 = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"},
            "maxReplicas": 5, "targetCPUUtilizationPercentage": 50}});
        let c = cells("autoscaling", "horizontalpodautoscalers", &v1);
        assert_eq!(c[2], "cpu: <unknown>/50%");
        assert_eq!(c[3], "<unset>");
    }

    #[test]
    fn csr_condition_is_pending_then_approved_and_issued() {
        let mut csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "kubernetes.io/kube-apiserver-client",
            "username": "kubeling-admin"}});
        assert_eq!(
            cells("certificates.k8s.io", "certificatesigningrequests", &csr)[5],
            "Pending"
        );
        csr["status"] =
            json!({"conditions": [{"type": "Approved", "status": "True"}], "certificate": "Y2VydA=="});
        assert_eq!(
            cells("certificates.k8s.io", "certificatesigningrequests", &csr)[5],
            "Approved,Issued"
        );
    }

    #[test]
    fn every_printer_has_a_cell_per_column_on_an_empty_object() {
        for (g, p) in [
            ("", "podtemplates"),
            ("", "componentstatuses"),
            ("networking.k8s.io", "ingresses"),
            ("networking.k8s.io", "ingressclasses"),
            ("networking.k8s.io", "networkpolicies"),
            ("networking.k8s.io", "servicecidrs"),
            ("networking.k8s.io", "ipaddresses"),
            ("autoscaling", "horizontalpodautoscalers"),
            ("scheduling.k8s.io", "priorityclasses"),
            ("node.k8s.io", "runtimeclasses"),
            ("certificates.k8s.io", "certificatesigningrequests"),
            ("storage.k8s.io", "csidrivers"),
            ("storage.k8s.io", "csinodes"),
            ("storage.k8s.io", "csistoragecapacities"),
            ("storage.k8s.io", "volumeattachments"),
            ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
            ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicybindings",
            ),
            ("apiregistration.k8s.io", "apiservices"),
            ("flowcontrol.apiserver.k8s.io", "flowschemas"),
            ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations"),
        ] {
            cells(g, p, &json!({"metadata": {"name": "x"}}));
        }
    }

    #[test]
    fn pod_templates_list_containers_and_pod_labels() {
        let t = json!({"metadata": {"name": "t"}, "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
            "spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:2"}]}}});
        assert_eq!(
            cells("", "podtemplates", &t),
            vec![
                json!("t"),
                json!("a,b"),
                json!("x:1,y:2"),
                json!("app=web,tier=fe")
            ]
        );
    }

    #[test]
    fn api_services_are_local_and_available() {
        let s = json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        let c = cells("apiregistration.k8s.io", "apiservices", &s);
        assert_eq!(c[1], "Local");
        assert_eq!(c[2], "True");
    }
}
