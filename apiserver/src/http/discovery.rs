//! Discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<g>[/<v>]`) and `/version`.
//!
//! `/api` and `/apis` answer in two forms, chosen by `Accept` (reference §1.4): the legacy `APIVersions` /
//! `APIGroupList`, and aggregated discovery (`apidiscovery.k8s.io/v2` or `v2beta1` `APIGroupDiscoveryList`,
//! which kubectl 1.32 asks for first), where one document holds every resource of every group and no
//! per-group-version requests follow. Both are built from the served-kinds table on each request, so kinds
//! added at run time show at once.

use serde_json::{Value, json};

use crate::registry::resources;

/// The Kubernetes version we speak: k8s-openapi's `v1_33` types, one minor from kubectl 1.32.
pub const KUBE_VERSION: &str = "v1.33.0";

/// `/version`: every field the Python `VersionInfo` model requires; gitVersion is semver.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": format!("{KUBE_VERSION}+kubeling-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `/api`
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// A group's document: its versions, the preferred (first) one first.
fn group_doc(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
}

/// Every group, served resources' and reviews', with its versions.
fn all_groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups = resources::groups();
    for (g, v) in super::reviews::groups() {
        match groups.iter_mut().find(|(name, _)| *name == g) {
            Some((_, versions)) if !versions.contains(&v) => versions.push(v),
            Some(_) => {}
            None => groups.push((g, vec![v])),
        }
    }
    groups
}

/// `/apis`
pub fn api_groups() -> Value {
    let groups: Vec<Value> = all_groups().into_iter().map(|(g, v)| group_doc(g, &v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, if served.
pub fn api_group(group: &str) -> Option<Value> {
    let (g, v) = all_groups().into_iter().find(|(g, _)| *g == group)?;
    let mut doc = group_doc(g, &v);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut list = Vec::new();
    for r in resources::all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut main = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs(),
        });
        if !r.short_names.is_empty() {
            main["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            main["categories"] = json!(r.categories);
        }
        list.push(main);
        for sub in r.subresources {
            let mut entry = json!({
                "name": format!("{}/{}", r.plural, sub.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": sub.kind,
                "verbs": sub.verbs,
            });
            if let Some((g, v)) = sub.group_version {
                entry["group"] = json!(g);
                entry["version"] = json!(v);
            }
            list.push(entry);
        }
    }
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}))
}

/// Which document a discovery request on `/api` or `/apis` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// `APIVersions` / `APIGroupList`.
    Legacy,
    /// `APIGroupDiscoveryList` of `apidiscovery.k8s.io/<version>` (`v2` or `v2beta1`).
    Aggregated(&'static str),
}

/// The first alternative of `Accept` we serve (client-go sends v2, v2beta1, then plain JSON).
pub fn negotiate(accept: Option<&str>) -> DiscoveryFormat {
    for alt in accept.unwrap_or("").split(',') {
        let mut parts = alt.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        if !matches!(media.as_str(), "application/json" | "application/*" | "*/*") {
            continue;
        }
        let (mut g, mut v, mut as_) = (None, None, None);
        for p in parts {
            match p.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                Some(("as", x)) => as_ = Some(x),
                _ => {}
            }
        }
        match (g, v, as_) {
            (None, None, None) => return DiscoveryFormat::Legacy,
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) => {
                return DiscoveryFormat::Aggregated("v2");
            }
            (Some("apidiscovery.k8s.io"), Some("v2beta1"), Some("APIGroupDiscoveryList")) => {
                return DiscoveryFormat::Aggregated("v2beta1");
            }
            _ => {}
        }
    }
    DiscoveryFormat::Legacy
}

/// The content type of an aggregated answer: client-go picks its decoder from it alone.
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// One version of a group in aggregated form, from its legacy `APIResourceList` entries: `a/b` entries
/// become subresources of `a`.
fn aggregated_version(group: &str, version: &str) -> Option<Value> {
    let mut entries: Vec<Value> = Vec::new();
    for doc in [
        resource_list(group, version),
        super::reviews::resource_list(group, version),
    ]
    .into_iter()
    .flatten()
    {
        entries.extend(doc["resources"].as_array().cloned().unwrap_or_default());
    }
    if entries.is_empty() {
        return None;
    }
    let kind_of = |e: &Value| {
        json!({
            "group": e.get("group").cloned().unwrap_or(json!(group)),
            "version": e.get("version").cloned().unwrap_or(json!(version)),
            "kind": e["kind"],
        })
    };
    let mut resources: Vec<Value> = Vec::new();
    for e in entries
        .iter()
        .filter(|e| !e["name"].as_str().unwrap_or("").contains('/'))
    {
        let mut r = json!({
            "resource": e["name"],
            "responseKind": kind_of(e),
            "scope": if e["namespaced"] == true { "Namespaced" } else { "Cluster" },
            "singularResource": e["singularName"],
            "verbs": e["verbs"],
        });
        for k in ["shortNames", "categories"] {
            if let Some(v) = e.get(k) {
                r[k] = v.clone();
            }
        }
        let prefix = format!("{}/", e["name"].as_str().unwrap_or(""));
        let subs: Vec<Value> = entries
            .iter()
            .filter_map(|s| {
                let sub = s["name"].as_str()?.strip_prefix(&prefix)?;
                Some(json!({"subresource": sub, "responseKind": kind_of(s), "verbs": s["verbs"]}))
            })
            .collect();
        if !subs.is_empty() {
            r["subresources"] = Value::Array(subs);
        }
        resources.push(r);
    }
    Some(json!({"version": version, "resources": resources, "freshness": "Current"}))
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList` of `apidiscovery.k8s.io/<version>`: each
/// group's versions with the preferred one first.
pub fn aggregated(core: bool, version: &str) -> Value {
    let groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        all_groups()
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions.iter().filter_map(|v| aggregated_version(g, v)).collect();
            let metadata = if g.is_empty() {
                json!({"creationTimestamp": null})
            } else {
                json!({"name": g, "creationTimestamp": null})
            };
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_is_chosen_as_client_go_asks() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(kubectl)), DiscoveryFormat::Aggregated("v2"));
        assert_eq!(
            negotiate(Some(
                "application/json;as=APIGroupDiscoveryList;v=v2beta1;g=apidiscovery.k8s.io"
            )),
            DiscoveryFormat::Aggregated("v2beta1")
        );
        assert_eq!(negotiate(Some("application/json")), DiscoveryFormat::Legacy);
        assert_eq!(negotiate(None), DiscoveryFormat::Legacy);
        assert_eq!(
            negotiate(Some(
                "application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList, */*"
            )),
            DiscoveryFormat::Legacy
        );
    }

    #[test]
    fn aggregated_core_group_has_pods_with_subresources_and_their_kinds() {
        let doc = aggregated(true, "v2");
        assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
        let items = doc["items"].as_array().unwrap();
        assert_eq!(items.len(), 1);
        let v1 = &items[0]["versions"][0];
        assert_eq!(
            (&v1["version"], &v1["freshness"]),
            (&json!("v1"), &json!("Current"))
        );
        let pods = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["singularResource"], "pod");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(
            pods["responseKind"],
            json!({"group": "", "version": "v1", "kind": "Pod"})
        );
        let status = pods["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "status")
            .unwrap();
        assert_eq!(status["responseKind"]["kind"], "Pod");
        let nodes = v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "nodes")
            .unwrap();
        assert_eq!(nodes["scope"], "Cluster");
    }

    #[test]
    fn aggregated_groups_list_every_served_resource_under_its_named_group() {
        let doc = aggregated(false, "v2");
        let items = doc["items"].as_array().unwrap();
        for r in resources::all().into_iter().filter(|r| !r.group.is_empty()) {
            let group = items
                .iter()
                .find(|i| i["metadata"]["name"] == r.group)
                .unwrap_or_else(|| panic!("{} missing", r.group));
            let found = group["versions"].as_array().unwrap().iter().any(|v| {
                v["version"] == r.version
                    && v["resources"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|x| x["resource"] == r.plural)
            });
            assert!(found, "{}/{} {}", r.group, r.version, r.plural);
        }
        // The scale subresource answers autoscaling/v1 Scale.
        let apps = items.iter().find(|i| i["metadata"]["name"] == "apps").unwrap();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        let scale = deploy["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(
            scale["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
    }

    #[test]
    fn core_resource_list_has_pods_with_short_names_categories_and_subresources() {
        let doc = resource_list("", "v1").unwrap();
        let res = doc["resources"].as_array().unwrap();
        let pods = res.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert_eq!(pods["singularName"], "pod");
        assert!(
            res.iter()
                .any(|r| r["name"] == "pods/status" && r["singularName"] == "")
        );
    }

    #[test]
    fn every_served_group_is_listed_with_a_preferred_version() {
        let doc = api_groups();
        let names: Vec<&str> = doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        for g in ["apps", "batch", "coordination.k8s.io", "events.k8s.io"] {
            assert!(names.contains(&g), "{g} missing from {names:?}");
            assert!(resource_list(g, "v1").is_some());
        }
    }

    #[test]
    fn version_is_semver_with_a_leading_v() {
        let v = version();
        let git = v["gitVersion"].as_str().unwrap();
        assert!(git.starts_with("v1.33."), "{git}");
        assert_eq!(v["minor"], "33");
    }
}
