//! The component schemas of the built-in kinds, kept as data.
//!
//! `components.json` holds k8s-openapi's schemas of every built-in kind we describe (and of everything
//! they reference), generated with schemars' OpenAPI 3 settings, and the component name of each kind by
//! group/version/kind. Generating them in the server compiled schemars' impls for the whole API into
//! the release build, most of a minute of a new user's first build; the data is the same output,
//! generated once. The test `committed_components_are_k8s_openapi_s` regenerates it from k8s-openapi
//! (a dev-dependency with its `schemars` feature) and fails when the file differs, so the data follows
//! a k8s-openapi upgrade; `KUBELING_WRITE_COMPONENTS=1` rewrites the file.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The components of `metav1` the documents name directly.
pub(super) const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(super) const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

const DATA: &str = include_str!("components.json");

/// The file itself: the registry walks these schemas for the canonical form of an object
/// (registry/resources/canonical.rs).
pub(crate) fn components_json() -> &'static str {
    DATA
}

#[derive(Deserialize)]
struct Components {
    /// `group/version/Kind` (`/v1/Pod` for core) -> component name.
    kinds: BTreeMap<String, String>,
    /// Component name -> schema.
    schemas: Map<String, Value>,
}

fn components() -> &'static Components {
    static DATA_PARSED: OnceLock<Components> = OnceLock::new();
    DATA_PARSED.get_or_init(|| serde_json::from_str(DATA).expect("components.json is checked by its test"))
}

fn kind_key(group: &str, version: &str, kind: &str) -> String {
    format!("{group}/{version}/{kind}")
}

/// The component name of a built-in kind's schema, when k8s-openapi has the kind.
pub(super) fn kind_schema(group: &str, version: &str, kind: &str) -> Option<&'static str> {
    components()
        .kinds
        .get(&kind_key(group, version, kind))
        .map(String::as_str)
}

/// The named components and every component they reference, transitively.
pub(super) fn closure(roots: &BTreeSet<String>) -> Map<String, Value> {
    let all = &components().schemas;
    let mut out = Map::new();
    let mut todo: Vec<&str> = roots.iter().map(String::as_str).collect();
    while let Some(name) = todo.pop() {
        if out.contains_key(name) {
            continue;
        }
        let Some(schema) = all.get(name) else {
            continue;
        };
        refs(schema, &mut todo);
        out.insert(name.to_string(), schema.clone());
    }
    out
}

/// The component names a schema's `$ref`s point at.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    let mut all = Vec::new();
    super::collect_refs(v, &mut all);
    out.extend(
        all.into_iter()
            .filter_map(|r| r.strip_prefix("#/components/schemas/")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authentication,
        authorization::v1 as authorization, autoscaling::v1 as autoscaling_v1,
        autoscaling::v2 as autoscaling_v2, batch::v1 as batch, certificates::v1 as certificates,
        coordination::v1 as coord, core::v1 as core, discovery::v1 as discovery, events::v1 as events,
        flowcontrol::v1 as flowcontrol, networking::v1 as networking, node::v1 as node, policy::v1 as policy,
        rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    use k8s_openapi::schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};

    /// Registers a kind's schema; its key in `kinds`.
    fn kind<T: k8s_openapi::Resource + JsonSchema>(
        g: &mut SchemaGenerator,
        kinds: &mut BTreeMap<String, String>,
    ) {
        let _ = g.subschema_for::<T>();
        kinds.insert(
            kind_key(T::GROUP, T::VERSION, T::KIND),
            T::schema_name().into_owned(),
        );
    }

    /// What `components.json` holds, generated from k8s-openapi: the kinds of the served resources,
    /// the kinds their subresources and the review endpoints take, and the `metav1` kinds the documents
    /// name. The test `every_served_kind_has_a_component_schema_with_its_gvk_array` catches a served
    /// kind missing here.
    fn generate() -> Value {
        let mut g = SchemaSettings::openapi3().into_generator();
        let mut k = BTreeMap::new();
        macro_rules! kinds {
            ($($t:ty),* $(,)?) => { $( kind::<$t>(&mut g, &mut k); )* };
        }
        kinds![
            core::Pod,
            core::Binding,
            core::Node,
            core::Namespace,
            core::Event,
            core::ConfigMap,
            core::Secret,
            core::Service,
            core::Endpoints,
            core::ServiceAccount,
            core::PersistentVolumeClaim,
            core::PersistentVolume,
            core::PodTemplate,
            core::ComponentStatus,
            core::LimitRange,
            core::ReplicationController,
            core::ResourceQuota,
            coord::Lease,
            events::Event,
            apps::Deployment,
            apps::ReplicaSet,
            apps::StatefulSet,
            apps::DaemonSet,
            apps::ControllerRevision,
            batch::Job,
            batch::CronJob,
            discovery::EndpointSlice,
            storage::StorageClass,
            storage::CSIDriver,
            storage::CSINode,
            storage::CSIStorageCapacity,
            storage::VolumeAttachment,
            autoscaling_v1::Scale,
            autoscaling_v1::HorizontalPodAutoscaler,
            autoscaling_v2::HorizontalPodAutoscaler,
            admission::MutatingWebhookConfiguration,
            admission::ValidatingWebhookConfiguration,
            admission::ValidatingAdmissionPolicy,
            admission::ValidatingAdmissionPolicyBinding,
            apiextensions::CustomResourceDefinition,
            apiregistration::APIService,
            authentication::SelfSubjectReview,
            authentication::TokenReview,
            authorization::LocalSubjectAccessReview,
            authorization::SelfSubjectAccessReview,
            authorization::SelfSubjectRulesReview,
            authorization::SubjectAccessReview,
            certificates::CertificateSigningRequest,
            flowcontrol::FlowSchema,
            flowcontrol::PriorityLevelConfiguration,
            networking::IPAddress,
            networking::Ingress,
            networking::IngressClass,
            networking::NetworkPolicy,
            networking::ServiceCIDR,
            node::RuntimeClass,
            policy::PodDisruptionBudget,
            rbac::ClusterRole,
            rbac::ClusterRoleBinding,
            rbac::Role,
            rbac::RoleBinding,
            scheduling::PriorityClass,
        ];
        for (name, schema) in [
            (OBJECT_META, g.subschema_for::<meta::ObjectMeta>()),
            (LIST_META, g.subschema_for::<meta::ListMeta>()),
            (PATCH, g.subschema_for::<meta::Patch>()),
            (STATUS, g.subschema_for::<meta::Status>()),
            (DELETE_OPTIONS, g.subschema_for::<meta::DeleteOptions>()),
        ] {
            let reference = format!("#/components/schemas/{name}");
            assert_eq!(schema.get("$ref"), Some(&Value::String(reference)), "{name}");
        }
        let schemas = g.take_definitions(true);
        serde_json::json!({"kinds": k, "schemas": schemas})
    }

    #[test]
    fn committed_components_are_k8s_openapi_s() {
        let generated = generate();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/http/openapi/components.json");
        if std::env::var_os("KUBELING_WRITE_COMPONENTS").is_some() {
            let text = serde_json::to_string_pretty(&generated).expect("JSON serialises");
            std::fs::write(path, text + "\n").expect("write components.json");
        }
        let committed: Value = serde_json::from_str(DATA).expect("components.json parses");
        assert!(
            committed == generated,
            "{path} differs from k8s-openapi's schemas: rerun this test with KUBELING_WRITE_COMPONENTS=1"
        );
    }

    #[test]
    fn closure_takes_every_referenced_component_and_no_other() {
        let roots: BTreeSet<String> =
            [kind_schema("", "v1", "ConfigMap").expect("ConfigMap").to_string()].into();
        let got = closure(&roots);
        let names: Vec<&str> = got.keys().map(String::as_str).collect();
        assert!(names.contains(&"io.k8s.api.core.v1.ConfigMap"), "{names:?}");
        assert!(names.contains(&OBJECT_META), "{names:?}");
        // ObjectMeta references ManagedFieldsEntry, which references FieldsV1 and Time.
        assert!(
            names.contains(&"io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"),
            "{names:?}"
        );
        assert!(!names.contains(&"io.k8s.api.core.v1.Pod"), "{names:?}");
        let mut refs_seen = Vec::new();
        got.values().for_each(|s| refs(s, &mut refs_seen));
        for r in refs_seen {
            assert!(got.contains_key(r), "{r} referenced but not taken");
        }
    }

    #[test]
    fn unknown_kinds_have_no_schema() {
        assert_eq!(kind_schema("example.com", "v1", "Widget"), None);
        assert_eq!(kind_schema("", "v1", "Pod"), Some("io.k8s.api.core.v1.Pod"));
    }
}
