//! Creating and deleting pods for a controller (`controller.RealPodControl`, `GetPodFromTemplate`,
//! `slowStartBatch`), with upstream's events on the owner.

use std::future::Future;
use std::sync::Arc;

use client::events::{EventType, Recorder};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

/// `controller.SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH: usize = 1;
/// `BurstReplicas` / `MaxPodCreateDeletePerSync`: creates or deletes per sync.
pub const BURST_REPLICAS: usize = 500;

/// The pod a controller creates from `template` (labels, annotations, finalizers and spec copied; the
/// controller reference; `generateName <owner>-`).
pub fn pod_from_template(template: &PodTemplateSpec, namespace: &str, owner: &OwnerReference) -> Pod {
    let tm = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace.to_string()),
            generate_name: Some(generate_name_prefix(&owner.name)),
            labels: tm.labels,
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// `<owner>-`, or the bare owner name when that would be too long for a generated name (upstream
/// `getPodsPrefix` checks validity; 63 characters is the name limit the API server enforces).
pub fn generate_name_prefix(owner: &str) -> String {
    let prefix = format!("{owner}-");
    if prefix.len() > 58 {
        owner.to_string()
    } else {
        prefix
    }
}

/// The reference events about an owner carry.
pub fn object_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> ObjectReference {
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.to_string()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    }
}

/// True when the API server refused because the namespace is being deleted (no event then, as upstream).
pub fn is_namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 && s.message.contains("being terminated"))
}

/// Creates and deletes pods for one controller, recording events on its objects.
#[derive(Clone)]
pub struct PodControl {
    client: kube::Client,
    recorder: Arc<Recorder>,
}

impl PodControl {
    /// Pod control for the component `recorder` writes as.
    pub fn new(client: kube::Client, recorder: Arc<Recorder>) -> PodControl {
        PodControl { client, recorder }
    }

    /// The recorder.
    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    /// Create `pod`; `SuccessfulCreate 'Created pod: X'` or Warning `FailedCreate 'Error creating: E'`.
    pub async fn create(&self, pod: &Pod, owner: &ObjectReference) -> Result<Pod, kube::Error> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match api.create(&PostParams::default(), pod).await {
            Ok(created) => {
                let name = created.metadata.name.clone().unwrap_or_default();
                self.recorder.emit(
                    owner.clone(),
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created pod: {name}"),
                );
                Ok(created)
            }
            Err(e) => {
                if !is_namespace_terminating(&e) {
                    self.recorder.emit(
                        owner.clone(),
                        EventType::Warning,
                        "FailedCreate",
                        format!("Error creating: {}", api_message(&e)),
                    );
                }
                Err(e)
            }
        }
    }

    /// Delete the pod `ns/name` (with its UID as precondition when given); a 404 is returned as an error
    /// but records no event (upstream lowers the expectation for it too). `SuccessfulDelete 'Deleted pod: X'` or Warning `FailedDelete 'Error deleting: E'`.
    pub async fn delete(
        &self,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        owner: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let dp = DeleteParams {
            preconditions: uid.map(|u| Preconditions {
                uid: Some(u.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => {
                self.recorder.emit(
                    owner.clone(),
                    EventType::Normal,
                    "SuccessfulDelete",
                    format!("Deleted pod: {name}"),
                );
                Ok(())
            }
            // Already gone: no event; the caller lowers its deletion expectation as for a failure (the
            // informer may have shown the delete before the expectation was recorded) and syncs again.
            Err(kube::Error::Api(s)) if s.code == 404 => Err(kube::Error::Api(s)),
            Err(e) => {
                self.recorder.emit(
                    owner.clone(),
                    EventType::Warning,
                    "FailedDelete",
                    format!("Error deleting: {}", api_message(&e)),
                );
                Err(e)
            }
        }
    }
}

/// The message of an API error as upstream events show it.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// `slowStartBatch`: run `count` calls in batches of 1, 2, 4, … (all of a batch at once); the first batch
/// with an error stops the rest. Returns how many succeeded and the first error.
pub async fn slow_start_batch<F, Fut, E>(count: usize, f: F) -> (usize, Option<E>)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut done = 0;
    let mut batch = SLOW_START_INITIAL_BATCH.min(count);
    while batch > 0 {
        let results = futures_util::future::join_all((done..done + batch).map(&f)).await;
        let mut first_err = None;
        let mut ok = 0;
        for r in results {
            match r {
                Ok(()) => ok += 1,
                Err(e) if first_err.is_none() => first_err = Some(e),
                Err(_) => {}
            }
        }
        done += batch;
        if let Some(e) = first_err {
            return (done - batch + ok, Some(e));
        }
        batch = (2 * batch).min(count - done);
    }
    (done, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn slow_start_grows_batches_and_stops_at_the_first_failing_batch() {
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(10, |_| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), ()>(()) }
        })
        .await;
        assert_eq!((ok, err), (10, None));
        assert_eq!(calls.load(Ordering::SeqCst), 10);

        let calls = AtomicUsize::new(0);
        // Batches 1, 2, 4: index 4 (in the third batch) fails, so the fourth batch never runs.
        let (ok, err) = slow_start_batch(10, |i| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { if i == 4 { Err("boom") } else { Ok(()) } }
        })
        .await;
        assert_eq!(err, Some("boom"));
        assert_eq!(ok, 6);
        assert_eq!(calls.load(Ordering::SeqCst), 7);
    }

    #[test]
    fn pods_from_templates_carry_the_owner_and_a_generated_name() {
        let t: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }))
        .unwrap();
        let owner = crate::controller_ref::controller_ref("apps/v1", "ReplicaSet", "web-abc", "u");
        let p = pod_from_template(&t, "ns", &owner);
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.labels.unwrap()["app"], "web");
        assert_eq!(p.metadata.owner_references.unwrap()[0].uid, "u");
        assert_eq!(generate_name_prefix(&"x".repeat(60)), "x".repeat(60));
    }
}
