//! What the API server serves, found through discovery (client-go's `ServerPreferredResources` and
//! `ServerPreferredNamespacedResources`): the controllers that act on every kind — the garbage collector
//! and the namespace controller — need it, since they cannot know the kinds in advance.
//!
//! A group whose discovery fails is reported, not fatal: the rest is still usable (upstream's
//! `ErrGroupDiscoveryFailed`).

use kube::core::discovery::{ApiResource, Scope};
use kube::discovery::{ApiGroup, Discovery};

/// One resource at one version.
#[derive(Debug, Clone)]
pub struct ServedResource {
    /// Group, version, kind, plural.
    pub ar: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// The verbs discovery lists.
    pub verbs: Vec<String>,
    /// Whether this is the group's preferred version.
    pub preferred: bool,
}

impl ServedResource {
    /// Whether every one of `verbs` is served.
    pub fn supports(&self, verbs: &[&str]) -> bool {
        verbs.iter().all(|v| self.verbs.iter().any(|have| have == v))
    }

    /// `resource.group`, as upstream names a GroupResource (`pods.`, `deployments.apps`).
    pub fn group_resource(&self) -> String {
        format!("{}.{}", self.ar.plural, self.ar.group)
    }

    /// `group/version, Resource=plural`, as Go prints a GroupVersionResource.
    pub fn gvr_string(&self) -> String {
        format!(
            "{}/{}, Resource={}",
            self.ar.group, self.ar.version, self.ar.plural
        )
    }
}

/// The outcome of one discovery.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Every resource of every version of every group that answered.
    pub resources: Vec<ServedResource>,
    /// Groups that did not answer, with the error.
    pub failed: Vec<(String, String)>,
}

impl Served {
    /// The preferred version of each resource.
    pub fn preferred(&self) -> impl Iterator<Item = &ServedResource> {
        self.resources.iter().filter(|r| r.preferred)
    }

    /// The resource of `kind` at `api_version` (any served version, as an ownerReference may name one).
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&ServedResource> {
        self.resources
            .iter()
            .find(|r| r.ar.api_version == api_version && r.ar.kind == kind)
    }

    /// Upstream's message for failed groups: `Discovery failed for some groups, N failing: ...`.
    pub fn failure_message(&self) -> Option<String> {
        if self.failed.is_empty() {
            return None;
        }
        let groups: Vec<String> = self.failed.iter().map(|(g, e)| format!("{g}: {e}")).collect();
        Some(format!(
            "Discovery failed for some groups, {} failing: unable to retrieve the complete list of server APIs: {}",
            self.failed.len(),
            groups.join(", ")
        ))
    }

    fn add_group(&mut self, g: &ApiGroup) {
        let preferred = g.preferred_version_or_latest().to_string();
        for version in g.versions() {
            for (ar, caps) in g.versioned_resources(version) {
                self.resources.push(ServedResource {
                    namespaced: caps.scope == Scope::Namespaced,
                    verbs: caps.operations.clone(),
                    preferred: version == preferred,
                    ar,
                });
            }
        }
    }
}

/// Discover everything; a failing group is listed in [`Served::failed`]. Fails only if the group list
/// itself cannot be read.
pub async fn discover(client: &kube::Client) -> Result<Served, kube::Error> {
    let mut served = Served::default();
    match Discovery::new(client.clone()).run().await {
        Ok(d) => {
            for g in d.groups() {
                served.add_group(g);
            }
        }
        Err(_) => {
            // One group failed somewhere: ask each on its own to tell which.
            let mut names = vec![ApiGroup::CORE_GROUP.to_string()];
            names.extend(client.list_api_groups().await?.groups.into_iter().map(|g| g.name));
            for name in names {
                match Discovery::new(client.clone()).filter(&[&name]).run().await {
                    Ok(d) => d.groups().for_each(|g| served.add_group(g)),
                    Err(e) => served.failed.push((name, e.to_string())),
                }
            }
        }
    }
    Ok(served)
}
