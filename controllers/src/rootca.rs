//! The root CA publisher (`pkg/controller/certificates/rootcacertpublisher`): every Active namespace has
//! the ConfigMap `kube-root-ca.crt` holding the CA that signed the API server's certificate, which pods'
//! `kube-api-access-*` volumes project as `ca.crt`. It is recreated when deleted and repaired when edited.

use std::collections::BTreeMap;
use std::sync::Arc;

use client::watch::Selector;
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};

/// The ConfigMap's name.
pub const NAME: &str = "kube-root-ca.crt";
/// Its key.
pub const KEY: &str = "ca.crt";
/// Upstream's `kubernetes.io/description` annotation value.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using \
internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed \
across distributions of Kubernetes clusters.";

/// What to write for namespace `ns` given the ConfigMap found (pure): `None` when it is right.
pub fn desired(ns: &str, current: Option<&ConfigMap>, ca: &str) -> Option<ConfigMap> {
    let data = BTreeMap::from([(KEY.to_string(), ca.to_string())]);
    let annotation = ("kubernetes.io/description".to_string(), DESCRIPTION.to_string());
    match current {
        None => Some(ConfigMap {
            metadata: ObjectMeta {
                name: Some(NAME.into()),
                namespace: Some(ns.to_string()),
                annotations: Some(BTreeMap::from([annotation])),
                ..Default::default()
            },
            data: Some(data),
            ..Default::default()
        }),
        Some(cm) => {
            let right_data = cm.data.as_ref() == Some(&data) && cm.binary_data.is_none();
            let right_note = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(&annotation.0))
                == Some(&annotation.1);
            if right_data && right_note {
                return None;
            }
            let mut fixed = cm.clone();
            fixed.data = Some(data);
            fixed.binary_data = None;
            fixed
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(annotation.0, annotation.1);
            Some(fixed)
        }
    }
}

struct Publisher {
    client: kube::Client,
    ca: String,
    namespaces: Arc<Informer<Namespace>>,
    maps: Arc<Informer<ConfigMap>>,
}

#[async_trait::async_trait]
impl Reconciler for Publisher {
    async fn sync(&self, ns: &str) -> Result<Option<std::time::Duration>, Error> {
        let Some(namespace) = self.namespaces.get(ns) else {
            return Ok(None);
        };
        if namespace.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let current = self.maps.get_in(ns, NAME);
        let Some(want) = desired(ns, current.as_deref(), &self.ca) else {
            return Ok(None);
        };
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        let result = if current.is_some() {
            api.replace(NAME, &PostParams::default(), &want).await
        } else {
            api.create(&PostParams::default(), &want).await
        };
        match result {
            Ok(_) => Ok(None),
            Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("terminat") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// Start the publisher (`root-ca-cert-publisher`); does nothing without a CA.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    if ctx.config.root_ca_pem.is_empty() {
        tracing::warn!("no root CA known: kube-root-ca.crt ConfigMaps are not published");
        return Box::pin(async {});
    }
    let queue = WorkQueue::new("root-ca-cert-publisher");
    let namespaces = ctx.informers.get::<Namespace>();
    let maps = ctx.informers.filtered::<ConfigMap>(
        "root-ca",
        Selector::all().fields(&format!("metadata.name={NAME}")),
    );
    let q = queue.clone();
    namespaces.on_change(move |c| {
        if !matches!(c, Change::Deleted(_)) {
            q.add(c.object().metadata.name.clone().unwrap_or_default());
        }
    });
    let q = queue.clone();
    maps.on_change(move |c| {
        if !matches!(c, Change::Added(_)) {
            q.add(c.object().metadata.namespace.clone().unwrap_or_default());
        }
    });
    let r = Arc::new(Publisher {
        client: ctx.client.clone(),
        ca: ctx.config.root_ca_pem.clone(),
        namespaces,
        maps,
    });
    Box::pin(run_workers(ctx.informers.clone(), queue, 2, r, cancel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_map_is_created_repaired_and_left_alone_when_right() {
        let made = desired("a", None, "PEM").unwrap();
        assert_eq!(made.data.as_ref().unwrap()[KEY], "PEM");
        assert_eq!(
            made.metadata.annotations.as_ref().unwrap()["kubernetes.io/description"],
            DESCRIPTION
        );
        assert!(desired("a", Some(&made), "PEM").is_none());
        let mut blanked = made.clone();
        blanked.data = Some(BTreeMap::from([(KEY.to_string(), String::new())]));
        blanked.metadata.labels = Some(BTreeMap::from([("keep".to_string(), "me".to_string())]));
        let fixed = desired("a", Some(&blanked), "PEM").unwrap();
        assert_eq!(fixed.data.unwrap()[KEY], "PEM");
        assert_eq!(
            fixed.metadata.labels.unwrap()["keep"],
            "me",
            "other fields are kept"
        );
    }
}
