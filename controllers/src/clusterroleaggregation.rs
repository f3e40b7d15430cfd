//! The ClusterRole aggregation controller (`pkg/controller/clusterroleaggregation`): a ClusterRole with
//! an `aggregationRule` holds the union of the rules of every other ClusterRole its selectors match
//! (in name order, each distinct rule once), written by server-side apply as
//! `clusterrole-aggregation-controller`. Any ClusterRole change re-checks every aggregated role, so
//! chains (`view` → `edit` → `admin`) settle.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, Patch, PatchParams};
use tokio_util::sync::CancellationToken;

use crate::informer::Informer;
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};

/// The field manager of the controller's writes.
pub const FIELD_MANAGER: &str = "clusterrole-aggregation-controller";

/// The rules `role` should hold given every ClusterRole (pure); `None` when it has no aggregation
/// rule or already holds exactly them (an absent and an empty rule list are the same, as upstream's
/// semantic equality has it).
pub fn aggregated_rules(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Option<Vec<PolicyRule>> {
    let selectors = role
        .aggregation_rule
        .as_ref()?
        .cluster_role_selectors
        .as_deref()
        .unwrap_or_default();
    let mut sorted: Vec<&ClusterRole> = all.iter().map(|r| r.as_ref()).collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in selectors {
        for other in &sorted {
            if other.metadata.name == role.metadata.name
                || !crate::selector::matches(selector, other.metadata.labels.as_ref())
            {
                continue;
            }
            for r in other.rules.iter().flatten() {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    let current = role.rules.as_deref().unwrap_or_default();
    (rules != current).then_some(rules)
}

struct Aggregation {
    client: kube::Client,
    roles: Arc<Informer<ClusterRole>>,
}

#[async_trait::async_trait]
impl Reconciler for Aggregation {
    async fn sync(&self, name: &str) -> Result<Option<std::time::Duration>, Error> {
        let Some(role) = self.roles.get(name) else {
            return Ok(None);
        };
        let Some(rules) = aggregated_rules(&role, &self.roles.list()) else {
            return Ok(None);
        };
        let api: Api<ClusterRole> = Api::all(self.client.clone());
        let body = serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": rules,
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(name, &params, &Patch::Apply(&body)).await {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// Start the controller (`clusterrole-aggregation`).
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("clusterrole-aggregation");
    let roles = ctx.informers.get::<ClusterRole>();
    let q = queue.clone();
    let cache = Arc::downgrade(&roles);
    roles.on_change(move |_| {
        // upstream enqueueAll: every aggregated role may depend on the one that changed.
        if let Some(cache) = cache.upgrade() {
            for r in cache.list() {
                if r.aggregation_rule.is_some() {
                    q.add(r.metadata.name.clone().unwrap_or_default());
                }
            }
        }
    });
    let r = Arc::new(Aggregation {
        client: ctx.client.clone(),
        roles,
    });
    Box::pin(run_workers(ctx.informers.clone(), queue, 1, r, cancel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(v: serde_json::Value) -> Arc<ClusterRole> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn rule(resource: &str) -> serde_json::Value {
        json!({"apiGroups": [""], "resources": [resource], "verbs": ["get"]})
    }

    fn names(rules: &[PolicyRule]) -> Vec<String> {
        rules
            .iter()
            .map(|r| r.resources.as_ref().unwrap()[0].clone())
            .collect()
    }

    #[test]
    fn aggregated_role_gets_the_union_of_matching_roles_in_name_order() {
        let view = role(json!({"metadata": {"name": "view"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "view"}}]}}));
        let all = vec![
            view.clone(),
            role(
                json!({"metadata": {"name": "b", "labels": {"agg": "view"}}, "rules": [rule("pods"), rule("secrets")]}),
            ),
            role(
                json!({"metadata": {"name": "a", "labels": {"agg": "view"}}, "rules": [rule("configmaps"), rule("pods")]}),
            ),
            role(json!({"metadata": {"name": "c", "labels": {"agg": "edit"}}, "rules": [rule("nodes")]})),
        ];
        let rules = aggregated_rules(&view, &all).unwrap();
        assert_eq!(names(&rules), ["configmaps", "pods", "secrets"]);
        // Already holding them: nothing to write.
        let mut done = (*view).clone();
        done.rules = Some(rules);
        assert_eq!(aggregated_rules(&done, &all), None);
    }

    #[test]
    fn roles_without_aggregation_or_matches_are_left_alone() {
        let plain = role(json!({"metadata": {"name": "p"}, "rules": [rule("pods")]}));
        assert_eq!(aggregated_rules(&plain, std::slice::from_ref(&plain)), None);
        // Nothing matches: an empty rule list equals an absent one.
        let lonely = role(json!({"metadata": {"name": "l"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}));
        assert_eq!(aggregated_rules(&lonely, &[lonely.clone(), plain]), None);
        // A role that stops matching loses its rules.
        let mut stale = (*lonely).clone();
        stale.rules = Some(vec![serde_json::from_value(rule("pods")).unwrap()]);
        assert_eq!(aggregated_rules(&stale, &[lonely]), Some(vec![]));
    }

    #[test]
    fn an_aggregated_role_does_not_aggregate_itself() {
        let me = role(
            json!({"metadata": {"name": "me", "labels": {"agg": "me"}}, "rules": [rule("pods")],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "me"}}]}}),
        );
        assert_eq!(aggregated_rules(&me, std::slice::from_ref(&me)), Some(vec![]));
    }
}
