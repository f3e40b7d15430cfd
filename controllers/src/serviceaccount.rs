//! The ServiceAccount controller (`pkg/controller/serviceaccount/serviceaccounts_controller.go`): every
//! Active namespace has a ServiceAccount `default`; deleting it brings it back. Nothing else (no token
//! Secrets: that ended in 1.24).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};

/// The ServiceAccount every namespace gets.
pub const DEFAULT: &str = "default";

/// Whether namespace `ns` needs its `default` ServiceAccount created (pure): Active and it is missing.
pub fn needs_default(ns: &Namespace, default_exists: bool) -> bool {
    let active = ns.metadata.deletion_timestamp.is_none()
        && ns
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Active")
            == "Active";
    active && !default_exists
}

struct ServiceAccounts {
    client: kube::Client,
    namespaces: Arc<Informer<Namespace>>,
    accounts: Arc<Informer<ServiceAccount>>,
}

#[async_trait::async_trait]
impl Reconciler for ServiceAccounts {
    async fn sync(&self, ns: &str) -> Result<Option<std::time::Duration>, Error> {
        let Some(namespace) = self.namespaces.get(ns) else {
            return Ok(None);
        };
        if !needs_default(&namespace, self.accounts.get_in(ns, DEFAULT).is_some()) {
            return Ok(None);
        }
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some(DEFAULT.into()),
                namespace: Some(ns.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), ns);
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => Ok(None),
            // Already there (the cache lags), or the namespace began terminating: nothing to do.
            Err(kube::Error::Api(s))
                if s.code == 409 || (s.code == 403 && s.message.contains("terminat")) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Start the controller (`serviceaccount`).
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("serviceaccount");
    let namespaces = ctx.informers.get::<Namespace>();
    let accounts = ctx.informers.get::<ServiceAccount>();
    let q = queue.clone();
    namespaces.on_change(move |c| {
        if !matches!(c, Change::Deleted(_)) {
            q.add(c.object().metadata.name.clone().unwrap_or_default());
        }
    });
    let q = queue.clone();
    accounts.on_change(move |c| {
        if let Change::Deleted(sa) = c
            && sa.metadata.name.as_deref() == Some(DEFAULT)
        {
            q.add(sa.metadata.namespace.clone().unwrap_or_default());
        }
    });
    let r = Arc::new(ServiceAccounts {
        client: ctx.client.clone(),
        namespaces,
        accounts,
    });
    Box::pin(run_workers(ctx.informers.clone(), queue, 2, r, cancel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ns(phase: &str, deleting: bool) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some("a".into()),
                deletion_timestamp: deleting.then(|| Time(jiff::Timestamp::now())),
                ..Default::default()
            },
            status: Some(NamespaceStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_active_namespaces_without_default_get_one() {
        assert!(needs_default(&ns("Active", false), false));
        assert!(!needs_default(&ns("Active", false), true));
        assert!(!needs_default(&ns("Terminating", false), false));
        assert!(!needs_default(&ns("Active", true), false));
    }
}
