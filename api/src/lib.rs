//! Kubernetes API rules shared by the API server and the node agent: pod defaulting (the scheme defaults,
//! `SetDefaults_Pod` and what it contains, alone in [`pod::default_pod_scheme`] as the kubelet applies
//! them to static pods, and followed by the ServiceAccount, DefaultTolerationSeconds and Priority
//! admission defaults in [`pod::default_pod`]), pod validation (`ValidatePodCreate`, `ValidatePodUpdate`,
//! `ValidatePodEphemeralContainersUpdate`) and QoS class, the generic object checks (`ValidateObjectMeta`,
//! name and label formats, ConfigMap, Secret) and the [`FieldError`] type with upstream's messages; and
//! the TLS client setting both use to reach self-signed peers ([`tls`]); and CEL over JSON ([`cel`]), which
//! the CRD validation rules and `kubeling test`'s kuttl CEL assertions share.

pub mod cel;
pub mod duration;
mod field_error;
pub mod pod;
pub mod quota;
pub mod tls;
pub mod tree;
pub mod validation;

pub use field_error::FieldError;
