//! Legacy discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<g>[/<v>]`) and `/version`.
//!
//! We answer aggregated-discovery requests with the legacy documents and a plain `application/json` content
//! type; kubectl 1.32 then falls back to per-group-version requests (reference §1.4).

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

#[cfg(test)]
mod tests {
    use super::*;

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
