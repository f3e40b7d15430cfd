//! The built-in kinds served, as data: one entry per resource.

use super::*;

use k8s_openapi::api::{
    admissionregistration::v1 as admission, autoscaling::v1 as autoscaling_v1,
    autoscaling::v2 as autoscaling_v2, certificates::v1 as certificates, flowcontrol::v1 as flowcontrol,
    networking::v1 as networking, node::v1 as node,
};
use k8s_openapi::api::{
    core::v1 as core, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
    storage::v1 as storage,
};
// Kinds written out in full below name their type only for the test of the schema walk.
#[cfg(test)]
use k8s_openapi::api::{
    apps::v1 as apps, batch::v1 as batch, coordination::v1 as coord, discovery::v1 as discovery,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;

/// Every served resource.
pub(super) static BUILTIN: &[ResourceInfo] = &[
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
            // Served by http/portforward (SPDY or the channel protocol), relayed through the node agent.
            Subresource {
                name: "portforward",
                kind: "PodPortForwardOptions",
                verbs: &["create", "get"],
                group_version: None,
            },
            // registry/eviction: a delete that honours PodDisruptionBudgets.
            Subresource {
                name: "eviction",
                kind: "Eviction",
                verbs: &["create"],
                group_version: Some(("policy", "v1")),
            },
            // Takes and returns a Pod, of which it changes spec.ephemeralContainers (pod_strategy).
            Subresource {
                name: crate::registry::pod_strategy::EPHEMERAL_CONTAINERS,
                kind: "Pod",
                verbs: CRUD_STATUS,
                group_version: None,
            },
        ],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Pod>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Node>,
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
        subresources: &[
            status("Namespace"),
            Subresource {
                name: "finalize",
                kind: "Namespace",
                verbs: &["update"],
                group_version: None,
            },
        ],
        has_status: true,
        tracks_generation: false,
        name_rule: NameRule::Label,
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Namespace>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Event>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::ConfigMap>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Secret>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Service>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::Endpoints>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::ServiceAccount>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::PersistentVolumeClaim>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<core::PersistentVolume>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<coord::Lease>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<k8s_openapi::api::events::v1::Event>,
        alias: Some(&crate::registry::events::EVENTS_V1),
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<apps::Deployment>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<apps::ReplicaSet>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<apps::StatefulSet>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<apps::DaemonSet>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<apps::ControllerRevision>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<batch::Job>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<batch::CronJob>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<discovery::EndpointSlice>,
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
        only_verbs: None,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<storage::StorageClass>,
        alias: None,
    },
    // ---- every other built-in kind of v1.33 (GA groups), from its k8s-openapi type ----
    kind::<core::PodTemplate>("podtemplate"),
    kind::<core::Binding>("binding").verbs_only(&["create"]),
    kind::<core::ComponentStatus>("componentstatus")
        .short(&["cs"])
        .verbs_only(&["get", "list"]),
    kind::<networking::Ingress>("ingress")
        .short(&["ing"])
        .subresources(&[status("Ingress")])
        .status_split()
        .generation(),
    kind::<networking::IngressClass>("ingressclass"),
    kind::<networking::NetworkPolicy>("networkpolicy")
        .short(&["netpol"])
        .generation(),
    kind::<networking::ServiceCIDR>("servicecidr")
        .subresources(&[status("ServiceCIDR")])
        .status_split(),
    kind::<networking::IPAddress>("ipaddress").short(&["ip"]),
    kind::<autoscaling_v2::HorizontalPodAutoscaler>("horizontalpodautoscaler")
        .short(&["hpa"])
        .categories(&["all"])
        .subresources(&[status("HorizontalPodAutoscaler")])
        .status_split(),
    kind::<autoscaling_v1::HorizontalPodAutoscaler>("horizontalpodautoscaler")
        .short(&["hpa"])
        .categories(&["all"])
        .subresources(&[status("HorizontalPodAutoscaler")])
        .status_split()
        .stored_as(&crate::registry::builtin_kinds::HPA_V1),
    kind::<scheduling::PriorityClass>("priorityclass").short(&["pc"]),
    kind::<node::RuntimeClass>("runtimeclass").names(NameRule::Subdomain),
    kind::<certificates::CertificateSigningRequest>("certificatesigningrequest")
        .short(&["csr"])
        .subresources(&[
            status("CertificateSigningRequest"),
            Subresource {
                name: "approval",
                kind: "CertificateSigningRequest",
                verbs: CRUD_STATUS,
                group_version: None,
            },
        ])
        .status_split(),
    kind::<storage::CSIDriver>("csidriver"),
    kind::<storage::CSINode>("csinode"),
    kind::<storage::CSIStorageCapacity>("csistoragecapacity"),
    kind::<storage::VolumeAttachment>("volumeattachment")
        .subresources(&[status("VolumeAttachment")])
        .status_split(),
    kind::<admission::MutatingWebhookConfiguration>("mutatingwebhookconfiguration")
        .categories(&["api-extensions"]),
    kind::<admission::ValidatingWebhookConfiguration>("validatingwebhookconfiguration")
        .categories(&["api-extensions"]),
    kind::<admission::ValidatingAdmissionPolicy>("validatingadmissionpolicy")
        .categories(&["api-extensions"])
        .subresources(&[status("ValidatingAdmissionPolicy")])
        .status_split()
        .generation(),
    kind::<admission::ValidatingAdmissionPolicyBinding>("validatingadmissionpolicybinding")
        .categories(&["api-extensions"]),
    kind::<apiregistration::APIService>("apiservice")
        .names(NameRule::PathSegment)
        .categories(&["api-extensions"])
        .subresources(&[status("APIService")])
        .status_split(),
    kind::<flowcontrol::FlowSchema>("flowschema")
        .subresources(&[status("FlowSchema")])
        .status_split(),
    kind::<flowcontrol::PriorityLevelConfiguration>("prioritylevelconfiguration")
        .subresources(&[status("PriorityLevelConfiguration")])
        .status_split(),
    kind::<apiextensions::CustomResourceDefinition>("customresourcedefinition")
        .short(&["crd", "crds"])
        .categories(&["api-extensions"])
        .subresources(&[status("CustomResourceDefinition")])
        .status_split()
        .generation()
        .typed_round_trip(canonical::<apiextensions::CustomResourceDefinition>),
    // ---- rbac.authorization.k8s.io/v1 (names are path segments, as upstream) ----
    kind::<rbac::Role>("role").names(NameRule::PathSegment),
    kind::<rbac::RoleBinding>("rolebinding").names(NameRule::PathSegment),
    kind::<rbac::ClusterRole>("clusterrole").names(NameRule::PathSegment),
    kind::<rbac::ClusterRoleBinding>("clusterrolebinding").names(NameRule::PathSegment),
    // ---- the kinds of the controller manager's policy controllers (replication, disruption, quota) ----
    kind::<core::ReplicationController>("replicationcontroller")
        .short(&["rc"])
        .categories(&["all"])
        .subresources(&[status("ReplicationController"), scale()])
        .status_split()
        .generation(),
    kind::<policy::PodDisruptionBudget>("poddisruptionbudget")
        .short(&["pdb"])
        .subresources(&[status("PodDisruptionBudget")])
        .status_split()
        .generation(),
    kind::<core::ResourceQuota>("resourcequota")
        .short(&["quota"])
        .subresources(&[status("ResourceQuota")])
        .status_split(),
    kind::<core::LimitRange>("limitrange").short(&["limits"]),
];
