//! Server-side `meta.k8s.io/v1` Table conversion: what `kubectl get` prints.
//!
//! When a request asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, `http` hands the
//! stored objects (plain JSON, with kind and apiVersion) to [`table`] instead of encoding them, once per
//! list or single GET and once per watch event. This module holds the per-kind printers ported from
//! upstream `pkg/printers/internalversion/printers.go` (1.32), the `Name`/`Created At` convertor used for
//! kinds without a printer (`apiserver/pkg/registry/rest/table.go`), and apimachinery's `HumanDuration`.
//! Everything here is a pure function of the object and an injected `now`; `registry` and `storage`
//! never see a Table. Like upstream (`GenerateOptions{Wide: true}` in `pkg/printers/storage`) the server
//! always sends the wide cells; kubectl hides the priority-1 columns itself unless `-o wide`.

use std::collections::BTreeSet;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

mod kinds;
mod more_kinds;
mod policy_kinds;
mod rbac;

pub use kinds::KindPrinter;
use more_kinds::*;
use policy_kinds::*;
use rbac::*;

/// Which printer a resource uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printer {
    /// `pods`: NAME READY STATUS RESTARTS AGE (+ IP, NODE, NOMINATED NODE, READINESS GATES).
    Pod,
    /// `nodes`: NAME STATUS ROLES AGE VERSION (+ addresses and node info).
    Node,
    /// `namespaces`: NAME STATUS AGE.
    Namespace,
    /// `events` in core/v1 and events.k8s.io/v1 (upstream serves both from one store).
    Event,
    /// `leases.coordination.k8s.io`: NAME HOLDER AGE.
    Lease,
    /// `configmaps`: NAME DATA AGE.
    ConfigMap,
    /// `secrets`: NAME TYPE DATA AGE.
    Secret,
    /// `services`: NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE (+ SELECTOR).
    Service,
    /// `deployments.apps`: NAME READY UP-TO-DATE AVAILABLE AGE (+ containers, images, selector).
    Deployment,
    /// `replicasets.apps`: NAME DESIRED CURRENT READY AGE (+ containers, images, selector).
    ReplicaSet,
    /// `statefulsets.apps`: NAME READY AGE (+ containers, images).
    StatefulSet,
    /// `daemonsets.apps`: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE (+ wide).
    DaemonSet,
    /// `jobs.batch`: NAME STATUS COMPLETIONS DURATION AGE (+ containers, images, selector).
    Job,
    /// `cronjobs.batch`: NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE (+ wide).
    CronJob,
    /// `controllerrevisions.apps`: NAME CONTROLLER REVISION AGE.
    ControllerRevision,
    /// `endpoints`: NAME ENDPOINTS AGE.
    Endpoints,
    /// `endpointslices.discovery.k8s.io`: NAME ADDRESSTYPE PORTS ENDPOINTS AGE.
    EndpointSlice,
    /// `persistentvolumes`: NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS ... AGE.
    PersistentVolume,
    /// `persistentvolumeclaims`: NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS ... AGE.
    PersistentVolumeClaim,
    /// `storageclasses.storage.k8s.io`: NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ... AGE.
    StorageClass,
    /// `serviceaccounts`: NAME SECRETS AGE.
    ServiceAccount,
    /// A kind whose printer is data (`table/kinds.rs`).
    Kind(&'static KindPrinter),
    /// `rolebindings`: NAME ROLE AGE (+ USERS, GROUPS, SERVICEACCOUNTS).
    RoleBinding,
    /// `clusterrolebindings`: as role bindings.
    ClusterRoleBinding,
    /// `replicationcontrollers`: NAME DESIRED CURRENT READY AGE (+ containers, images, selector).
    ReplicationController,
    /// `poddisruptionbudgets.policy`: NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE.
    PodDisruptionBudget,
    /// `resourcequotas`: NAME AGE REQUEST LIMIT.
    ResourceQuota,
    /// Any other resource: upstream's default convertor, NAME and CREATED AT.
    Generic,
}

impl Printer {
    /// `group` is "" for core; `resource` is the plural (e.g. "pods", "leases", "events"). events.k8s.io
    /// events use Event.
    pub fn for_resource(group: &str, resource: &str) -> Printer {
        // A status subresource prints like its parent: upstream's StatusREST delegates ConvertToTable to
        // the main store.
        let resource = resource.strip_suffix("/status").unwrap_or(resource);
        match (group, resource) {
            ("", "pods") => Printer::Pod,
            ("", "nodes") => Printer::Node,
            ("", "namespaces") => Printer::Namespace,
            ("", "events") | ("events.k8s.io", "events") => Printer::Event,
            ("coordination.k8s.io", "leases") => Printer::Lease,
            ("", "configmaps") => Printer::ConfigMap,
            ("", "secrets") => Printer::Secret,
            ("", "services") => Printer::Service,
            ("apps", "deployments") => Printer::Deployment,
            ("apps", "replicasets") => Printer::ReplicaSet,
            ("apps", "statefulsets") => Printer::StatefulSet,
            ("apps", "daemonsets") => Printer::DaemonSet,
            ("batch", "jobs") => Printer::Job,
            ("batch", "cronjobs") => Printer::CronJob,
            ("apps", "controllerrevisions") => Printer::ControllerRevision,
            ("", "endpoints") => Printer::Endpoints,
            ("discovery.k8s.io", "endpointslices") => Printer::EndpointSlice,
            ("", "persistentvolumes") => Printer::PersistentVolume,
            ("", "persistentvolumeclaims") => Printer::PersistentVolumeClaim,
            ("storage.k8s.io", "storageclasses") => Printer::StorageClass,
            ("", "serviceaccounts") => Printer::ServiceAccount,
            ("rbac.authorization.k8s.io", "rolebindings") => Printer::RoleBinding,
            ("rbac.authorization.k8s.io", "clusterrolebindings") => Printer::ClusterRoleBinding,
            ("", "replicationcontrollers") => Printer::ReplicationController,
            ("policy", "poddisruptionbudgets") => Printer::PodDisruptionBudget,
            ("", "resourcequotas") => Printer::ResourceQuota,
            (group, resource) => kinds::for_resource(group, resource).map_or(Printer::Generic, Printer::Kind),
        }
    }
}

/// What each row's `object` carries: the `includeObject` table option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// `includeObject=None`: `object` is null.
    None,
    /// `includeObject=Metadata` (the default): a `PartialObjectMetadata` with the object's metadata.
    Metadata,
    /// `includeObject=Object`: the whole object (kubectl asks for it with `--sort-by`).
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter; absent or empty means `Metadata`. Any other value is
    /// the message of upstream's 400 (`endpoints/handlers/response.go: asTable`).
    pub fn parse(s: Option<&str>) -> Result<IncludeObject, String> {
        match s {
            Option::None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(format!("unrecognized includeObject value: {}", go_quote(other))),
        }
    }
}

/// Column definitions (name, type, format, description, priority all present).
pub fn columns(p: Printer) -> Vec<Value> {
    let defs: &[Column] = match p {
        Printer::Pod => POD_COLUMNS,
        Printer::Node => NODE_COLUMNS,
        Printer::Namespace => NAMESPACE_COLUMNS,
        Printer::Event => EVENT_COLUMNS,
        Printer::Lease => LEASE_COLUMNS,
        Printer::ConfigMap => CONFIG_MAP_COLUMNS,
        Printer::Secret => SECRET_COLUMNS,
        Printer::Service => SERVICE_COLUMNS,
        Printer::Deployment => DEPLOYMENT_COLUMNS,
        Printer::ReplicaSet => REPLICA_SET_COLUMNS,
        Printer::StatefulSet => STATEFUL_SET_COLUMNS,
        Printer::DaemonSet => DAEMON_SET_COLUMNS,
        Printer::Job => JOB_COLUMNS,
        Printer::CronJob => CRON_JOB_COLUMNS,
        Printer::ControllerRevision => CONTROLLER_REVISION_COLUMNS,
        Printer::Endpoints => ENDPOINTS_COLUMNS,
        Printer::EndpointSlice => ENDPOINT_SLICE_COLUMNS,
        Printer::PersistentVolume => PERSISTENT_VOLUME_COLUMNS,
        Printer::PersistentVolumeClaim => PERSISTENT_VOLUME_CLAIM_COLUMNS,
        Printer::StorageClass => STORAGE_CLASS_COLUMNS,
        Printer::ServiceAccount => SERVICE_ACCOUNT_COLUMNS,
        Printer::ReplicationController => REPLICATION_CONTROLLER_COLUMNS,
        Printer::PodDisruptionBudget => POD_DISRUPTION_BUDGET_COLUMNS,
        Printer::ResourceQuota => RESOURCE_QUOTA_COLUMNS,
        Printer::Kind(k) => k.columns,
        Printer::RoleBinding => ROLE_BINDING_COLUMNS,
        Printer::ClusterRoleBinding => CLUSTER_ROLE_BINDING_COLUMNS,
        Printer::Generic => GENERIC_COLUMNS,
    };
    defs.iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.kind,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect()
}

/// Cells of one row (always the wide cells).
pub fn cells(p: Printer, obj: &Value, now: Timestamp) -> Vec<Value> {
    match p {
        Printer::Pod => pod_cells(obj, now),
        Printer::Node => node_cells(obj, now),
        Printer::Namespace => namespace_cells(obj, now),
        Printer::Event => event_cells(obj, now),
        Printer::Lease => lease_cells(obj, now),
        Printer::ConfigMap => config_map_cells(obj, now),
        Printer::Secret => secret_cells(obj, now),
        Printer::Service => service_cells(obj, now),
        Printer::Deployment => deployment_cells(obj, now),
        Printer::ReplicaSet => replica_set_cells(obj, now),
        Printer::StatefulSet => stateful_set_cells(obj, now),
        Printer::DaemonSet => daemon_set_cells(obj, now),
        Printer::Job => job_cells(obj, now),
        Printer::CronJob => cron_job_cells(obj, now),
        Printer::ControllerRevision => controller_revision_cells(obj, now),
        Printer::Endpoints => endpoints_cells(obj, now),
        Printer::EndpointSlice => endpoint_slice_cells(obj, now),
        Printer::PersistentVolume => persistent_volume_cells(obj, now),
        Printer::PersistentVolumeClaim => persistent_volume_claim_cells(obj, now),
        Printer::StorageClass => storage_class_cells(obj, now),
        Printer::ServiceAccount => service_account_cells(obj, now),
        Printer::Kind(k) => (k.cells)(obj, now),
        Printer::RoleBinding | Printer::ClusterRoleBinding => binding_cells(obj, now),
        Printer::ReplicationController => replication_controller_cells(obj, now),
        Printer::PodDisruptionBudget => pod_disruption_budget_cells(obj, now),
        Printer::ResourceQuota => resource_quota_cells(obj, now),
        Printer::Generic => generic_cells(obj),
    }
}

/// One row: `{"cells":[..], "object": ...}` (+ `"conditions"` for finished pods). `obj` is the full
/// stored object with kind/apiVersion.
pub fn row(p: Printer, obj: &Value, now: Timestamp, include: IncludeObject) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells(p, obj, now)));
    if p == Printer::Pod
        && let Some(conditions) = pod_row_conditions(obj)
    {
        row.insert("conditions".into(), conditions);
    }
    let object = match include {
        // Upstream nils the RawExtension, which encodes as `null` (TableRow.Object has no usable
        // omitempty).
        IncludeObject::None => Value::Null,
        // kubectl decodes this with the unstructured decoder, which needs kind and apiVersion; it reads
        // the namespace (`-A`) and labels (`--show-labels`, `-L`) from it.
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": get(obj, &["metadata"]).cloned().unwrap_or_else(|| json!({})),
        }),
        IncludeObject::Object => obj.clone(),
    };
    row.insert("object".into(), object);
    Value::Object(row)
}

/// A whole Table: kind Table, apiVersion meta.k8s.io/v1, metadata {resourceVersion, continue?},
/// columnDefinitions (or null when `with_columns` is false, as upstream does for watch events after the
/// first), rows.
pub fn table(
    p: Printer,
    objs: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now: Timestamp,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    // ListMeta fields are omitempty upstream.
    let mut metadata = Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), resource_version.into());
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), token.into());
    }
    let column_definitions = if with_columns {
        Value::Array(columns(p))
    } else {
        Value::Null
    };
    let rows: Vec<Value> = objs.iter().map(|obj| row(p, obj, now, include)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

/// apimachinery's HumanDuration (`util/duration/duration.go`): about two or three significant figures.
pub fn human_duration(d: SignedDuration) -> String {
    // Up to a second in the future counts as now, to tolerate clock skew between machines.
    let seconds = d.as_secs();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.as_mins();
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.as_hours();
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

// ---------------------------------------------------------------------------------------------------
// Column definitions (printers.go: AddHandlers). Descriptions are the v1 API field docs upstream takes
// from SwaggerDoc(); kubectl never shows them, but they are part of the wire shape.

#[derive(Debug)]
struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    priority: i64,
    description: &'static str,
}

/// A priority-0 column.
const fn col(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 0,
        description,
    }
}

/// A priority-1 column: shown by kubectl only with `-o wide`.
const fn wide(name: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind: "string",
        format: "",
        priority: 1,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: DESC_NAME,
};
const AGE: Column = col("Age", "string", DESC_CREATION_TIMESTAMP);
const CONTAINERS: Column = wide("Containers", "Names of each container in the template.");
const IMAGES: Column = wide("Images", "Images referenced by each container in the template.");

const DESC_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, \
    although some resources may allow a client to request the generation of an appropriate name \
    automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot \
    be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const DESC_CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when \
    this object was created. It is not guaranteed to be set in happens-before order across separate \
    operations. Clients may not set this value. It is represented in RFC3339 form and is in \
    UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: \
    https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const DESC_NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if \
    available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field \
    is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption \
    when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for \
    an example. Consumers should assume that addresses can change during the lifetime of a Node. However, \
    there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in \
    its own status or consumers of the downward API (status.hostIP).";

const POD_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Ready",
        "string",
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    col(
        "Status",
        "string",
        "The aggregate status of the containers in this pod.",
    ),
    col(
        "Restarts",
        "string",
        "The number of times the containers in this pod have been restarted and when the last container in \
         this pod has restarted.",
    ),
    AGE,
    wide(
        "IP",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet \
         allocated.",
    ),
    wide(
        "Node",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for \
         scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this \
         node becomes responsible for the lifecycle of this pod. This field should not be used to express a \
         desire for the pod to be scheduled on a specific node. \
         https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    wide(
        "Nominated Node",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be \
         scheduled right away as preemption victims receive their graceful termination periods. This field \
         does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the \
         pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the \
         resources on this node to a higher priority pod that is created after preemption. As a result, this \
         field may be different than PodSpec.nodeName when the pod is scheduled.",
    ),
    wide(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its \
         containers are ready AND all conditions specified in the readiness gates have status equal to \
         \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
    ),
];

const NODE_COLUMNS: &[Column] = &[
    NAME,
    col("Status", "string", "The status of the node"),
    col("Roles", "string", "The roles of the node"),
    AGE,
    col("Version", "string", "Kubelet Version reported by the node."),
    wide("Internal-IP", DESC_NODE_ADDRESSES),
    wide("External-IP", DESC_NODE_ADDRESSES),
    wide(
        "OS-Image",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
    ),
    wide(
        "Kernel-Version",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
    ),
    wide(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
    ),
];

const NAMESPACE_COLUMNS: &[Column] = &[NAME, col("Status", "string", "The status of the namespace"), AGE];

const EVENT_COLUMNS: &[Column] = &[
    col(
        "Last Seen",
        "string",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    col(
        "Type",
        "string",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    col(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the transition into \
         the object's current status.",
    ),
    col("Object", "string", "The object that this event is about."),
    wide(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should contain a \
         valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if \
         the object reference is to a container within a pod, this would take on a value like: \
         \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the \
         event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this \
         pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
    ),
    wide(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    col(
        "Message",
        "string",
        "A human-readable description of the status of this operation.",
    ),
    wide(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    wide("Count", "The number of times this event has occurred."),
    Column {
        name: "Name",
        kind: "string",
        format: "name",
        priority: 1,
        description: DESC_NAME,
    },
];

const LEASE_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Holder",
        "string",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader \
         Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name \
         field.",
    ),
    AGE,
];

const CONFIG_MAP_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Data",
        "string",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or \
         '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data \
         must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
    ),
    AGE,
];

const SECRET_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data. More info: \
         https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    col(
        "Data",
        "string",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. \
         The serialized form of the secret data is a base64 encoded string, representing the arbitrary \
         (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
    ),
    AGE,
];

const SERVICE_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Type",
        "string",
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, \
         ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for \
         load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, \
         by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", \
         no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a \
         virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the \
         same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external \
         load-balancer (if supported in the current cloud) which routes to the same endpoints as the \
         clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other \
         fields do not apply to ExternalName services. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
    ),
    col(
        "Cluster-IP",
        "string",
        "clusterIP is the IP address of the service and is usually assigned randomly. If an address is \
         specified manually, is in-range (as per system configuration), and is not in use, it will be \
         allocated to the service; otherwise creation of the service will fail. This field may not be \
         changed through updates unless the type field is also being changed to ExternalName (which requires \
         this field to be blank) or the type field is being changed from ExternalName (in which case this \
         field may optionally be specified, as describe above).  Valid values are \"None\", empty string \
         (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual \
         IP), which is useful when direct endpoint connections are preferred and proxying is not \
         required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified \
         when creating a Service of type ExternalName, creation will fail. This field will be wiped when \
         updating a Service to type ExternalName. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    col(
        "External-IP",
        "string",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for \
         this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that \
         traffic arrives at a node with this IP.  A common example is external load-balancers that are not \
         part of the Kubernetes system.",
    ),
    col(
        "Port(s)",
        "string",
        "The list of ports that are exposed by this service. More info: \
         https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    AGE,
    wide(
        "Selector",
        "Route service traffic to pods with label keys and values matching this selector. If empty or not \
         present, the service is assumed to have an external process managing its endpoints, which \
         Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if \
         type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
    ),
];

const DEPLOYMENT_COLUMNS: &[Column] = &[
    NAME,
    col("Ready", "string", "Number of the pod with ready state"),
    col(
        "Up-to-date",
        "string",
        "Total number of non-terminating pods targeted by this deployment that have the desired template \
         spec.",
    ),
    col(
        "Available",
        "string",
        "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by \
         this deployment.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones \
         affected by this deployment. It must match the pod template's labels.",
    ),
];

const REPLICA_SET_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Desired",
        "integer",
        "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and \
         unspecified. Defaults to 1. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    col(
        "Current",
        "integer",
        "Replicas is the most recently observed number of non-terminating pods. More info: \
         https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    col(
        "Ready",
        "integer",
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "Selector is a label query over pods that should match the replica count. Label keys and values that \
         must match in order to be controlled by this replica set. It must match the pod template's labels. \
         More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

const STATEFUL_SET_COLUMNS: &[Column] = &[
    NAME,
    col("Ready", "string", "Number of the pod with ready state"),
    AGE,
    CONTAINERS,
    IMAGES,
];

const DAEMON_SET_COLUMNS: &[Column] = &[
    NAME,
    col(
        "Desired",
        "integer",
        "The total number of nodes that should be running the daemon pod (including nodes correctly running \
         the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    col(
        "Current",
        "integer",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. \
         More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    col(
        "Ready",
        "integer",
        "numberReady is the number of nodes that should be running the daemon pod and have one or more of \
         the daemon pod running with a Ready Condition.",
    ),
    col(
        "Up-to-date",
        "integer",
        "The total number of nodes that are running updated daemon pod",
    ),
    col(
        "Available",
        "integer",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod \
         running and available (ready for at least spec.minReadySeconds)",
    ),
    col(
        "Node Selector",
        "string",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must \
         match a node's labels for the pod to be scheduled on that node. More info: \
         https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. \
         It must match the pod template's labels. More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

const JOB_COLUMNS: &[Column] = &[
    NAME,
    col("Status", "string", "Status of the job."),
    col(
        "Completions",
        "string",
        "The number of pods which reached phase Succeeded. The value increases monotonically for a given \
         spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
    ),
    col("Duration", "string", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide(
        "Selector",
        "A label query over pods that should match the pod count. Normally, the system sets this field for \
         you. More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

// rest.defaultTableConvertor: no Age here, a raw RFC 3339 date.
const GENERIC_COLUMNS: &[Column] = &[NAME, col("Created At", "date", DESC_CREATION_TIMESTAMP)];

// ---------------------------------------------------------------------------------------------------
// Reading the stored JSON the way Go reads the decoded struct: absent and null are both the zero value.

static NULL: Value = Value::Null;

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for key in path {
        cur = cur.get(key)?;
    }
    if cur.is_null() { None } else { Some(cur) }
}

fn string<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn int(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn boolean(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

fn list<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn map_len(v: &Value, path: &[&str]) -> usize {
    get(v, path).and_then(Value::as_object).map_or(0, Map::len)
}

fn non_empty(s: &str) -> Option<&str> {
    if s.is_empty() { None } else { Some(s) }
}

/// Seconds from Go's zero `time.Time` (0001-01-01T00:00:00Z) to the Unix epoch.
const GO_ZERO_TIME_UNIX_SECONDS: i64 = -62_135_596_800;

/// A metav1.Time / MicroTime; `None` stands for Go's zero time, which `IsZero()` tests for. An
/// unparseable value is treated as unset: upstream could not have decoded it at all.
fn timestamp(v: &Value, path: &[&str]) -> Option<Timestamp> {
    let t: Timestamp = get(v, path)?.as_str()?.parse().ok()?;
    let is_go_zero = t.as_second() == GO_ZERO_TIME_UNIX_SECONDS && t.subsec_nanosecond() == 0;
    if is_go_zero { None } else { Some(t) }
}

/// printers.go: translateTimestampSince.
fn since(t: Option<Timestamp>, now: Timestamp) -> String {
    match t {
        Some(t) => human_duration(now.duration_since(t)),
        None => "<unknown>".into(),
    }
}

fn name(obj: &Value) -> Value {
    string(obj, &["metadata", "name"]).into()
}

fn age(obj: &Value, now: Timestamp) -> Value {
    since(timestamp(obj, &["metadata", "creationTimestamp"]), now).into()
}

fn is_deleting(obj: &Value) -> bool {
    get(obj, &["metadata", "deletionTimestamp"]).is_some()
}

/// Go's `%q` (strconv.Quote), for messages that quote a client's value.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// labels.FormatLabels: `k=v` pairs sorted as whole strings, `<none>` when empty.
fn format_labels(labels: Option<&Value>) -> String {
    let mut pairs: Vec<String> = labels
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// `metav1.LabelSelectorAsSelector(sel).String()`; `None` where upstream returns an error. A nil or
/// empty selector prints as "" (Nothing / Everything). Requirements are ordered by key as
/// `internalSelector.Add` does, and multi-valued sets print sorted as `Requirement.String` does.
/// Deliberately not ported: the key and value syntax checks of `labels.NewRequirement`, which validation
/// already enforced on write.
fn selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(selector) = selector else {
        return Some(String::new());
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in get(selector, &["matchLabels"])
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        requirements.push((key.clone(), format!("{key}={}", value.as_str().unwrap_or(""))));
    }
    for expr in list(selector, &["matchExpressions"]) {
        let key = string(expr, &["key"]);
        let mut values: Vec<&str> = list(expr, &["values"]).iter().filter_map(Value::as_str).collect();
        values.sort_unstable();
        let rendered = match string(expr, &["operator"]) {
            "In" | "NotIn" if values.is_empty() => return None,
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" | "DoesNotExist" if !values.is_empty() => return None,
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        };
        requirements.push((key.to_string(), rendered));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        requirements
            .into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// metav1.FormatLabelSelector: `<error>` when invalid, `<none>` when it selects nothing or everything.
fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        None => "<error>".into(),
        Some(s) if s.is_empty() => "<none>".into(),
        Some(s) => s,
    }
}

/// printers.go: layoutContainerCells, the comma-joined names and images of a pod template's containers.
fn layout_containers(obj: &Value, template_spec: &[&str]) -> (Value, Value) {
    let mut path = template_spec.to_vec();
    path.push("containers");
    let containers = list(obj, &path);
    let names: Vec<&str> = containers.iter().map(|c| string(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| string(c, &["image"])).collect();
    (names.join(",").into(), images.join(",").into())
}

/// A replica count that upstream's decode-time defaulting (SetDefaults_Deployment, _ReplicaSet,
/// _StatefulSet) sets to 1 when unset.
fn desired_replicas(obj: &Value) -> i64 {
    get(obj, &["spec", "replicas"])
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

// ---------------------------------------------------------------------------------------------------
// Pods (printers.go: printPod).

/// The READY, STATUS and RESTARTS cells of a pod.
struct PodSummary {
    ready: usize,
    total: usize,
    reason: String,
    restarts: String,
}

fn is_restartable_init_container(container: &Value) -> bool {
    string(container, &["restartPolicy"]) == "Always"
}

/// `lastState.terminated.finishedAt`, the moment of a container's last restart.
fn last_termination(status: &Value) -> Option<Timestamp> {
    timestamp(status, &["lastState", "terminated", "finishedAt"])
}

fn pod_summary(pod: &Value, now: Timestamp) -> PodSummary {
    let phase = string(pod, &["status", "phase"]);
    let mut reason = non_empty(string(pod, &["status", "reason"]))
        .unwrap_or(phase)
        .to_string();
    let conditions = list(pod, &["status", "conditions"]);
    // apiv1.PodReasonSchedulingGated
    if conditions
        .iter()
        .any(|c| string(c, &["type"]) == "PodScheduled" && string(c, &["reason"]) == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }

    let init_specs = list(pod, &["spec", "initContainers"]);
    // Upstream indexes the spec by name into a map, so a duplicated name resolves to the last one.
    let is_sidecar = |name: &str| {
        init_specs
            .iter()
            .rev()
            .find(|c| string(c, &["name"]) == name)
            .is_some_and(is_restartable_init_container)
    };
    let total = list(pod, &["spec", "containers"]).len()
        + init_specs
            .iter()
            .filter(|c| is_restartable_init_container(c))
            .count();
    let mut ready = 0;
    let mut restarts = 0;
    let mut sidecar_restarts = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_sidecar_restart: Option<Timestamp> = None;

    let mut initializing = false;
    for (i, status) in list(pod, &["status", "initContainerStatuses"]).iter().enumerate() {
        let count = int(status, &["restartCount"]);
        let finished = last_termination(status);
        restarts += count;
        last_restart = last_restart.max(finished);
        let sidecar = is_sidecar(string(status, &["name"]));
        if sidecar {
            sidecar_restarts += count;
            last_sidecar_restart = last_sidecar_restart.max(finished);
        }
        let terminated = get(status, &["state", "terminated"]);
        if terminated.is_some_and(|t| int(t, &["exitCode"]) == 0) {
            continue;
        }
        if sidecar && boolean(status, &["started"]) {
            if boolean(status, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        let waiting_reason = string(status, &["state", "waiting", "reason"]);
        reason = if let Some(t) = terminated {
            // Initialization failed.
            match non_empty(string(t, &["reason"])) {
                Some(r) => format!("Init:{r}"),
                None if int(t, &["signal"]) != 0 => format!("Init:Signal:{}", int(t, &["signal"])),
                None => format!("Init:ExitCode:{}", int(t, &["exitCode"])),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    // podutil.GetPodConditionFromList takes the first condition of a type.
    let initialized = conditions
        .iter()
        .find(|c| string(c, &["type"]) == "Initialized")
        .is_some_and(|c| string(c, &["status"]) == "True");
    if !initializing || initialized {
        // Regular init containers are done; only sidecar restarts still count.
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for status in list(pod, &["status", "containerStatuses"]).iter().rev() {
            restarts += int(status, &["restartCount"]);
            last_restart = last_restart.max(last_termination(status));
            let waiting_reason = string(status, &["state", "waiting", "reason"]);
            let terminated = get(status, &["state", "terminated"]);
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match non_empty(string(t, &["reason"])) {
                    Some(r) => r.to_string(),
                    None if int(t, &["signal"]) != 0 => format!("Signal:{}", int(t, &["signal"])),
                    None => format!("ExitCode:{}", int(t, &["exitCode"])),
                };
            } else if boolean(status, &["ready"]) && get(status, &["state", "running"]).is_some() {
                has_running = true;
                ready += 1;
            }
        }
        // A pod whose last-listed container completed but another still runs is not "Completed".
        if reason == "Completed" && has_running {
            let pod_ready = conditions
                .iter()
                .any(|c| string(c, &["type"]) == "Ready" && string(c, &["status"]) == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }

    // node.NodeUnreachablePodReason = "NodeLost"; podutil.IsPodPhaseTerminal = Succeeded or Failed.
    if is_deleting(pod) && string(pod, &["status", "reason"]) == "NodeLost" {
        reason = "Unknown".into();
    } else if is_deleting(pod) && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".into();
    }

    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };
    PodSummary {
        ready,
        total,
        reason,
        restarts,
    }
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let summary = pod_summary(pod, now);
    // The v1 -> internal conversion makes a non-empty status.podIP the first of PodIPs.
    let pod_ip = non_empty(string(pod, &["status", "podIP"]))
        .or_else(|| {
            list(pod, &["status", "podIPs"])
                .first()
                .and_then(|ip| non_empty(string(ip, &["ip"])))
        })
        .unwrap_or("<none>");
    let node_name = non_empty(string(pod, &["spec", "nodeName"])).unwrap_or("<none>");
    let nominated = non_empty(string(pod, &["status", "nominatedNodeName"])).unwrap_or("<none>");
    let gates = list(pod, &["spec", "readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = list(pod, &["status", "conditions"]);
        let true_conditions = gates
            .iter()
            .filter(|gate| {
                let wanted = string(gate, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| string(c, &["type"]) == wanted)
                    .is_some_and(|c| string(c, &["status"]) == "True")
            })
            .count();
        format!("{true_conditions}/{}", gates.len())
    };
    vec![
        name(pod),
        format!("{}/{}", summary.ready, summary.total).into(),
        summary.reason.into(),
        summary.restarts.into(),
        age(pod, now),
        pod_ip.into(),
        node_name.into(),
        nominated.into(),
        readiness_gates.into(),
    ]
}

/// printers.go: podSuccessConditions / podFailedConditions, which let kubectl hide finished pods.
fn pod_row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match string(pod, &["status", "phase"]) {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

// ---------------------------------------------------------------------------------------------------
// Other kinds (printers.go: printNode, printNamespace, printEvent, ...).

/// printers.go: labelNodeRolePrefix and nodeLabelRole.
const LABEL_NODE_ROLE_PREFIX: &str = "node-role.kubernetes.io/";
const NODE_LABEL_ROLE: &str = "kubernetes.io/role";

fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    // Upstream maps conditions by type (the last one wins) and only looks at Ready.
    let ready = list(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| string(c, &["type"]) == "Ready");
    let mut status = vec![match ready {
        Some(c) if string(c, &["status"]) == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if boolean(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled");
    }

    // findNodeRoles
    let mut roles = BTreeSet::new();
    for (key, value) in get(node, &["metadata", "labels"])
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let role = match key.strip_prefix(LABEL_NODE_ROLE_PREFIX) {
            Some(role) => role,
            None if key == NODE_LABEL_ROLE => value.as_str().unwrap_or(""),
            None => continue,
        };
        if !role.is_empty() {
            roles.insert(role.to_string());
        }
    }
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };

    let address = |kind: &str| {
        list(node, &["status", "addresses"])
            .iter()
            .find(|a| string(a, &["type"]) == kind)
            .map_or("<none>", |a| string(a, &["address"]))
    };
    let info = |field: &str| non_empty(string(node, &["status", "nodeInfo", field])).unwrap_or("<unknown>");
    vec![
        name(node),
        status.join(",").into(),
        roles.into(),
        age(node, now),
        string(node, &["status", "nodeInfo", "kubeletVersion"]).into(),
        address("InternalIP").into(),
        address("ExternalIP").into(),
        info("osImage").into(),
        info("kernelVersion").into(),
        info("containerRuntimeVersion").into(),
    ]
}

fn namespace_cells(ns: &Value, now: Timestamp) -> Vec<Value> {
    // SetDefaults_NamespaceStatus runs on decode upstream, so an unset phase reads as Active.
    let phase = non_empty(string(ns, &["status", "phase"])).unwrap_or("Active");
    vec![name(ns), phase.into(), age(ns, now)]
}

/// printers.go: printEvent. events.k8s.io/v1 objects convert to the same internal Event upstream; here
/// their renamed fields (regarding, note, deprecated*, reportingController) are read in place of the
/// core/v1 ones.
fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
    let field = |core: &str, events_v1: &str| get(event, &[core]).or_else(|| get(event, &[events_v1]));
    let time = |core: &str, events_v1: &str| field(core, events_v1).and_then(|v| timestamp(v, &[]));

    // Events from the new API have no firstTimestamp, only eventTime.
    let first_seen = since(
        time("firstTimestamp", "deprecatedFirstTimestamp").or_else(|| timestamp(event, &["eventTime"])),
        now,
    );
    let mut last_seen = match time("lastTimestamp", "deprecatedLastTimestamp") {
        Some(t) => since(Some(t), now),
        None => first_seen.clone(),
    };
    let mut count = field("count", "deprecatedCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(series) = get(event, &["series"]) {
        last_seen = since(timestamp(series, &["lastObservedTime"]), now);
        count = int(series, &["count"]);
    } else if count == 0 {
        // Singleton events don't have a count set in the new API.
        count = 1;
    }

    let regarding = field("involvedObject", "regarding").unwrap_or(&NULL);
    let kind = string(regarding, &["kind"]).to_lowercase();
    let target = match non_empty(string(regarding, &["name"])) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };

    // formatEventSource: Source.Component falls back to reportingController, Source.Host to
    // reportingInstance. core/v1 spells reportingController `reportingComponent` on the wire.
    let source = field("source", "deprecatedSource").unwrap_or(&NULL);
    let component = non_empty(string(source, &["component"]))
        .or_else(|| field("reportingComponent", "reportingController").and_then(Value::as_str))
        .unwrap_or("");
    let instance = non_empty(string(source, &["host"])).unwrap_or(string(event, &["reportingInstance"]));
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };

    let message = field("message", "note")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim();
    vec![
        last_seen.into(),
        string(event, &["type"]).into(),
        string(event, &["reason"]).into(),
        target.into(),
        string(regarding, &["fieldPath"]).into(),
        source.into(),
        message.into(),
        first_seen.into(),
        count.into(),
        name(event),
    ]
}

fn lease_cells(lease: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(lease),
        string(lease, &["spec", "holderIdentity"]).into(),
        age(lease, now),
    ]
}

fn config_map_cells(cm: &Value, now: Timestamp) -> Vec<Value> {
    let keys = map_len(cm, &["data"]) + map_len(cm, &["binaryData"]);
    vec![name(cm), keys.into(), age(cm, now)]
}

fn secret_cells(secret: &Value, now: Timestamp) -> Vec<Value> {
    // SetDefaults_Secret runs on decode upstream: an unset type is Opaque.
    let kind = non_empty(string(secret, &["type"])).unwrap_or("Opaque");
    vec![
        name(secret),
        kind.into(),
        map_len(secret, &["data"]).into(),
        age(secret, now),
    ]
}

fn service_cells(svc: &Value, now: Timestamp) -> Vec<Value> {
    // SetDefaults_Service runs on decode upstream: an unset type is ClusterIP, an unset protocol TCP.
    let kind = non_empty(string(svc, &["spec", "type"])).unwrap_or("ClusterIP");
    // Upstream reads only clusterIPs, which its service strategy always fills from clusterIP; ours may
    // hold just clusterIP, so fall back to it.
    let cluster_ip = match list(svc, &["spec", "clusterIPs"]).first() {
        Some(ip) => ip.as_str().unwrap_or(""),
        None => non_empty(string(svc, &["spec", "clusterIP"])).unwrap_or("<none>"),
    };

    let ports: Vec<String> = list(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = int(p, &["port"]);
            let protocol = non_empty(string(p, &["protocol"])).unwrap_or("TCP");
            match int(p, &["nodePort"]) {
                n if n > 0 => format!("{port}:{n}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        "<none>".to_string()
    } else {
        ports.join(",")
    };

    vec![
        name(svc),
        kind.into(),
        cluster_ip.into(),
        service_external_ip(svc, kind).into(),
        ports.into(),
        age(svc, now),
        format_labels(get(svc, &["spec", "selector"])).into(),
    ]
}

/// printers.go: getServiceExternalIP, always wide (load-balancer addresses are never clipped).
fn service_external_ip(svc: &Value, kind: &str) -> String {
    let external: Vec<&str> = list(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match kind {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".into()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            // loadBalancerStatusStringer: a sorted set of ingress IPs, else hostnames.
            let lb: BTreeSet<&str> = list(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| non_empty(string(i, &["ip"])).or_else(|| non_empty(string(i, &["hostname"]))))
                .collect();
            if !external.is_empty() {
                lb.into_iter().chain(external).collect::<Vec<_>>().join(",")
            } else if !lb.is_empty() {
                lb.into_iter().collect::<Vec<_>>().join(",")
            } else {
                "<pending>".into()
            }
        }
        "ExternalName" => string(svc, &["spec", "externalName"]).into(),
        _ => "<unknown>".into(),
    }
}

fn deployment_cells(d: &Value, now: Timestamp) -> Vec<Value> {
    let ready = int(d, &["status", "readyReplicas"]);
    let (containers, images) = layout_containers(d, &["spec", "template", "spec"]);
    // printDeployment prints the raw selector string, "" for none, and `<invalid>` on error.
    let selector = selector_string(get(d, &["spec", "selector"])).unwrap_or_else(|| "<invalid>".into());
    vec![
        name(d),
        format!("{ready}/{}", desired_replicas(d)).into(),
        int(d, &["status", "updatedReplicas"]).into(),
        int(d, &["status", "availableReplicas"]).into(),
        age(d, now),
        containers,
        images,
        selector.into(),
    ]
}

fn replica_set_cells(rs: &Value, now: Timestamp) -> Vec<Value> {
    let (containers, images) = layout_containers(rs, &["spec", "template", "spec"]);
    vec![
        name(rs),
        desired_replicas(rs).into(),
        int(rs, &["status", "replicas"]).into(),
        int(rs, &["status", "readyReplicas"]).into(),
        age(rs, now),
        containers,
        images,
        format_label_selector(get(rs, &["spec", "selector"])).into(),
    ]
}

fn stateful_set_cells(sts: &Value, now: Timestamp) -> Vec<Value> {
    let (containers, images) = layout_containers(sts, &["spec", "template", "spec"]);
    let ready = int(sts, &["status", "readyReplicas"]);
    vec![
        name(sts),
        format!("{ready}/{}", desired_replicas(sts)).into(),
        age(sts, now),
        containers,
        images,
    ]
}

fn daemon_set_cells(ds: &Value, now: Timestamp) -> Vec<Value> {
    let (containers, images) = layout_containers(ds, &["spec", "template", "spec"]);
    vec![
        name(ds),
        int(ds, &["status", "desiredNumberScheduled"]).into(),
        int(ds, &["status", "currentNumberScheduled"]).into(),
        int(ds, &["status", "numberReady"]).into(),
        int(ds, &["status", "updatedNumberScheduled"]).into(),
        int(ds, &["status", "numberAvailable"]).into(),
        format_labels(get(ds, &["spec", "template", "spec", "nodeSelector"])).into(),
        age(ds, now),
        containers,
        images,
        format_label_selector(get(ds, &["spec", "selector"])).into(),
    ]
}

/// printers.go: hasJobCondition, which looks only at the first condition of a type.
fn has_job_condition(job: &Value, kind: &str) -> bool {
    list(job, &["status", "conditions"])
        .iter()
        .find(|c| string(c, &["type"]) == kind)
        .is_some_and(|c| string(c, &["status"]) == "True")
}

/// printers.go: printJob as of 1.32 (SuccessCriteriaMet only reached the printer in 1.34).
fn job_cells(job: &Value, now: Timestamp) -> Vec<Value> {
    let succeeded = int(job, &["status", "succeeded"]);
    let completions = match get(job, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int(job, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        timestamp(job, &["status", "startTime"]),
        timestamp(job, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now.duration_since(start)),
        (Some(start), Some(end)) => human_duration(end.duration_since(start)),
    };
    let status = if has_job_condition(job, "Complete") {
        "Complete"
    } else if has_job_condition(job, "Failed") {
        "Failed"
    } else if is_deleting(job) {
        "Terminating"
    } else if has_job_condition(job, "Suspended") {
        "Suspended"
    } else if has_job_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (containers, images) = layout_containers(job, &["spec", "template", "spec"]);
    vec![
        name(job),
        status.into(),
        completions.into(),
        duration.into(),
        age(job, now),
        containers,
        images,
        format_label_selector(get(job, &["spec", "selector"])).into(),
    ]
}

/// rest.defaultTableConvertor: the name and `creationTimestamp.UTC().Format(time.RFC3339)`; an unset
/// timestamp formats as Go's zero time, exactly as upstream prints it.
fn generic_cells(obj: &Value) -> Vec<Value> {
    let created = match timestamp(obj, &["metadata", "creationTimestamp"]) {
        Some(t) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => "0001-01-01T00:00:00Z".to_string(),
    };
    vec![name(obj), created.into()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2025-01-01T12:00:00Z".parse().unwrap()
    }

    /// RFC 3339 for `secs` seconds before [`now`].
    fn ago(secs: i64) -> String {
        now()
            .checked_sub(SignedDuration::from_secs(secs))
            .unwrap()
            .to_string()
    }

    fn pod(spec: Value, status: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default", "creationTimestamp": ago(300)},
            "spec": spec,
            "status": status,
        })
    }

    fn one_container() -> Value {
        json!({"containers": [{"name": "app", "image": "nginx"}]})
    }

    fn running(name: &str) -> Value {
        json!({"name": name, "ready": true, "started": true, "restartCount": 0,
               "state": {"running": {"startedAt": ago(60)}}})
    }

    fn waiting(name: &str, reason: &str) -> Value {
        json!({"name": name, "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}})
    }

    fn terminated(name: &str, terminated: Value) -> Value {
        json!({"name": name, "ready": false, "restartCount": 0, "state": {"terminated": terminated}})
    }

    fn two_init_containers() -> Value {
        json!({"initContainers": [{"name": "init1"}, {"name": "init2"}],
               "containers": [{"name": "app", "image": "nginx"}]})
    }

    fn with_sidecar() -> Value {
        json!({"initContainers": [{"name": "proxy", "restartPolicy": "Always"}],
               "containers": [{"name": "app", "image": "nginx"}]})
    }

    fn ready_and_status(p: &Value) -> (String, String) {
        let c = cells(Printer::Pod, p, now());
        (
            c[1].as_str().unwrap().to_string(),
            c[2].as_str().unwrap().to_string(),
        )
    }

    #[test]
    fn pod_status_column_follows_upstream_print_pod() {
        let deleting = |mut p: Value| {
            p["metadata"]["deletionTimestamp"] = json!(ago(5));
            p
        };
        let cases: Vec<(&str, Value, &str, &str)> = vec![
            (
                "pending without statuses",
                pod(one_container(), json!({"phase": "Pending"})),
                "0/1",
                "Pending",
            ),
            ("no phase at all", pod(one_container(), json!({})), "0/1", ""),
            (
                "container creating",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "containerStatuses": [waiting("app", "ContainerCreating")]}),
                ),
                "0/1",
                "ContainerCreating",
            ),
            (
                "crash loop",
                pod(
                    one_container(),
                    json!({"phase": "Running", "containerStatuses": [waiting("app", "CrashLoopBackOff")]}),
                ),
                "0/1",
                "CrashLoopBackOff",
            ),
            (
                "running and ready",
                pod(
                    one_container(),
                    json!({"phase": "Running", "containerStatuses": [running("app")]}),
                ),
                "1/1",
                "Running",
            ),
            (
                "completed",
                pod(
                    one_container(),
                    json!({"phase": "Succeeded", "containerStatuses":
                        [terminated("app", json!({"exitCode": 0, "reason": "Completed"}))]}),
                ),
                "0/1",
                "Completed",
            ),
            (
                "error",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "containerStatuses":
                        [terminated("app", json!({"exitCode": 1, "reason": "Error"}))]}),
                ),
                "0/1",
                "Error",
            ),
            (
                "exit code without reason",
                pod(
                    one_container(),
                    json!({"phase": "Failed",
                           "containerStatuses": [terminated("app", json!({"exitCode": 2}))]}),
                ),
                "0/1",
                "ExitCode:2",
            ),
            (
                "signal without reason",
                pod(
                    one_container(),
                    json!({"phase": "Failed", "containerStatuses":
                        [terminated("app", json!({"exitCode": 137, "signal": 9}))]}),
                ),
                "0/1",
                "Signal:9",
            ),
            (
                "status reason wins over phase",
                pod(one_container(), json!({"phase": "Failed", "reason": "Evicted"})),
                "0/1",
                "Evicted",
            ),
            (
                "scheduling gated",
                pod(
                    one_container(),
                    json!({"phase": "Pending", "conditions":
                        [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
                ),
                "0/1",
                "SchedulingGated",
            ),
            (
                "first init container running",
                pod(
                    two_init_containers(),
                    json!({"phase": "Pending",
                           "initContainerStatuses": [running("init1"), waiting("init2", "PodInitializing")],
                           "containerStatuses": [waiting("app", "PodInitializing")]}),
                ),
                "0/1",
                "Init:0/2",
            ),
            (
                "second init container running",
                pod(
                    two_init_containers(),
                    json!({"phase": "Pending", "initContainerStatuses": [
                        terminated("init1", json!({"exitCode": 0, "reason": "Completed"})),
                        running("init2")]}),
                ),
                "0/1",
                "Init:1/2",
            ),
            (
                "init container crash loop",
                pod(
                    two_init_containers(),
                    json!({"phase": "Pending",
                           "initContainerStatuses": [waiting("init1", "CrashLoopBackOff")]}),
                ),
                "0/1",
                "Init:CrashLoopBackOff",
            ),
            (
                "init container error",
                pod(
                    two_init_containers(),
                    json!({"phase": "Pending", "initContainerStatuses":
                        [terminated("init1", json!({"exitCode": 1, "reason": "Error"}))]}),
                ),
                "0/1",
                "Init:Error",
            ),
            (
                "init container exit code",
                pod(
                    two_init_containers(),
                    json!({"phase": "Pending", "initContainerStatuses":
                        [terminated("init1", json!({"exitCode": 3}))]}),
                ),
                "0/1",
                "Init:ExitCode:3",
            ),
            (
                "init container signal",
                pod(
                    two_init_containers(),
                    json!({"phase": "Pending", "initContainerStatuses":
                        [terminated("init1", json!({"exitCode": 143, "signal": 15}))]}),
                ),
                "0/1",
                "Init:Signal:15",
            ),
            (
                "deleted running pod is terminating",
                deleting(pod(
                    one_container(),
                    json!({"phase": "Running", "containerStatuses": [running("app")]}),
                )),
                "1/1",
                "Terminating",
            ),
            (
                "deleted finished pod keeps its reason",
                deleting(pod(
                    one_container(),
                    json!({"phase": "Succeeded", "containerStatuses":
                        [terminated("app", json!({"exitCode": 0, "reason": "Completed"}))]}),
                )),
                "0/1",
                "Completed",
            ),
            (
                "deleted pod on a lost node is unknown",
                deleting(pod(
                    one_container(),
                    json!({"phase": "Running", "reason": "NodeLost"}),
                )),
                "0/1",
                "Unknown",
            ),
            (
                "completed container beside a running one, pod not ready",
                pod(
                    json!({"containers": [{"name": "app"}, {"name": "job"}]}),
                    json!({"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "False"}],
                           "containerStatuses": [running("app"),
                               terminated("job", json!({"exitCode": 0, "reason": "Completed"}))]}),
                ),
                "1/2",
                "NotReady",
            ),
            (
                "completed container beside a running one, pod ready",
                pod(
                    json!({"containers": [{"name": "app"}, {"name": "job"}]}),
                    json!({"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "True"}],
                           "containerStatuses": [running("app"),
                               terminated("job", json!({"exitCode": 0, "reason": "Completed"}))]}),
                ),
                "1/2",
                "Running",
            ),
            (
                "started sidecar counts as a ready container",
                pod(
                    with_sidecar(),
                    json!({"phase": "Running",
                           "conditions": [{"type": "Initialized", "status": "True"}],
                           "initContainerStatuses": [running("proxy")],
                           "containerStatuses": [running("app")]}),
                ),
                "2/2",
                "Running",
            ),
            (
                "sidecar not yet started keeps the pod initializing",
                pod(
                    with_sidecar(),
                    json!({"phase": "Pending",
                           "initContainerStatuses": [{"name": "proxy", "started": false, "ready": false,
                                                      "state": {"running": {"startedAt": ago(1)}}}],
                           "containerStatuses": [waiting("app", "PodInitializing")]}),
                ),
                "0/2",
                "Init:0/1",
            ),
        ];
        for (what, p, ready, status) in cases {
            assert_eq!(
                ready_and_status(&p),
                (ready.to_string(), status.to_string()),
                "{what}"
            );
        }
    }

    fn restarts(p: &Value) -> String {
        cells(Printer::Pod, p, now())[3].as_str().unwrap().to_string()
    }

    fn restarted(mut status: Value, count: i64, finished_secs_ago: Option<i64>) -> Value {
        status["restartCount"] = json!(count);
        if let Some(secs) = finished_secs_ago {
            status["lastState"] = json!({"terminated": {"exitCode": 1, "finishedAt": ago(secs)}});
        }
        status
    }

    #[test]
    fn restarts_show_time_since_last_termination() {
        let p = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [restarted(running("app"), 3, Some(125))]}),
        );
        assert_eq!(restarts(&p), "3 (2m5s ago)");
    }

    #[test]
    fn restarts_without_a_finish_time_show_only_the_count() {
        let p = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [restarted(running("app"), 2, None)]}),
        );
        assert_eq!(restarts(&p), "2");
        let fresh = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [running("app")]}),
        );
        assert_eq!(restarts(&fresh), "0");
    }

    #[test]
    fn restarts_add_sidecars_and_take_the_latest_termination() {
        let p = pod(
            with_sidecar(),
            json!({"phase": "Running",
                   "conditions": [{"type": "Initialized", "status": "True"}],
                   "initContainerStatuses": [restarted(running("proxy"), 2, Some(30))],
                   "containerStatuses": [restarted(running("app"), 1, Some(3600))]}),
        );
        assert_eq!(restarts(&p), "3 (30s ago)");
    }

    #[test]
    fn restarts_of_a_failing_init_container_count_while_initializing() {
        let p = pod(
            two_init_containers(),
            json!({"phase": "Pending",
                   "initContainerStatuses": [restarted(waiting("init1", "CrashLoopBackOff"), 4, Some(10))],
                   "containerStatuses": [waiting("app", "PodInitializing")]}),
        );
        assert_eq!(ready_and_status(&p).1, "Init:CrashLoopBackOff");
        assert_eq!(restarts(&p), "4 (10s ago)");
    }

    #[test]
    fn pod_wide_cells_show_ip_node_nomination_and_readiness_gates() {
        let mut spec = one_container();
        spec["nodeName"] = json!("node-1");
        spec["readinessGates"] = json!([{"conditionType": "lb/ready"}, {"conditionType": "dns/ready"}]);
        let p = pod(
            spec,
            json!({"phase": "Running", "podIPs": [{"ip": "10.244.0.7"}, {"ip": "fd00::7"}],
                   "nominatedNodeName": "node-2",
                   "conditions": [{"type": "lb/ready", "status": "True"},
                                  {"type": "dns/ready", "status": "False"}],
                   "containerStatuses": [running("app")]}),
        );
        assert_eq!(
            cells(Printer::Pod, &p, now()),
            vec![
                json!("web"),
                json!("1/1"),
                json!("Running"),
                json!("0"),
                json!("5m"),
                json!("10.244.0.7"),
                json!("node-1"),
                json!("node-2"),
                json!("1/2")
            ]
        );
        let bare = pod(one_container(), json!({"phase": "Pending"}));
        assert_eq!(
            cells(Printer::Pod, &bare, now())[5..],
            [json!("<none>"), json!("<none>"), json!("<none>"), json!("<none>")]
        );
    }

    #[test]
    fn pod_ip_prefers_the_legacy_pod_ip_field_like_the_v1_conversion() {
        let p = pod(
            one_container(),
            json!({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.2"}]}),
        );
        assert_eq!(cells(Printer::Pod, &p, now())[5], json!("10.0.0.1"));
    }

    #[test]
    fn finished_pods_carry_a_completed_row_condition() {
        let succeeded = pod(one_container(), json!({"phase": "Succeeded"}));
        assert_eq!(
            row(Printer::Pod, &succeeded, now(), IncludeObject::None)["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "Succeeded",
                    "message": "The pod has completed successfully."}])
        );
        let failed = pod(one_container(), json!({"phase": "Failed"}));
        assert_eq!(
            row(Printer::Pod, &failed, now(), IncludeObject::None)["conditions"],
            json!([{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}])
        );
        let running_pod = pod(one_container(), json!({"phase": "Running"}));
        assert!(
            row(Printer::Pod, &running_pod, now(), IncludeObject::None)
                .get("conditions")
                .is_none()
        );
    }

    #[test]
    fn human_duration_matches_apimachinery_at_every_boundary() {
        let s = SignedDuration::from_secs;
        let (m, h, d) = (60, 3600, 86_400);
        let cases = [
            (s(-2), "<invalid>"),
            (SignedDuration::from_millis(-1999), "0s"),
            (s(-1), "0s"),
            (SignedDuration::from_millis(-500), "0s"),
            (s(0), "0s"),
            (SignedDuration::from_millis(1999), "1s"),
            (s(119), "119s"),
            (s(2 * m), "2m"),
            (s(2 * m + 5), "2m5s"),
            (s(10 * m - 1), "9m59s"),
            (s(10 * m), "10m"),
            (s(3 * h - 1), "179m"),
            (s(3 * h), "3h"),
            (s(3 * h + 30 * m), "3h30m"),
            (s(8 * h - 1), "7h59m"),
            (s(8 * h), "8h"),
            (s(48 * h - 1), "47h"),
            (s(48 * h), "2d"),
            (s(50 * h), "2d2h"),
            (s(8 * d - 1), "7d23h"),
            (s(8 * d), "8d"),
            (s(730 * d - 1), "729d"),
            (s(730 * d), "2y"),
            (s(735 * d), "2y5d"),
            (s(8 * 365 * d - 1), "7y364d"),
            (s(8 * 365 * d), "8y"),
            (s(3660 * d), "10y"),
        ];
        for (duration, want) in cases {
            assert_eq!(human_duration(duration), want, "{duration:?}");
        }
    }

    #[test]
    fn age_is_unknown_without_a_usable_creation_timestamp() {
        for created in [Value::Null, json!("yesterday"), json!("0001-01-01T00:00:00Z")] {
            let obj = json!({"metadata": {"name": "x", "creationTimestamp": created}});
            assert_eq!(
                cells(Printer::Namespace, &obj, now())[2],
                json!("<unknown>"),
                "{created}"
            );
        }
        let no_metadata = json!({});
        assert_eq!(cells(Printer::Lease, &no_metadata, now())[2], json!("<unknown>"));
    }

    fn node(conditions: Value, unschedulable: bool) -> Value {
        json!({"metadata": {"name": "node-1"}, "spec": {"unschedulable": unschedulable},
               "status": {"conditions": conditions}})
    }

    #[test]
    fn node_status_reports_readiness_and_cordoning() {
        let ready = |status: &str| {
            json!([{"type": "MemoryPressure", "status": "False"},
                                          {"type": "Ready", "status": status}])
        };
        let cases = [
            (node(ready("True"), false), "Ready"),
            (node(ready("False"), false), "NotReady"),
            (node(ready("Unknown"), false), "NotReady"),
            (node(json!([]), false), "Unknown"),
            (node(ready("True"), true), "Ready,SchedulingDisabled"),
            (node(Value::Null, true), "Unknown,SchedulingDisabled"),
        ];
        for (n, want) in cases {
            assert_eq!(cells(Printer::Node, &n, now())[1], json!(want), "{n}");
        }
    }

    #[test]
    fn node_cells_list_sorted_roles_version_and_system_info() {
        let n = json!({
            "metadata": {"name": "node-1", "creationTimestamp": ago(3 * 86_400),
                         "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/role": "master",
                                    "node-role.kubernetes.io/control-plane": "",
                                    "node-role.kubernetes.io/": ""}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "node-1"},
                              {"type": "InternalIP", "address": "172.18.0.2"}],
                "nodeInfo": {"kubeletVersion": "v1.32.0-kubeling", "kernelVersion": "6.8.0",
                             "containerRuntimeVersion": "docker://27.0.3"}
            }
        });
        assert_eq!(
            cells(Printer::Node, &n, now()),
            vec![
                json!("node-1"),
                json!("Ready"),
                json!("control-plane,master,worker"),
                json!("3d"),
                json!("v1.32.0-kubeling"),
                json!("172.18.0.2"),
                json!("<none>"),
                json!("<unknown>"),
                json!("6.8.0"),
                json!("docker://27.0.3")
            ]
        );
        let bare = json!({"metadata": {"name": "n"}});
        assert_eq!(cells(Printer::Node, &bare, now())[2], json!("<none>"));
    }

    #[test]
    fn namespace_shows_phase_defaulting_to_active() {
        let ns = json!({"metadata": {"name": "kube-system", "creationTimestamp": ago(90)},
                        "status": {"phase": "Terminating"}});
        assert_eq!(
            cells(Printer::Namespace, &ns, now()),
            vec![json!("kube-system"), json!("Terminating"), json!("90s")]
        );
        let unset = json!({"metadata": {"name": "default"}});
        assert_eq!(cells(Printer::Namespace, &unset, now())[1], json!("Active"));
    }

    #[test]
    fn core_event_shows_last_seen_object_source_and_count() {
        let e = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "nginx.17a", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "nginx", "fieldPath": "spec.containers{nginx}"},
            "reason": "Pulled", "message": "  Successfully pulled image\n", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 4
        });
        assert_eq!(
            cells(Printer::Event, &e, now()),
            vec![
                json!("30s"),
                json!("Normal"),
                json!("Pulled"),
                json!("pod/nginx"),
                json!("spec.containers{nginx}"),
                json!("kubelet, node-1"),
                json!("Successfully pulled image"),
                json!("10m"),
                json!(4),
                json!("nginx.17a")
            ]
        );
    }

    #[test]
    fn events_k8s_io_event_maps_regarding_note_series_and_reporting_controller() {
        let e = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e1", "namespace": "default"},
            "regarding": {"kind": "Node", "name": "node-1"},
            "note": "Node is ready", "type": "Normal", "reason": "NodeReady",
            "reportingController": "kubeling/node", "reportingInstance": "node-1",
            "eventTime": "2025-01-01T10:00:00.000000Z",
            "series": {"count": 5, "lastObservedTime": ago(90)}
        });
        assert_eq!(
            cells(Printer::Event, &e, now()),
            vec![
                json!("90s"),
                json!("Normal"),
                json!("NodeReady"),
                json!("node/node-1"),
                json!(""),
                json!("kubeling/node, node-1"),
                json!("Node is ready"),
                json!("120m"),
                json!(5),
                json!("e1")
            ]
        );
        let deprecated = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
            "regarding": {"kind": "Pod", "name": "web"}, "note": "old style",
            "deprecatedSource": {"component": "kubelet"}, "deprecatedFirstTimestamp": ago(200),
            "deprecatedLastTimestamp": ago(20), "deprecatedCount": 7
        });
        let c = cells(Printer::Event, &deprecated, now());
        assert_eq!(
            (&c[0], &c[5], &c[7], &c[8]),
            (&json!("20s"), &json!("kubelet"), &json!("3m20s"), &json!(7))
        );
    }

    #[test]
    fn singleton_event_counts_once_and_last_seen_falls_back_to_first_seen() {
        let e = json!({
            "metadata": {"name": "ns.1"}, "involvedObject": {"kind": "Namespace"},
            "reportingComponent": "scheduler", "eventTime": ago(45), "type": "Warning", "reason": "X"
        });
        let c = cells(Printer::Event, &e, now());
        assert_eq!(
            (&c[0], &c[3], &c[5], &c[7], &c[8]),
            (
                &json!("45s"),
                &json!("namespace"),
                &json!("scheduler"),
                &json!("45s"),
                &json!(1)
            )
        );
    }

    #[test]
    fn lease_shows_its_holder() {
        let l = json!({"metadata": {"name": "node-1", "creationTimestamp": ago(10)},
                       "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}});
        assert_eq!(
            cells(Printer::Lease, &l, now()),
            vec![json!("node-1"), json!("node-1"), json!("10s")]
        );
        assert_eq!(cells(Printer::Lease, &json!({"spec": {}}), now())[1], json!(""));
    }

    #[test]
    fn config_map_data_counts_binary_data_too() {
        let cm = json!({"metadata": {"name": "cfg", "creationTimestamp": ago(1)},
                        "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        assert_eq!(
            cells(Printer::ConfigMap, &cm, now()),
            vec![json!("cfg"), json!(3), json!("1s")]
        );
    }

    #[test]
    fn secret_shows_type_defaulting_to_opaque_and_data_count() {
        let s = json!({"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                       "data": {"tls.crt": "", "tls.key": ""}});
        assert_eq!(
            cells(Printer::Secret, &s, now()),
            vec![
                json!("tls"),
                json!("kubernetes.io/tls"),
                json!(2),
                json!("<unknown>")
            ]
        );
        let plain = json!({"metadata": {"name": "p"}});
        assert_eq!(
            cells(Printer::Secret, &plain, now())[1..3],
            [json!("Opaque"), json!(0)]
        );
    }

    fn service(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "svc", "creationTimestamp": ago(3600)}, "spec": spec, "status": status})
    }

    #[test]
    fn service_cells_follow_type_ports_and_selector() {
        let dns = service(
            json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                   "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
                   "selector": {"k8s-app": "kube-dns"}}),
            json!({}),
        );
        assert_eq!(
            cells(Printer::Service, &dns, now()),
            vec![
                json!("svc"),
                json!("ClusterIP"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("53/UDP,53/TCP"),
                json!("60m"),
                json!("k8s-app=kube-dns")
            ]
        );
        let bare = service(json!({}), Value::Null);
        assert_eq!(
            cells(Printer::Service, &bare, now())[1..7],
            [
                json!("ClusterIP"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("60m"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn service_external_ip_depends_on_type() {
        let cases = [
            (
                json!({"type": "NodePort", "clusterIP": "10.0.0.5", "externalIPs": ["1.2.3.4"],
                    "ports": [{"port": 80, "nodePort": 30080}]}),
                json!({}),
                "1.2.3.4",
                "80:30080/TCP",
            ),
            (
                json!({"type": "LoadBalancer",
                       "ports": [{"port": 443, "nodePort": 31443, "protocol": "TCP"}]}),
                json!({}),
                "<pending>",
                "443:31443/TCP",
            ),
            (
                json!({"type": "LoadBalancer"}),
                json!({"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "5.6.7.8"}]}}),
                "5.6.7.8,lb.example",
                "<none>",
            ),
            (
                json!({"type": "LoadBalancer", "externalIPs": ["1.2.3.4"]}),
                json!({"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}),
                "5.6.7.8,1.2.3.4",
                "<none>",
            ),
            (
                json!({"type": "ExternalName", "externalName": "example.com"}),
                json!({}),
                "example.com",
                "<none>",
            ),
            (json!({"type": "Weird"}), json!({}), "<unknown>", "<none>"),
        ];
        for (spec, status, external, ports) in cases {
            let c = cells(Printer::Service, &service(spec.clone(), status), now());
            assert_eq!((&c[3], &c[4]), (&json!(external), &json!(ports)), "{spec}");
        }
    }

    fn template(containers: Value) -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers}})
    }

    #[test]
    fn deployment_shows_ready_of_desired_and_raw_selector() {
        let d = json!({
            "metadata": {"name": "web", "creationTimestamp": ago(86_400)},
            "spec": {"replicas": 3,
                     "selector": {"matchLabels": {"app": "web"},
                                  "matchExpressions": [
                                      {"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                     "template": template(json!([{"name": "nginx", "image": "nginx:1.27"},
                                                 {"name": "log", "image": "busybox"}]))},
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        assert_eq!(
            cells(Printer::Deployment, &d, now()),
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("24h"),
                json!("nginx,log"),
                json!("nginx:1.27,busybox"),
                json!("app=web,tier in (a,b)")
            ]
        );
        let unset = json!({"metadata": {"name": "x"}, "spec": {}});
        let c = cells(Printer::Deployment, &unset, now());
        assert_eq!((&c[1], &c[5], &c[7]), (&json!("0/1"), &json!(""), &json!("")));
        let invalid = json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}});
        assert_eq!(cells(Printer::Deployment, &invalid, now())[7], json!("<invalid>"));
    }

    #[test]
    fn label_selectors_format_like_apimachinery() {
        let cases = [
            (Value::Null, "<none>"),
            (json!({}), "<none>"),
            (
                json!({"matchLabels": {"z": "1"}, "matchExpressions": [{"key": "a", "operator": "Exists"}]}),
                "a,z=1",
            ),
            (
                json!({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"},
                                         {"key": "env", "operator": "NotIn", "values": ["prod"]}]}),
                "env notin (prod),!gone",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
                "<error>",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                "<error>",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
                "<error>",
            ),
        ];
        for (selector, want) in cases {
            let selector_ref = if selector.is_null() { None } else { Some(&selector) };
            assert_eq!(format_label_selector(selector_ref), want, "{selector}");
        }
        // labels.Set.String sorts the joined `k=v` strings, not the keys.
        assert_eq!(format_labels(Some(&json!({"a": "2", "a.b": "1"}))), "a.b=1,a=2");
        assert_eq!(format_labels(None), "<none>");
    }

    #[test]
    fn replica_set_shows_desired_current_ready_and_selector() {
        let rs = json!({
            "metadata": {"name": "web-abc", "creationTimestamp": ago(600)},
            "spec": {"replicas": 3,
                     "selector": {"matchLabels": {"app": "web", "pod-template-hash": "abc"}},
                     "template": template(json!([{"name": "nginx", "image": "nginx:1.27"}]))},
            "status": {"replicas": 3, "readyReplicas": 2}
        });
        assert_eq!(
            cells(Printer::ReplicaSet, &rs, now()),
            vec![
                json!("web-abc"),
                json!(3),
                json!(3),
                json!(2),
                json!("10m"),
                json!("nginx"),
                json!("nginx:1.27"),
                json!("app=web,pod-template-hash=abc")
            ]
        );
    }

    #[test]
    fn stateful_set_shows_ready_of_desired() {
        let sts = json!({
            "metadata": {"name": "db", "creationTimestamp": ago(7 * 86_400 + 3600)},
            "spec": {"replicas": 3,
                     "template": template(json!([{"name": "postgres", "image": "postgres:16"}]))},
            "status": {"readyReplicas": 1}
        });
        assert_eq!(
            cells(Printer::StatefulSet, &sts, now()),
            vec![
                json!("db"),
                json!("1/3"),
                json!("7d1h"),
                json!("postgres"),
                json!("postgres:16")
            ]
        );
    }

    #[test]
    fn daemon_set_shows_scheduling_counts_and_node_selector() {
        let mut tmpl = template(json!([{"name": "fluentd", "image": "fluentd:v1"}]));
        tmpl["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
        let ds = json!({
            "metadata": {"name": "fluentd", "creationTimestamp": ago(30)},
            "spec": {"selector": {"matchLabels": {"app": "fluentd"}}, "template": tmpl},
            "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1,
                       "updatedNumberScheduled": 2, "numberAvailable": 1}
        });
        assert_eq!(
            cells(Printer::DaemonSet, &ds, now()),
            vec![
                json!("fluentd"),
                json!(2),
                json!(2),
                json!(1),
                json!(2),
                json!(1),
                json!("kubernetes.io/os=linux"),
                json!("30s"),
                json!("fluentd"),
                json!("fluentd:v1"),
                json!("app=fluentd")
            ]
        );
        assert_eq!(cells(Printer::DaemonSet, &json!({}), now())[6], json!("<none>"));
    }

    #[test]
    fn job_status_completions_and_duration_follow_print_job() {
        let job = |spec: Value, status: Value, deleting: bool| {
            let mut j = json!({"metadata": {"name": "pi", "creationTimestamp": ago(120)}, "spec": spec,
                               "status": status});
            if deleting {
                j["metadata"]["deletionTimestamp"] = json!(ago(1));
            }
            j
        };
        let cond = |kind: &str| json!([{"type": kind, "status": "True"}]);
        let cases = [
            (
                job(
                    json!({"completions": 1}),
                    json!({"succeeded": 1, "startTime": ago(100), "completionTime": ago(40),
                           "conditions": cond("Complete")}),
                    false,
                ),
                ("Complete", "1/1", "60s"),
            ),
            (
                job(json!({}), json!({"startTime": ago(30), "active": 1}), false),
                ("Running", "0/1", "30s"),
            ),
            (
                job(json!({"parallelism": 3}), json!({"succeeded": 1}), false),
                ("Running", "1/1 of 3", ""),
            ),
            (
                job(
                    json!({"completions": 5, "parallelism": 2}),
                    json!({"succeeded": 2}),
                    false,
                ),
                ("Running", "2/5", ""),
            ),
            (
                job(json!({}), json!({"conditions": cond("Failed")}), false),
                ("Failed", "0/1", ""),
            ),
            (
                job(json!({}), json!({"conditions": cond("Suspended")}), false),
                ("Suspended", "0/1", ""),
            ),
            (
                job(json!({}), json!({"conditions": cond("FailureTarget")}), false),
                ("FailureTarget", "0/1", ""),
            ),
            (
                job(
                    json!({}),
                    json!({"conditions": cond("SuccessCriteriaMet")}),
                    false,
                ),
                ("Running", "0/1", ""),
            ),
            (job(json!({}), json!({}), true), ("Terminating", "0/1", "")),
            (
                job(json!({}), json!({"conditions": cond("Complete")}), true),
                ("Complete", "0/1", ""),
            ),
            (
                job(
                    json!({}),
                    json!({"conditions": [{"type": "Complete", "status": "False"},
                                                  {"type": "Complete", "status": "True"}]}),
                    false,
                ),
                ("Running", "0/1", ""),
            ),
        ];
        for (j, (status, completions, duration)) in cases {
            let c = cells(Printer::Job, &j, now());
            assert_eq!(
                (&c[1], &c[2], &c[3]),
                (&json!(status), &json!(completions), &json!(duration)),
                "{j}"
            );
            assert_eq!(c[4], json!("2m"));
        }
    }

    #[test]
    fn generic_printer_shows_name_and_rfc3339_creation_in_utc() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2025-01-01T13:00:00.5+02:00"}});
        assert_eq!(
            cells(Printer::Generic, &obj, now()),
            vec![json!("x"), json!("2025-01-01T11:00:00Z")]
        );
        // Upstream formats the zero time.Time when the timestamp is unset.
        assert_eq!(
            cells(Printer::Generic, &json!({}), now()),
            vec![json!(""), json!("0001-01-01T00:00:00Z")]
        );
        let cols = columns(Printer::Generic);
        assert_eq!(
            (&cols[0]["format"], &cols[1]["name"], &cols[1]["type"]),
            (&json!("name"), &json!("Created At"), &json!("date"))
        );
    }

    #[test]
    fn resources_map_to_their_printers() {
        let cases = [
            ("", "pods", Printer::Pod),
            ("", "pods/status", Printer::Pod),
            ("", "nodes", Printer::Node),
            ("", "namespaces", Printer::Namespace),
            ("", "events", Printer::Event),
            ("events.k8s.io", "events", Printer::Event),
            ("coordination.k8s.io", "leases", Printer::Lease),
            ("", "configmaps", Printer::ConfigMap),
            ("", "secrets", Printer::Secret),
            ("", "services", Printer::Service),
            ("apps", "deployments", Printer::Deployment),
            ("apps", "replicasets", Printer::ReplicaSet),
            ("apps", "statefulsets", Printer::StatefulSet),
            ("apps", "daemonsets", Printer::DaemonSet),
            ("batch", "jobs", Printer::Job),
            ("batch", "cronjobs", Printer::CronJob),
            ("apps", "controllerrevisions", Printer::ControllerRevision),
            ("", "endpoints", Printer::Endpoints),
            ("discovery.k8s.io", "endpointslices", Printer::EndpointSlice),
            ("", "persistentvolumes", Printer::PersistentVolume),
            (
                "",
                "persistentvolumeclaims/status",
                Printer::PersistentVolumeClaim,
            ),
            ("storage.k8s.io", "storageclasses", Printer::StorageClass),
            ("", "serviceaccounts", Printer::ServiceAccount),
            ("", "resourcequotas", Printer::ResourceQuota),
            ("", "limitranges", Printer::Generic),
            ("apps", "pods", Printer::Generic),
            ("example.com", "widgets", Printer::Generic),
        ];
        for (group, resource, want) in cases {
            assert_eq!(Printer::for_resource(group, resource), want, "{group}/{resource}");
        }
    }

    #[test]
    fn include_object_defaults_to_metadata_and_rejects_unknown_values() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("")), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse(Some("Metadata")),
            Ok(IncludeObject::Metadata)
        );
        assert_eq!(IncludeObject::parse(Some("None")), Ok(IncludeObject::None));
        assert_eq!(IncludeObject::parse(Some("Object")), Ok(IncludeObject::Object));
        assert_eq!(
            IncludeObject::parse(Some("metadata")),
            Err("unrecognized includeObject value: \"metadata\"".to_string())
        );
        assert_eq!(
            IncludeObject::parse(Some("a\"b\n\u{1}")),
            Err("unrecognized includeObject value: \"a\\\"b\\n\\x01\"".to_string())
        );
    }

    #[test]
    fn row_object_follows_include_object() {
        let p = pod(one_container(), json!({"phase": "Running"}));
        let partial = row(Printer::Pod, &p, now(), IncludeObject::Metadata);
        assert_eq!(
            partial["object"],
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": p["metadata"]})
        );
        assert_eq!(row(Printer::Pod, &p, now(), IncludeObject::Object)["object"], p);
        let none = row(Printer::Pod, &p, now(), IncludeObject::None);
        assert_eq!(none.get("object"), Some(&Value::Null));
        assert_eq!(none["cells"].as_array().unwrap().len(), 9);
        let no_metadata = row(
            Printer::Generic,
            &json!({"kind": "X"}),
            now(),
            IncludeObject::Metadata,
        );
        assert_eq!(no_metadata["object"]["metadata"], json!({}));
    }

    #[test]
    fn table_carries_list_metadata_columns_and_rows() {
        let a = pod(one_container(), json!({"phase": "Pending"}));
        let b = pod(
            one_container(),
            json!({"phase": "Running", "containerStatuses": [running("app")]}),
        );
        let t = table(
            Printer::Pod,
            &[&a, &b],
            "1450",
            Some("next"),
            now(),
            IncludeObject::Metadata,
            true,
        );
        assert_eq!(
            (&t["kind"], &t["apiVersion"]),
            (&json!("Table"), &json!("meta.k8s.io/v1"))
        );
        assert_eq!(
            t["metadata"],
            json!({"resourceVersion": "1450", "continue": "next"})
        );
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 9);
        assert_eq!(t["rows"].as_array().unwrap().len(), 2);
        assert_eq!(t["rows"][1]["cells"][2], json!("Running"));

        let watch_event = table(
            Printer::Pod,
            &[&b],
            "1460",
            None,
            now(),
            IncludeObject::Metadata,
            false,
        );
        assert_eq!(watch_event["columnDefinitions"], Value::Null);
        assert_eq!(watch_event["metadata"], json!({"resourceVersion": "1460"}));
        let empty = table(Printer::Node, &[], "", Some(""), now(), IncludeObject::None, true);
        assert_eq!((&empty["metadata"], &empty["rows"]), (&json!({}), &json!([])));
    }

    #[test]
    fn every_printer_emits_one_cell_per_complete_column_definition() {
        let printers = [
            Printer::Pod,
            Printer::Node,
            Printer::Namespace,
            Printer::Event,
            Printer::Lease,
            Printer::ConfigMap,
            Printer::Secret,
            Printer::Service,
            Printer::Deployment,
            Printer::ReplicaSet,
            Printer::StatefulSet,
            Printer::DaemonSet,
            Printer::Job,
            Printer::Generic,
        ];
        for p in printers {
            let cols = columns(p);
            for c in &cols {
                assert!(
                    c["name"].is_string() && c["type"].is_string() && c["format"].is_string(),
                    "{p:?} {c}"
                );
                assert!(
                    c["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{p:?} {c}"
                );
                assert!(matches!(c["priority"].as_i64(), Some(0 | 1)), "{p:?} {c}");
            }
            assert_eq!(cells(p, &json!({}), now()).len(), cols.len(), "{p:?}");
            // kubectl's -o name / -A decoration looks for the one string column formatted as a name.
            assert_eq!(cols.iter().filter(|c| c["format"] == "name").count(), 1, "{p:?}");
        }
        let pod_cols = columns(Printer::Pod);
        let names: Vec<&str> = pod_cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        assert_eq!(pod_cols[3]["type"], json!("string"));
    }
}
