//! The persistent volume controller (component `persistentvolume-controller`) with a built-in local
//! provisioner: kubeling's stand-in for upstream's PV controller plus the `rancher/local-path-provisioner`
//! that kind and k3d ship, done inline without helper pods (one node, directories on the host).
//!
//! ```text
//! start: ensure StorageClass standard (kubeling.io/local-path, Delete, Immediate, default)
//! PVC / PV / StorageClass events ──► queue (pvc:ns/name, pv:name) ──► binder (pure) ──► writes
//!   claim: default class → mkdir <volumes_dir>/<pv>_<ns>_<claim> → PV pvc-<uid> (hostPath) → PV Bound →
//!          claim volumeName + annotations → claim Bound
//!   volume: claim gone → Released → (reclaim Delete) remove the directory and the PV
//! ```
//!
//! The node agent mounts a claim by resolving claim → bound volume → hostPath (`node/src/volumes.rs`).
//! Deliberate differences: `WaitForFirstConsumer` classes of this provisioner bind at once too (one node),
//! and pre-provisioned volumes are not matched to claims (only ones named by `spec.volumeName`).

pub mod binder;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use client::events::{EventType, Recorder};
use futures_util::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::informer::{Change, Informer, key_of, split_key};
use crate::pod_control::{api_message, object_ref};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};
use binder::{ClaimStep, VolumeStep};

/// The component events are written as.
pub const COMPONENT: &str = "persistentvolume-controller";

/// Register the handlers and return the future that ensures the default class and runs the workers.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("persistentvolume");
    let claims = ctx.informers.get::<PersistentVolumeClaim>();
    let volumes = ctx.informers.get::<PersistentVolume>();
    let classes = ctx.informers.get::<StorageClass>();

    let (q, v) = (queue.clone(), volumes.clone());
    claims.on_change(move |c| {
        let claim = c.object();
        q.add(format!("pvc:{}", key_of(claim.as_ref())));
        if let Change::Deleted(claim) = c {
            for pv in v.list().iter().filter(|pv| binder::refers_to(pv, claim)) {
                q.add(format!("pv:{}", key_of(pv.as_ref())));
            }
        }
    });
    let q = queue.clone();
    volumes.on_change(move |c| {
        let pv = c.object();
        q.add(format!("pv:{}", key_of(pv.as_ref())));
        if let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
            q.add(format!(
                "pvc:{}/{}",
                r.namespace.as_deref().unwrap_or(""),
                r.name.as_deref().unwrap_or("")
            ));
        }
    });
    let (q, cl) = (queue.clone(), claims.clone());
    classes.on_change(move |_| {
        for c in cl.list() {
            if c.spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .is_none_or(str::is_empty)
            {
                q.add(format!("pvc:{}", key_of(c.as_ref())));
            }
        }
    });

    let volumes_dir =
        std::path::absolute(&ctx.config.volumes_dir).unwrap_or_else(|_| ctx.config.volumes_dir.clone());
    let controller = Arc::new(VolumeController {
        client: ctx.client.clone(),
        recorder: ctx.recorder(COMPONENT),
        claims,
        volumes,
        classes,
        volumes_dir,
    });
    let informers = ctx.informers.clone();
    Box::pin(async move {
        ensure_standard_class(&controller.client, &cancel).await;
        run_workers(informers, queue, 5, controller, cancel).await;
    })
}

/// Create StorageClass `standard` unless it exists (a user's edits to it are kept), retrying until it works.
async fn ensure_standard_class(client: &kube::Client, cancel: &CancellationToken) {
    let api: Api<StorageClass> = Api::all(client.clone());
    let mut delay = Duration::from_millis(200);
    loop {
        let done = match api.get_opt(binder::DEFAULT_CLASS).await {
            Ok(Some(_)) => true,
            Ok(None) => match api
                .create(&PostParams::default(), &binder::standard_class())
                .await
            {
                Ok(_) => true,
                Err(kube::Error::Api(s)) if s.code == 409 => true,
                Err(e) => {
                    tracing::debug!(error = %e, "creating the standard StorageClass failed; retrying");
                    false
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "reading the standard StorageClass failed; retrying");
                false
            }
        };
        if done {
            return;
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

struct VolumeController {
    client: kube::Client,
    recorder: Arc<Recorder>,
    claims: Arc<Informer<PersistentVolumeClaim>>,
    volumes: Arc<Informer<PersistentVolume>>,
    classes: Arc<Informer<StorageClass>>,
    volumes_dir: PathBuf,
}

fn ignore_gone(r: Result<(), kube::Error>) -> Result<(), Error> {
    match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map_err(Error::from),
    }
}

#[async_trait::async_trait]
impl Reconciler for VolumeController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        if let Some(k) = key.strip_prefix("pvc:") {
            self.sync_claim(k).await?;
        } else if let Some(k) = key.strip_prefix("pv:") {
            self.sync_volume(k).await?;
        }
        Ok(None)
    }
}

impl VolumeController {
    async fn sync_claim(&self, key: &str) -> Result<(), Error> {
        let Some(claim) = self.claims.get(key) else {
            return Ok(());
        };
        let (ns, name) = split_key(key);
        let volumes = self.volumes.list();
        let classes = self.classes.list();
        let steps = binder::claim_steps(
            &claim,
            &volumes.iter().map(|v| v.as_ref()).collect::<Vec<_>>(),
            &classes.iter().map(|c| c.as_ref()).collect::<Vec<_>>(),
            &self.volumes_dir,
        );
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let claim_ref = object_ref("v1", "PersistentVolumeClaim", &claim.metadata);
        let pp = PatchParams::default();
        for step in steps {
            match step {
                ClaimStep::SetClass(class) => {
                    let patch = json!({"spec": {"storageClassName": class}});
                    claims.patch(name, &pp, &Patch::Merge(&patch)).await?;
                }
                ClaimStep::Provision { volume, dir } => {
                    std::fs::create_dir_all(&dir)
                        .and_then(|()| std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)))
                        .map_err(|e| {
                            let msg = format!(
                                "failed to provision volume with StorageClass {:?}: {e}",
                                volume
                                    .spec
                                    .as_ref()
                                    .and_then(|s| s.storage_class_name.clone())
                                    .unwrap_or_default()
                            );
                            self.recorder.emit(
                                claim_ref.clone(),
                                EventType::Warning,
                                "ProvisioningFailed",
                                msg.clone(),
                            );
                            Error::Other(msg)
                        })?;
                    let pv_name = volume.metadata.name.clone().unwrap_or_default();
                    let annotations = json!({"metadata": {"annotations": {
                        binder::STORAGE_PROVISIONER: binder::PROVISIONER,
                        binder::STORAGE_PROVISIONER_BETA: binder::PROVISIONER,
                    }}});
                    claims.patch(name, &pp, &Patch::Merge(&annotations)).await?;
                    match pvs.create(&PostParams::default(), &volume).await {
                        Ok(_) => self.recorder.emit(
                            claim_ref.clone(),
                            EventType::Normal,
                            "ProvisioningSucceeded",
                            format!("Successfully provisioned volume {pv_name}"),
                        ),
                        Err(kube::Error::Api(s)) if s.code == 409 => {}
                        Err(e) => {
                            self.recorder.emit(
                                claim_ref.clone(),
                                EventType::Warning,
                                "ProvisioningFailed",
                                format!(
                                    "failed to provision volume with StorageClass \"{}\": {}",
                                    volume
                                        .spec
                                        .as_ref()
                                        .and_then(|s| s.storage_class_name.clone())
                                        .unwrap_or_default(),
                                    api_message(&e)
                                ),
                            );
                            return Err(e.into());
                        }
                    }
                }
                ClaimStep::VolumeBound(pv) => {
                    let patch = json!({"status": {"phase": "Bound"}});
                    ignore_gone(pvs.patch_status(&pv, &pp, &Patch::Merge(&patch)).await.map(drop))?;
                }
                ClaimStep::ClaimBound { volume } => {
                    let pv_name = volume.metadata.name.clone().unwrap_or_default();
                    let spec = volume.spec.clone().unwrap_or_default();
                    let patch = json!({
                        "metadata": {"annotations": {binder::BIND_COMPLETED: "yes", binder::BOUND_BY_CONTROLLER: "yes"}},
                        "spec": {"volumeName": pv_name},
                    });
                    claims.patch(name, &pp, &Patch::Merge(&patch)).await?;
                    let status = json!({"status": {
                        "phase": "Bound",
                        "accessModes": spec.access_modes.unwrap_or_default(),
                        "capacity": spec.capacity.unwrap_or_default(),
                    }});
                    claims.patch_status(name, &pp, &Patch::Merge(&status)).await?;
                }
                ClaimStep::Lost => {
                    let patch = json!({"status": {"phase": "Lost"}});
                    claims.patch_status(name, &pp, &Patch::Merge(&patch)).await?;
                    self.recorder.emit(
                        claim_ref.clone(),
                        EventType::Warning,
                        "ClaimLost",
                        "Bound claim has lost its PersistentVolume. Data on the volume is lost!".into(),
                    );
                }
                ClaimStep::NoClass(class) => self.recorder.emit(
                    claim_ref.clone(),
                    EventType::Warning,
                    "ProvisioningFailed",
                    format!("storageclass.storage.k8s.io \"{class}\" not found"),
                ),
            }
        }
        Ok(())
    }

    async fn sync_volume(&self, key: &str) -> Result<(), Error> {
        let Some(volume) = self.volumes.get(key) else {
            return Ok(());
        };
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.clone());
        let mut claim = claim_ref.as_ref().and_then(|r| {
            self.claims.get_in(
                r.namespace.as_deref().unwrap_or(""),
                r.name.as_deref().unwrap_or(""),
            )
        });
        if claim.is_none()
            && let Some(r) = &claim_ref
        {
            // Not in the cache: ask the API server before releasing anything (upstream does the same).
            let api: Api<PersistentVolumeClaim> =
                Api::namespaced(self.client.clone(), r.namespace.as_deref().unwrap_or("default"));
            if let Some(c) = api.get_opt(r.name.as_deref().unwrap_or("")).await? {
                claim = Some(Arc::new(c));
            }
        }
        let steps = binder::volume_steps(&volume, claim.as_deref(), &self.volumes_dir);
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let pp = PatchParams::default();
        for step in steps {
            let phase = match step {
                VolumeStep::Available => "Available",
                VolumeStep::Bound => "Bound",
                VolumeStep::Released => "Released",
                VolumeStep::Delete { dir } => {
                    if let Some(dir) = dir {
                        match std::fs::remove_dir_all(&dir) {
                            Ok(()) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(e) => {
                                let msg = format!("failed to delete volume directory {}: {e}", dir.display());
                                self.recorder.emit(
                                    object_ref("v1", "PersistentVolume", &volume.metadata),
                                    EventType::Warning,
                                    "VolumeFailedDelete",
                                    msg.clone(),
                                );
                                return Err(Error::Other(msg));
                            }
                        }
                    }
                    ignore_gone(pvs.delete(key, &Default::default()).await.map(drop))?;
                    continue;
                }
            };
            let patch = json!({"status": {"phase": phase}});
            ignore_gone(pvs.patch_status(key, &pp, &Patch::Merge(&patch)).await.map(drop))?;
        }
        Ok(())
    }
}
