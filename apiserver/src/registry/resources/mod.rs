//! The table of served kinds: names, scope, discovery data, and how each kind is decoded.
//!
//! k8s-openapi carries no registry of types; this table is ours. Every built-in object gets its
//! canonical form on each write ([`canonical`]: as k8s-openapi's type would read and write it back), which
//! rejects values of the wrong JSON type and makes the stored object carry every field the OpenAPI schema
//! requires (the Python client insists on them).

use serde_json::Value;

use super::validation::NameRule;

mod builtin;
pub mod canonical;

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
    /// How an object of the kind gets its stored form.
    pub canonical: Canonical,
    /// The typed round trip of the kind, which the schema walk is tested against.
    #[cfg(test)]
    pub typed: fn(&Value) -> Result<Value, String>,
    /// The verbs, when not every verb is served (`bindings`: create; `componentstatuses`: get, list).
    pub only_verbs: Option<&'static [&'static str]>,
    /// Another version of the same objects this resource is stored as (events.k8s.io/v1 events are
    /// core/v1 events in storage, as upstream), with the conversions.
    pub alias: Option<&'static Alias>,
}

/// How an object gets its canonical (stored) form.
#[derive(Debug, Clone, Copy)]
pub enum Canonical {
    /// Walked from the kind's schema in `components.json` ([`canonical`]).
    Schema,
    /// By this function: the typed round trip (CustomResourceDefinitions, whose `JSONSchemaProps` unions
    /// the walk does not model) or a custom resource's own rules.
    Function(fn(&Value) -> Result<Value, String>),
}

impl ResourceInfo {
    /// The canonical form of `v`, an object of this resource: what is stored and returned.
    pub fn canonical_form(&self, v: &Value) -> Result<Value, String> {
        match self.canonical {
            Canonical::Schema => canonical::canonical(self.group, self.version, self.kind, v),
            Canonical::Function(f) => f(v),
        }
    }
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
        if let Some(verbs) = self.only_verbs {
            verbs
        } else if self.plural == "namespaces" {
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

/// The typed round trip: read as the k8s-openapi type and written back.
pub(crate) fn canonical<T: serde::de::DeserializeOwned + serde::Serialize>(
    v: &Value,
) -> Result<Value, String> {
    let typed = T::deserialize(v).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

pub(crate) const CRUD_STATUS: &[&str] = &["get", "patch", "update"];

pub(crate) const fn scale() -> Subresource {
    Subresource {
        name: "scale",
        kind: "Scale",
        verbs: CRUD_STATUS,
        group_version: Some(("autoscaling", "v1")),
    }
}

pub(crate) const fn status(kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        kind,
        verbs: CRUD_STATUS,
        group_version: None,
    }
}

/// Whether a k8s-openapi scope type is namespaced.
pub trait Scope {
    /// `true` for namespaced kinds.
    const NAMESPACED: bool;
}

impl Scope for k8s_openapi::NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for k8s_openapi::ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// The entry of a k8s-openapi kind with upstream's defaults: group, version, kind, plural and scope from
/// the type, singular = lower-case kind, no short names, categories or subresources, names as DNS
/// subdomains, no status split. The builder methods below set the rest.
pub const fn kind<T>(singular: &'static str) -> ResourceInfo
where
    T: k8s_openapi::Resource + serde::de::DeserializeOwned + serde::Serialize,
    T::Scope: Scope,
{
    ResourceInfo {
        group: T::GROUP,
        version: T::VERSION,
        plural: T::URL_PATH_SEGMENT,
        singular,
        kind: T::KIND,
        namespaced: <T::Scope as Scope>::NAMESPACED,
        short_names: &[],
        categories: &[],
        subresources: &[],
        has_status: false,
        tracks_generation: false,
        name_rule: NameRule::Subdomain,
        canonical: Canonical::Schema,
        #[cfg(test)]
        typed: canonical::<T>,
        only_verbs: None,
        alias: None,
    }
}

impl ResourceInfo {
    /// kubectl short names.
    pub const fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }

    /// Categories (`all`, `api-extensions`).
    pub const fn categories(mut self, categories: &'static [&'static str]) -> Self {
        self.categories = categories;
        self
    }

    /// Subresources served.
    pub const fn subresources(mut self, subresources: &'static [Subresource]) -> Self {
        self.subresources = subresources;
        self
    }

    /// `status` is written only through the `status` subresource (which the caller lists).
    pub const fn status_split(mut self) -> Self {
        self.has_status = true;
        self
    }

    /// `metadata.generation` follows spec changes.
    pub const fn generation(mut self) -> Self {
        self.tracks_generation = true;
        self
    }

    /// Only these verbs are served.
    pub const fn verbs_only(mut self, verbs: &'static [&'static str]) -> Self {
        self.only_verbs = Some(verbs);
        self
    }

    /// Served as another resource's objects, converted (autoscaling/v1 HPAs are autoscaling/v2's).
    pub const fn stored_as(mut self, alias: &'static Alias) -> Self {
        self.alias = Some(alias);
        self
    }

    /// Canonical forms by the typed round trip instead of the schema walk.
    pub const fn typed_round_trip(mut self, f: fn(&Value) -> Result<Value, String>) -> Self {
        self.canonical = Canonical::Function(f);
        self
    }

    /// Whether a verb is served.
    pub fn serves(&self, verb: &str) -> bool {
        self.verbs().contains(&verb)
    }

    /// The rule `metadata.name` follows.
    pub const fn names(mut self, rule: NameRule) -> Self {
        self.name_rule = rule;
        self
    }
}

/// Every served resource: the built-in ones, then those added at run time.
pub fn all() -> Vec<&'static ResourceInfo> {
    let mut out: Vec<&'static ResourceInfo> = builtin::BUILTIN.iter().collect();
    out.extend(crate::crd::served());
    out
}

/// The built-in resources only (CRD names may not take theirs).
pub fn builtin() -> impl Iterator<Item = &'static ResourceInfo> {
    builtin::BUILTIN.iter()
}

/// The resource served at `group`/`version`/`plural`. The built-in table first, without collecting
/// [`all`] (a lookup on every write: it was 1.4 % of the API server's CPU under serial pod creates).
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    let hit = |r: &&'static ResourceInfo| r.plural == plural && r.group == group && r.version == version;
    builtin::BUILTIN
        .iter()
        .find(hit)
        .or_else(|| crate::crd::served().into_iter().find(hit))
}

/// The resource of `kind` in `group` (its preferred version when several are served).
pub fn by_kind(group: &str, kind: &str) -> Option<&'static ResourceInfo> {
    let hit = |r: &&'static ResourceInfo| r.kind == kind && r.group == group;
    builtin::BUILTIN
        .iter()
        .find(hit)
        .or_else(|| crate::crd::served().into_iter().find(hit))
}

/// The served API groups (not core) with their versions, preferred first, in discovery order.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in all() {
        if r.group.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

/// Every served group-version pair (not core), preferred versions first.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    groups()
        .into_iter()
        .flat_map(|(g, vs)| vs.into_iter().map(move |v| (g, v)))
        .collect()
}
