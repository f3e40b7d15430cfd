//! `rollback.go`: the deprecated `deprecated.deployment.rollback.to` annotation (extensions/v1beta1's
//! rollback subresource). `kubectl rollout undo` does not come here: it patches the template itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::util;

/// What a rollback does: the event, and the template and annotations to put on the Deployment (none when
/// it stays as it is). The rollback annotation is removed in every case.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    /// Warning (false) or Normal (true), the reason and the message.
    pub event: (bool, &'static str, String),
    /// The template (hash label removed) and annotations to set.
    pub change: Option<(PodTemplateSpec, BTreeMap<String, String>)>,
}

/// `rollback`: revision 0 means the previous one (`LastRevision`).
pub fn plan(d: &Deployment, all: &[Arc<ReplicaSet>], to: i64) -> Rollback {
    let to = if to == 0 {
        match util::last_revision(all) {
            0 => {
                return Rollback {
                    event: (
                        false,
                        "DeploymentRollbackRevisionNotFound",
                        "Unable to find last revision.".into(),
                    ),
                    change: None,
                };
            }
            r => r,
        }
    } else {
        to
    };
    let name = d.metadata.name.clone().unwrap_or_default();
    let Some(rs) = all.iter().find(|rs| util::revision(rs) == Some(to)) else {
        return Rollback {
            event: (
                false,
                "DeploymentRollbackRevisionNotFound",
                "Unable to find the revision to rollback to.".into(),
            ),
            change: None,
        };
    };
    let current = &d.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let mut template = util::rs_template(rs);
    if util::equal_ignore_hash(current, &template) {
        return Rollback {
            event: (
                false,
                "DeploymentRollbackTemplateUnchanged",
                format!("The rollback revision contains the same template as current deployment {name:?}"),
            ),
            change: None,
        };
    }
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(util::POD_TEMPLATE_HASH);
    }
    Rollback {
        event: (
            true,
            "DeploymentRollback",
            format!("Rolled back deployment {name:?} to revision {to}"),
        ),
        change: Some((template, util::annotations_for_rollback(d, rs))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deployment::tests::{deployment, rs};
    use serde_json::json;

    #[test]
    fn rollbacks_find_the_revision_or_say_why_not() {
        let d = deployment(
            json!({"metadata": {"annotations": {util::REVISION: "2", "kubernetes.io/change-cause": "now"}}}),
        );
        let old = Arc::new(rs(
            "web-1",
            0,
            json!({"metadata": {"annotations": {util::REVISION: "1", "kubernetes.io/change-cause": "then"}},
                   "spec": {"template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "1"}}, "spec": {"containers": [{"name": "c", "image": "i:0"}]}}}}),
        ));
        let cur = Arc::new(rs(
            "web-2",
            3,
            json!({"metadata": {"annotations": {util::REVISION: "2"}}}),
        ));
        let all = vec![old.clone(), cur.clone()];
        let r = plan(&d, &all, 0);
        assert_eq!(
            r.event,
            (
                true,
                "DeploymentRollback",
                "Rolled back deployment \"web\" to revision 1".into()
            )
        );
        let (t, a) = r.change.unwrap();
        assert!(
            !t.metadata
                .unwrap()
                .labels
                .unwrap()
                .contains_key("pod-template-hash")
        );
        assert_eq!(a["kubernetes.io/change-cause"], "then");
        assert_eq!(a[util::REVISION], "2", "skipped keys stay the Deployment's");
        assert_eq!(plan(&d, &all, 2).event.1, "DeploymentRollbackTemplateUnchanged");
        assert_eq!(
            plan(&d, &all, 9).event.2,
            "Unable to find the revision to rollback to."
        );
        assert_eq!(plan(&d, &[cur], 0).event.2, "Unable to find last revision.");
    }
}
