//! The table of served kinds: names, scope, discovery data, and how each kind is decoded.
//!
//! k8s-openapi carries no registry of types; this table is ours. Every built-in object is round-tripped
//! through its k8s-openapi type on each write, which rejects values of the wrong JSON type and makes the
//! stored object carry every field the OpenAPI schema requires (the Python client insists on them).

use serde_json::Value;

use super::validation::NameRule;

/// A subresource, for discovery.
#[derive(Debug)]
pub struct Subresource {
    /// `status`, `binding`, ...
    pub name: &'static str,
    /// The kind it takes and returns.
    pub kind: &'static str,
    /// Its verbs.
    pub verbs: &'static [&'static str],
    /// Group/version of `kind` when it differs from the resource's (eviction is `policy/v1`).
    pub group_version: Option<(&'static str, &'static str)>,
}

/// One served resource.
#[derive(Debug)]
pub struct ResourceInfo {
    /// API group, `""` for core.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Plural resource name (URL segment).
    pub plural: &'static str,
    /// Singular name.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Subresources served.
    pub subresources: &'static [Subresource],
    /// Whether `status` is written only through the `status` subresource.
    pub has_status: bool,
    /// Whether `metadata.generation` follows spec changes.
    pub tracks_generation: bool,
    /// The rule `metadata.name` follows.
    pub name_rule: NameRule,
    /// Decode and re-encode through the k8s-openapi type.
    pub canonical: fn(Value) -> Result<Value, String>,
    /// Another version of the same objects this resource is stored as (events.k8s.io/v1 events are
    /// core/v1 events in storage, as upstream), with the conversions.
    pub alias: Option<&'static Alias>,
}

/// How a resource is stored as another one.
#[derive(Debug)]
pub struct Alias {
    /// `(group, plural)` of the stored resource.
    pub stored_as: (&'static str, &'static str),
    /// Stored form → this resource's form.
    pub from_storage: fn(&Value) -> Value,
    /// This resource's form → stored form.
    pub to_storage: fn(&Value) -> Value,
}

impl PartialEq for ResourceInfo {
    fn eq(&self, other: &Self) -> bool {
        (self.group, self.version, self.plural) == (other.group, other.version, other.plural)
    }
}

impl ResourceInfo {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `PodList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The verbs of the main resource.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.plural == "namespaces" {
            // Upstream serves no deletecollection for namespaces.
            &["create", "delete", "get", "list", "patch", "update", "watch"]
        } else {
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }

    /// Storage key prefix of every object of this resource, or of one namespace's.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        let (group, plural) = self
            .alias
            .map(|a| a.stored_as)
            .unwrap_or((self.group, self.plural));
        let group = if group.is_empty() { "core" } else { group };
        match namespace {
            Some(ns) if self.namespaced => format!("{group}/{plural}/{ns}/"),
            _ if !self.namespaced => format!("{group}/{plural}//"),
            _ => format!("{group}/{plural}/"),
        }
    }

    /// Storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}{name}", self.prefix(namespace))
    }
}

fn canonical<T: serde::de::DeserializeOwned + serde::Serialize>(v: Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

const CRUD_STATUS: &[&str] = &["get", "patch", "update"];

const fn scale() -> Subresource {
    Subresource {
        name: "scale",
        kind: "Scale",
        verbs: CRUD_STATUS,
        group_version: Some(("autoscaling", "v1")),
    }
}

const fn status(kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        kind,
        verbs: CRUD_STATUS,
        group_version: None,
    }
}

use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, coordination::v1 as coord, core::v1 as core,
    discovery::v1 as discovery, storage::v1 as storage,
};

/// Every served resource.
pub static RESOURCES: &[ResourceInfo] = &[
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        subresources: &[
            status("Pod"),
            Subresource {
                name: "binding",
                kind: "Binding",
                verbs: &["create"],
                group_version: None,
            },
            // Proxied to the node agent (http/proxy).
            Subresource {
                name: "log",
                kind: "Pod",
                verbs: &["get"],
                group_version: None,
            },
            Subresource {
                name: "exec",
                kind: "PodExecOptions",
                verbs: &["create", "get"],
                group_version: None,
            },
            Subresource {
                name: "attach",
                kind: "PodAttachOptions",
                verbs: &["create", "get"],
                group_version: None,
            },
            // Takes and returns a Pod, of which it changes spec.ephemeralContainers (pod_strategy).
            Subresource {
                name: super::pod_strategy::EPHEMERAL_CONTAINERS,
                kind: "Pod",
                verbs: CRUD_STATUS,
                group_version: None,
            },
        ],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::Pod>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        subresources: &[status("Node")],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::Node>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        subresources: &[status("Namespace")],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Label,
        canonical: canonical::<core::Namespace>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::Event>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short_names: &["cm"],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::ConfigMap>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::Secret>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        categories: &["all"],
        subresources: &[status("Service")],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Label,
        canonical: canonical::<core::Service>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        namespaced: true,
        short_names: &["ep"],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::Endpoints>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        categories: &[],
        // TokenRequest (serviceaccount module).
        subresources: &[Subresource {
            name: "token",
            kind: "TokenRequest",
            verbs: &["create"],
            group_version: Some(("authentication.k8s.io", "v1")),
        }],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::ServiceAccount>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        subresources: &[status("PersistentVolumeClaim")],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::PersistentVolumeClaim>,
        alias: None,
    },
    ResourceInfo {
        group: "",
        version: "v1",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        kind: "PersistentVolume",
        namespaced: false,
        short_names: &["pv"],
        categories: &[],
        subresources: &[status("PersistentVolume")],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<core::PersistentVolume>,
        alias: None,
    },
    ResourceInfo {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<coord::Lease>,
        alias: None,
    },
    ResourceInfo {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<k8s_openapi::api::events::v1::Event>,
        alias: Some(&super::events::EVENTS_V1),
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        subresources: &[status("Deployment"), scale()],
        has_status: true,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<apps::Deployment>,
        alias: None,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        subresources: &[status("ReplicaSet"), scale()],
        has_status: true,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<apps::ReplicaSet>,
        alias: None,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        plural: "statefulsets",
        singular: "statefulset",
        kind: "StatefulSet",
        namespaced: true,
        short_names: &["sts"],
        categories: &["all"],
        subresources: &[status("StatefulSet"), scale()],
        has_status: true,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<apps::StatefulSet>,
        alias: None,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        categories: &["all"],
        subresources: &[status("DaemonSet")],
        has_status: true,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<apps::DaemonSet>,
        alias: None,
    },
    ResourceInfo {
        group: "apps",
        version: "v1",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        kind: "ControllerRevision",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<apps::ControllerRevision>,
        alias: None,
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        plural: "jobs",
        singular: "job",
        kind: "Job",
        namespaced: true,
        short_names: &[],
        categories: &["all"],
        subresources: &[status("Job")],
        has_status: true,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<batch::Job>,
        alias: None,
    },
    ResourceInfo {
        group: "batch",
        version: "v1",
        plural: "cronjobs",
        singular: "cronjob",
        kind: "CronJob",
        namespaced: true,
        short_names: &["cj"],
        categories: &["all"],
        subresources: &[status("CronJob")],
        has_status: true,
        tracks_generation: true,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<batch::CronJob>,
        alias: None,
    },
    ResourceInfo {
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        singular: "endpointslice",
        kind: "EndpointSlice",
        namespaced: true,
        short_names: &[],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<discovery::EndpointSlice>,
        alias: None,
    },
    ResourceInfo {
        group: "storage.k8s.io",
        version: "v1",
        plural: "storageclasses",
        singular: "storageclass",
        kind: "StorageClass",
        namespaced: false,
        short_names: &["sc"],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: canonical::<storage::StorageClass>,
        alias: None,
    },
];

/// The resource served at `group`/`version`/`plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource of `kind` in `group`.
pub fn by_kind(group: &str, kind: &str) -> Option<&'static ResourceInfo> {
    RESOURCES.iter().find(|r| r.group == group && r.kind == kind)
}

/// The served API groups (not core) with their one version, in discovery order.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}
