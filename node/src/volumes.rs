//! A pod's volumes on the node: the kubelet's volume plugins (`pkg/volume/{emptydir,hostpath,configmap,
//! secret,downwardapi,projected}`) reduced to what a node without mount privileges can do, and the bind
//! mounts each container gets (`pkg/kubelet/kubelet_pods.go`, `makeMounts`). The pod worker calls
//! [`VolumeHost::setup_pod`] before creating the pod's containers, [`PodVolumes::container_mounts`] for
//! each container, [`VolumeHost::update_pod`] on resync or when a referenced ConfigMap or Secret changes,
//! and [`VolumeHost::remove_pod`] once the pod is gone.
//!
//! ```text
//! <data_dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>/          plain directory, 0777
//! <data_dir>/pods/<uid>/volumes/kubernetes.io~configmap/<name>/
//!     ..2025_01_01_12_00_00.123456789/<key>                              the files, with their modes
//!     ..data -> ..2025_01_01_12_00_00.123456789                          switched by rename
//!     <key> -> ..data/<key>                                              what the container sees
//! ```
//!
//! ConfigMap, Secret, downwardAPI and projected volumes are written by [`AtomicWriter`], the kubelet's
//! `pkg/volume/util/atomic_writer.go`: a container that has the directory mounted sees either the old or
//! the new set of files, never a half-written one. Their errors ([`VolumeError::SetUp`]) carry upstream's
//! text; the worker turns them into `CreateContainerConfigError` and retries (upstream keeps the pod in
//! `ContainerCreating` with a `FailedMount` event saying `MountVolume.SetUp failed for volume ...`).
//!
//! Deliberate differences from upstream, because kubeling does not mount anything on the host:
//! * `emptyDir` with `medium: Memory` is a Docker tmpfs per container, so containers of one pod do not
//!   share it; its size is `sizeLimit` (Docker's default, unbounded, when unset) and it takes no `subPath`.
//! * Secret volumes live on disk in the data dir, not on a tmpfs.
//! * No `fsGroup` ownership change, no SELinux relabel; `mountPropagation` is ignored.
//! * `clusterTrustBundle` projections are skipped; everything but emptyDir, hostPath, configMap, secret,
//!   downwardAPI, projected and persistentVolumeClaim is an "unsupported volume" error.
//!   `serviceAccountToken` projections are written from the tokens the worker got from
//!   [`crate::token_manager`].
//! * A `persistentVolumeClaim` volume is bound like a hostPath volume: claim → bound volume → its hostPath
//!   (or `local.path`) directory; a claim not bound yet fails the setup until it is.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, DownwardAPIVolumeFile, EmptyDirVolumeSource, HostPathVolumeSource, KeyToPath,
    PersistentVolumeClaimVolumeSource, Pod, Secret, Volume,
};

use crate::env::{self, EnvError, ObjectLookup, RuntimeInfo};
use crate::runtime::{Mount, TmpfsMount};

/// Upstream plugin directory names (`kubernetes.io/empty-dir` with `/` escaped as `~`).
pub const PLUGIN_EMPTY_DIR: &str = "kubernetes.io~empty-dir";
/// The ConfigMap plugin's directory.
pub const PLUGIN_CONFIG_MAP: &str = "kubernetes.io~configmap";
/// The Secret plugin's directory.
pub const PLUGIN_SECRET: &str = "kubernetes.io~secret";
/// The downward API plugin's directory.
pub const PLUGIN_DOWNWARD_API: &str = "kubernetes.io~downward-api";
/// The projected plugin's directory.
pub const PLUGIN_PROJECTED: &str = "kubernetes.io~projected";

/// API default of `defaultMode` for configMap, secret, downwardAPI and projected volumes (0644 = 420), used
/// when a pod reaches the node undefaulted.
pub const DEFAULT_MODE: u32 = 0o644;

/// atomic_writer.go: `maxFileNameLength = 255`, `maxPathLength = 4096`.
const MAX_FILE_NAME_LENGTH: usize = 255;
const MAX_PATH_LENGTH: usize = 4096;
/// atomic_writer.go: `dataDirName = "..data"`, `newDataDirName = "..data_tmp"`.
pub const DATA_DIR_NAME: &str = "..data";
const NEW_DATA_DIR_NAME: &str = "..data_tmp";

/// Why one volume could not be set up. The texts are upstream's where upstream has one.
#[derive(Debug, thiserror::Error)]
pub enum SetUpError {
    /// A non-optional ConfigMap does not exist.
    #[error("configmap \"{name}\" not found")]
    ConfigMapNotFound {
        /// Its name.
        name: String,
    },
    /// A non-optional Secret does not exist.
    #[error("secret \"{name}\" not found")]
    SecretNotFound {
        /// Its name.
        name: String,
    },
    /// An `items` entry names a key the (non-optional) ConfigMap lacks.
    #[error("configmap references non-existent config key: {key}")]
    ConfigMapKeyNotFound {
        /// The key.
        key: String,
    },
    /// An `items` entry names a key the (non-optional) Secret lacks.
    #[error("references non-existent secret key: {key}")]
    SecretKeyNotFound {
        /// The key.
        key: String,
    },
    /// The claim a `persistentVolumeClaim` volume names does not exist.
    #[error("persistentvolumeclaim \"{name}\" not found")]
    ClaimNotFound {
        /// Its name.
        name: String,
    },
    /// The claim is not bound to a volume yet (the kubelet's `getPVCExtractPV`).
    #[error(
        "PVC {namespace}/{name} has non-bound phase ({phase:?}) or empty pvc.Spec.VolumeName ({volume:?})"
    )]
    ClaimNotBound {
        /// The claim's namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its phase.
        phase: String,
        /// Its `spec.volumeName`.
        volume: String,
    },
    /// The volume a claim is bound to does not exist, or is bound to another claim.
    #[error("persistentvolume \"{name}\" not found")]
    VolumeNotFound {
        /// Its name.
        name: String,
    },
    /// A hostPath `type` check failed (`checkTypeInternal`).
    #[error("hostPath type check failed: {path} is not a {what}")]
    HostPathType {
        /// The host path.
        path: String,
        /// "directory", "file", "socket file", "character device" or "block device".
        what: &'static str,
    },
    /// A hostPath `type` that does not exist.
    #[error("{type_} is an invalid volume type")]
    InvalidHostPathType {
        /// The type given.
        type_: String,
    },
    /// A downward API item could not be resolved.
    #[error(transparent)]
    DownwardApi(#[from] EnvError),
    /// A file path of `items` the atomic writer refuses (`validatePath`); the text is upstream's.
    #[error("{0}")]
    InvalidPath(String),
    /// An emptyDir medium other than "" and Memory (HugePages).
    #[error("emptyDir medium {0:?} is not supported by kubeling")]
    UnsupportedMedium(String),
    /// The token of a `serviceAccountToken` projection could not be had (the text is upstream's
    /// `failed to fetch token: ...`).
    #[error("{0}")]
    Token(String),
    /// A volume type kubeling does not implement.
    #[error("{0} volumes are not supported by kubeling")]
    Unsupported(String),
    /// A filesystem operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// Several sources of a projected or downwardAPI volume failed (`utilerrors.NewAggregate`).
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Aggregate(Vec<SetUpError>),
}

fn io_err<'p>(op: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> SetUpError + 'p {
    move |source| SetUpError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Why a pod's volumes or a container's mounts could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// One volume failed; the text is upstream's `FailedMount` event message.
    #[error("MountVolume.SetUp failed for volume \"{volume}\" : {source}")]
    SetUp {
        /// The volume's name in the pod.
        volume: String,
        /// Why.
        #[source]
        source: SetUpError,
    },
    /// A volumeMount names no volume of the pod (`makeMounts`).
    #[error("cannot find volume \"{volume}\" to mount into container \"{container}\"")]
    NoSuchVolume {
        /// The volume name.
        volume: String,
        /// The container.
        container: String,
    },
    /// `subPath` is absolute (`makeMounts`).
    #[error("error SubPath `{sub_path}` must not be an absolute path")]
    SubPathAbsolute {
        /// The subPath.
        sub_path: String,
    },
    /// `subPath` contains `..` (`ValidatePathNoBacksteps`).
    #[error("unable to provision SubPath `{sub_path}`: must not contain '..'")]
    SubPathBacksteps {
        /// The subPath.
        sub_path: String,
    },
    /// `subPathExpr` refers to variables that are unset or empty (`ExpandContainerVolumeMounts`).
    #[error("missing value for {missing}")]
    SubPathExprMissing {
        /// The names, sorted, comma separated.
        missing: String,
    },
    /// The subPath directory could not be created (`makeMounts` hides the detail from the user too).
    #[error("failed to create subPath directory for volumeMount \"{mount}\" of container \"{container}\"")]
    SubPathCreate {
        /// The volumeMount's name.
        mount: String,
        /// The container.
        container: String,
        /// The detail, for the log.
        #[source]
        source: io::Error,
    },
    /// The subPath resolves (through a symlink) outside its volume (`safeOpenSubPath`).
    #[error("subpath \"{path}\" not within volume path \"{volume_path}\"")]
    SubPathOutside {
        /// The resolved path.
        path: String,
        /// The volume's directory.
        volume_path: String,
    },
    /// `subPath` on an emptyDir with `medium: Memory`, which is a per-container tmpfs here.
    #[error("subPath is not supported on the memory-backed emptyDir volume \"{volume}\"")]
    SubPathOnTmpfs {
        /// The volume name.
        volume: String,
    },
    /// A pod UID or volume name that cannot be a directory name.
    #[error("invalid {what} {value:?}: not usable as a directory name")]
    InvalidName {
        /// "pod uid" or "volume name".
        what: &'static str,
        /// The value.
        value: String,
    },
    /// A filesystem operation on the pod directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl VolumeError {
    /// True when the failure is a missing ConfigMap or Secret (or key), which goes away by itself once the
    /// object is created: the worker retries without counting it as a crash.
    pub fn is_missing_object(&self) -> bool {
        fn missing(e: &SetUpError) -> bool {
            match e {
                SetUpError::ConfigMapNotFound { .. }
                | SetUpError::SecretNotFound { .. }
                | SetUpError::ClaimNotFound { .. }
                | SetUpError::ClaimNotBound { .. }
                | SetUpError::VolumeNotFound { .. }
                | SetUpError::ConfigMapKeyNotFound { .. }
                | SetUpError::SecretKeyNotFound { .. } => true,
                SetUpError::Aggregate(all) => all.iter().any(missing),
                _ => false,
            }
        }
        matches!(self, Self::SetUp { source, .. } if missing(source))
    }
}

/// One file of an atomic-writer volume (`volumeutil.FileProjection`, without the fsUser kubeling does not
/// set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// The contents.
    pub data: Vec<u8>,
    /// Permission bits (only `0o777` is applied, as Go's `os.FileMode` would).
    pub mode: u32,
}

/// The kubelet's `AtomicWriter` over one volume directory: the files of a payload go into a fresh
/// timestamped directory, `..data` is switched to it with a rename, each top-level entry is a symlink
/// `name -> ..data/name`, and the previous timestamped directory is removed afterwards.
#[derive(Debug, Clone)]
pub struct AtomicWriter {
    target_dir: PathBuf,
}

impl AtomicWriter {
    /// A writer for `target_dir`, which must exist.
    pub fn new(target_dir: impl Into<PathBuf>) -> Self {
        Self {
            target_dir: target_dir.into(),
        }
    }

    /// Makes the directory show exactly `payload` (keys are relative paths). Returns whether anything
    /// changed: writing the same payload twice leaves the first timestamped directory in place.
    pub fn write(&self, payload: &BTreeMap<String, FileProjection>) -> Result<bool, SetUpError> {
        // (1) Validate and clean the paths.
        let mut clean = BTreeMap::new();
        for (path, file) in payload {
            validate_path(path)?;
            clean.insert(clean_path(path), file);
        }

        // (2) The current timestamped directory, if any.
        let data_dir = self.target_dir.join(DATA_DIR_NAME);
        let old_ts = match fs::read_link(&data_dir) {
            Ok(target) => Some(self.target_dir.join(target)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_err("reading link", &data_dir)(e)),
        };

        // (3) Paths of the old version that the new one lacks; (4) whether the contents differ.
        let mut to_remove = BTreeSet::new();
        let mut should_write = true;
        if let Some(old_ts) = &old_ts {
            let mut old_paths = BTreeSet::new();
            walk_relative(old_ts, Path::new(""), &mut old_paths)?;
            let mut new_paths = BTreeSet::new();
            for path in clean.keys() {
                // Every ancestor too, so a non-empty directory is not pruned.
                let mut p = Path::new(path.as_str());
                loop {
                    new_paths.insert(p.to_string_lossy().into_owned());
                    match p.parent() {
                        Some(parent) if !parent.as_os_str().is_empty() => p = parent,
                        _ => break,
                    }
                }
            }
            to_remove = old_paths.difference(&new_paths).cloned().collect();
            // Upstream rewrites only when a file's contents or mode differ; removed paths also trigger a
            // rewrite here, so the old timestamped directory never keeps files that are gone.
            should_write = !to_remove.is_empty() || payload_differs(&clean, old_ts)?;
        }

        if should_write {
            // (5) A new timestamped directory, 0755 whatever the umask.
            let ts_dir = self.new_timestamp_dir()?;
            let ts_name = ts_dir.file_name().map(|n| n.to_owned()).unwrap_or_default();
            // (6) The files.
            if let Err(e) = write_payload(&clean, &ts_dir) {
                let _ = fs::remove_dir_all(&ts_dir);
                return Err(e);
            }
            // (7) `..data_tmp -> <ts>`, then (8) renamed over `..data`: the atomic switch.
            let tmp_link = self.target_dir.join(NEW_DATA_DIR_NAME);
            match fs::remove_file(&tmp_link) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("removing stale link", &tmp_link)(e)),
            }
            if let Err(e) = symlink(&ts_name, &tmp_link) {
                let _ = fs::remove_dir_all(&ts_dir);
                return Err(io_err("creating link", &tmp_link)(e));
            }
            if let Err(e) = fs::rename(&tmp_link, &data_dir) {
                let _ = fs::remove_file(&tmp_link);
                let _ = fs::remove_dir_all(&ts_dir);
                return Err(io_err("renaming link", &data_dir)(e));
            }
        }

        // (9) The user-visible symlinks of the top-level entries, created once and never switched.
        for path in clean.keys() {
            let top = path.split('/').next().unwrap_or(path);
            let visible = self.target_dir.join(top);
            match fs::symlink_metadata(&visible) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    symlink(Path::new(DATA_DIR_NAME).join(top), &visible)
                        .map_err(io_err("creating link", &visible))?;
                }
                Err(e) => return Err(io_err("reading", &visible)(e)),
            }
        }
        // (10) Prune the links of entries that are gone (only top-level ones are links).
        for path in to_remove.iter().filter(|p| !p.contains('/')) {
            let visible = self.target_dir.join(path);
            match fs::remove_file(&visible) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("removing", &visible)(e)),
            }
        }
        // (11) The previous version, now unreachable.
        if should_write && let Some(old_ts) = &old_ts {
            fs::remove_dir_all(old_ts).map_err(io_err("removing", old_ts))?;
        }
        Ok(should_write)
    }

    /// `newTimestampDir`: `..<UTC time>.<digits>`, like Go's `os.MkdirTemp` with that pattern.
    fn new_timestamp_dir(&self) -> Result<PathBuf, SetUpError> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let now = jiff::Timestamp::now();
        let stamp = now.strftime("..%Y_%m_%d_%H_%M_%S").to_string();
        loop {
            let unique = now
                .subsec_nanosecond()
                .unsigned_abs()
                .wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed));
            let dir = self.target_dir.join(format!("{stamp}.{unique}"));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
                        .map_err(io_err("chmod", &dir))?;
                    return Ok(dir);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("creating directory", &dir)(e)),
            }
        }
    }
}

/// atomic_writer.go `validatePath`, with upstream's messages.
fn validate_path(path: &str) -> Result<(), SetUpError> {
    let invalid = |msg: String| Err(SetUpError::InvalidPath(msg));
    if path.is_empty() {
        return invalid(format!("invalid path: must not be empty: {path:?}"));
    }
    if path.starts_with('/') {
        return invalid(format!("invalid path: must be relative path: {path}"));
    }
    if path.len() > MAX_PATH_LENGTH {
        return invalid(format!(
            "invalid path: must be less than or equal to {MAX_PATH_LENGTH} characters"
        ));
    }
    let items: Vec<&str> = path.split('/').collect();
    for item in &items {
        if *item == ".." {
            return invalid(format!("invalid path: must not contain '..': {path}"));
        }
        if item.len() > MAX_FILE_NAME_LENGTH {
            return invalid(format!(
                "invalid path: filenames must be less than or equal to {MAX_FILE_NAME_LENGTH} characters"
            ));
        }
    }
    if items[0].starts_with("..") && items[0].len() > 2 {
        return invalid(format!("invalid path: must not start with '..': {path}"));
    }
    Ok(())
}

/// Go's `path.Clean` for a validated relative path: no empty or `.` components.
fn clean_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}

/// Every path under `dir`, relative to the walk's root, directories included.
fn walk_relative(dir: &Path, rel: &Path, out: &mut BTreeSet<String>) -> Result<(), SetUpError> {
    let here = dir.join(rel);
    for entry in fs::read_dir(&here).map_err(io_err("reading directory", &here))? {
        let entry = entry.map_err(io_err("reading directory", &here))?;
        let rel_path = rel.join(entry.file_name());
        out.insert(rel_path.to_string_lossy().into_owned());
        let file_type = entry.file_type().map_err(io_err("reading", &entry.path()))?;
        if file_type.is_dir() {
            walk_relative(dir, &rel_path, out)?;
        }
    }
    Ok(())
}

/// `shouldWritePayload`: a file is missing, or its mode or contents differ.
fn payload_differs(payload: &BTreeMap<String, &FileProjection>, ts_dir: &Path) -> Result<bool, SetUpError> {
    for (path, file) in payload {
        let full = ts_dir.join(path);
        let meta = match fs::symlink_metadata(&full) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(io_err("reading", &full)(e)),
        };
        if !meta.is_file() || meta.permissions().mode() & 0o777 != file.mode & 0o777 {
            return Ok(true);
        }
        if fs::read(&full).map_err(io_err("reading", &full))? != file.data {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `writePayloadToDir`: parents created as needed, each file written then chmod-ed to its mode (the
/// create mode is subject to the umask).
fn write_payload(payload: &BTreeMap<String, &FileProjection>, dir: &Path) -> Result<(), SetUpError> {
    for (path, file) in payload {
        let full = dir.join(path);
        if let Some(parent) = full.parent() {
            fs::create_dir_all(parent).map_err(io_err("creating directory", parent))?;
        }
        let mode = file.mode & 0o777;
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&full)
            .map_err(io_err("creating", &full))?;
        out.write_all(&file.data).map_err(io_err("writing", &full))?;
        fs::set_permissions(&full, fs::Permissions::from_mode(mode)).map_err(io_err("chmod", &full))?;
    }
    Ok(())
}

/// A volume as prepared on the node, ready to be mounted into containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreparedVolume {
    /// A host directory (or file) bound into containers.
    Host {
        /// The path on the host.
        path: PathBuf,
        /// Always mounted read-only (configMap, secret, downwardAPI and projected volumes report
        /// `ReadOnly: true` in their attributes upstream).
        read_only: bool,
    },
    /// `emptyDir` with `medium: Memory`: a tmpfs in each container that mounts it.
    Tmpfs {
        /// `sizeLimit` in bytes.
        size_bytes: Option<i64>,
    },
}

/// The volumes of one pod, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodVolumes {
    volumes: BTreeMap<String, PreparedVolume>,
}

/// What one container mounts, for [`crate::runtime::ContainerConfig::mounts`] and
/// [`crate::runtime::ContainerConfig::tmpfs`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerMounts {
    /// Bind mounts.
    pub binds: Vec<Mount>,
    /// tmpfs mounts.
    pub tmpfs: Vec<TmpfsMount>,
}

impl PodVolumes {
    /// The prepared volume `name`.
    pub fn get(&self, name: &str) -> Option<&PreparedVolume> {
        self.volumes.get(name)
    }

    /// kubelet `makeMounts` for the container's `volumeMounts`: `subPath` (or `subPathExpr`, expanded from
    /// `env`, the container's resolved environment) is created in the volume when missing and must stay
    /// inside it; `readOnly` is the mount's, or forced by the volume type. `mountPropagation` is ignored.
    pub fn container_mounts(
        &self,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<ContainerMounts, VolumeError> {
        let mut mounts = ContainerMounts::default();
        for mount in container.volume_mounts.iter().flatten() {
            let volume = self
                .volumes
                .get(&mount.name)
                .ok_or_else(|| VolumeError::NoSuchVolume {
                    volume: mount.name.clone(),
                    container: container.name.clone(),
                })?;
            let sub_path = match mount.sub_path_expr.as_deref().filter(|e| !e.is_empty()) {
                Some(expr) => expand_sub_path_expr(expr, env)?,
                None => mount.sub_path.clone().unwrap_or_default(),
            };
            let mount_ro = mount.read_only == Some(true);
            match volume {
                PreparedVolume::Tmpfs { size_bytes } => {
                    if !sub_path.is_empty() {
                        return Err(VolumeError::SubPathOnTmpfs {
                            volume: mount.name.clone(),
                        });
                    }
                    mounts.tmpfs.push(TmpfsMount {
                        container_path: mount.mount_path.clone(),
                        size_bytes: *size_bytes,
                        read_only: mount_ro,
                    });
                }
                PreparedVolume::Host { path, read_only } => {
                    let host_path = if sub_path.is_empty() {
                        path.clone()
                    } else {
                        prepare_sub_path(path, &sub_path, &mount.name, &container.name)?
                    };
                    mounts.binds.push(Mount {
                        host_path: host_path.to_string_lossy().into_owned(),
                        container_path: mount.mount_path.clone(),
                        read_only: mount_ro || *read_only,
                    });
                }
            }
        }
        Ok(mounts)
    }
}

/// kubecontainer `ExpandContainerVolumeMounts`: every referenced variable must be set and non-empty.
fn expand_sub_path_expr(expr: &str, env: &[(String, String)]) -> Result<String, VolumeError> {
    let vars: BTreeMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // The lookup records the misses; a missing name expands to "" as upstream's mapping does.
    let missing = std::cell::RefCell::new(BTreeSet::new());
    let expanded = env::expand(expr, |name| match vars.get(name) {
        Some(v) if !v.is_empty() => Some(*v),
        _ => {
            missing.borrow_mut().insert(name.to_owned());
            Some("")
        }
    });
    let missing = missing.into_inner();
    if !missing.is_empty() {
        return Err(VolumeError::SubPathExprMissing {
            missing: missing.into_iter().collect::<Vec<_>>().join(", "),
        });
    }
    Ok(expanded)
}

/// The subPath checks of `makeMounts` and what `SafeMakeDir`/`PrepareSafeSubpath` guarantee: relative, no
/// `..`, created (with the volume directory's mode) when missing, and resolving inside the volume. kubeling
/// binds the resolved path; upstream binds an fd it opened without following symlinks, which also closes
/// the window between this check and Docker's bind.
fn prepare_sub_path(
    volume: &Path,
    sub_path: &str,
    mount: &str,
    container: &str,
) -> Result<PathBuf, VolumeError> {
    if sub_path.starts_with('/') {
        return Err(VolumeError::SubPathAbsolute {
            sub_path: sub_path.to_owned(),
        });
    }
    if sub_path.split('/').any(|item| item == "..") {
        return Err(VolumeError::SubPathBacksteps {
            sub_path: sub_path.to_owned(),
        });
    }
    let volume_real = volume.canonicalize().map_err(|source| VolumeError::Io {
        op: "resolving",
        path: volume.to_owned(),
        source,
    })?;
    let outside = |path: &Path| VolumeError::SubPathOutside {
        path: path.to_string_lossy().into_owned(),
        volume_path: volume_real.to_string_lossy().into_owned(),
    };
    let joined = volume_real.join(sub_path);
    if fs::symlink_metadata(&joined).is_err() {
        // Create the missing components one at a time, checking each existing one resolves inside the
        // volume, so a symlink planted by a container cannot make us create directories elsewhere.
        let mode = fs::metadata(&volume_real)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o755);
        let mut current = volume_real.clone();
        for component in Path::new(sub_path).components() {
            let Component::Normal(part) = component else {
                continue;
            };
            current.push(part);
            match fs::symlink_metadata(&current) {
                Ok(_) => {
                    let real = current.canonicalize().map_err(|source| VolumeError::Io {
                        op: "resolving",
                        path: current.clone(),
                        source,
                    })?;
                    if !real.starts_with(&volume_real) {
                        return Err(outside(&real));
                    }
                    current = real;
                }
                Err(_) => {
                    let created = fs::DirBuilder::new()
                        .mode(mode)
                        .create(&current)
                        .and_then(|()| fs::set_permissions(&current, fs::Permissions::from_mode(mode)));
                    created.map_err(|source| VolumeError::SubPathCreate {
                        mount: mount.to_owned(),
                        container: container.to_owned(),
                        source,
                    })?;
                }
            }
        }
    }
    let real = joined.canonicalize().map_err(|source| VolumeError::Io {
        op: "resolving",
        path: joined.clone(),
        source,
    })?;
    if !real.starts_with(&volume_real) {
        return Err(outside(&real));
    }
    Ok(real)
}

/// The node's volume directories (upstream `VolumeHost`, rooted at the kubelet's `--root-dir`).
#[derive(Debug, Clone)]
pub struct VolumeHost {
    data_dir: PathBuf,
}

impl VolumeHost {
    /// Volumes under `<data_dir>/pods`; a relative `data_dir` is made absolute, as Docker needs absolute
    /// bind sources.
    pub fn new(data_dir: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Self {
            data_dir: std::path::absolute(data_dir)?,
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `<data_dir>/pods`.
    pub fn pods_dir(&self) -> PathBuf {
        self.data_dir.join("pods")
    }

    /// `<data_dir>/pods/<uid>`.
    pub fn pod_dir(&self, uid: &str) -> Result<PathBuf, VolumeError> {
        check_dir_name("pod uid", uid)?;
        Ok(self.pods_dir().join(uid))
    }

    /// `<data_dir>/pods/<uid>/volumes/<plugin>/<name>`.
    pub fn volume_dir(&self, uid: &str, plugin: &str, name: &str) -> Result<PathBuf, VolumeError> {
        check_dir_name("volume name", name)?;
        Ok(self.pod_dir(uid)?.join("volumes").join(plugin).join(name))
    }

    /// Sets up every volume of the pod (idempotent: a second call rewrites only what changed) and returns
    /// them for [`PodVolumes::container_mounts`]. Stops at the first volume that fails.
    pub fn setup_pod(
        &self,
        pod: &Pod,
        objects: &dyn ObjectLookup,
        info: &RuntimeInfo,
    ) -> Result<PodVolumes, VolumeError> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let mut prepared = PodVolumes::default();
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let (ready, _) = self.setup_volume(pod, uid, volume, objects, info)?;
            prepared.volumes.insert(volume.name.clone(), ready);
        }
        Ok(prepared)
    }

    /// Rewrites the configMap, secret, downwardAPI and projected volumes from the current objects and pod
    /// metadata (upstream's volume manager remounts these on every sync), and returns the names of those
    /// whose files changed. Every volume is tried; the first error is returned after the rest were
    /// updated, and a failed volume keeps its previous files.
    pub fn update_pod(
        &self,
        pod: &Pod,
        objects: &dyn ObjectLookup,
        info: &RuntimeInfo,
    ) -> Result<Vec<String>, VolumeError> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let mut changed = Vec::new();
        let mut first_error = None;
        for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let atomic = volume.config_map.is_some()
                || volume.secret.is_some()
                || volume.downward_api.is_some()
                || volume.projected.is_some();
            if !atomic {
                continue;
            }
            match self.setup_volume(pod, uid, volume, objects, info) {
                Ok((_, true)) => changed.push(volume.name.clone()),
                Ok((_, false)) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(changed),
        }
    }

    /// Removes `<data_dir>/pods/<uid>` with everything in it, once the pod's containers are gone. Symlinks
    /// are removed, never followed, so hostPath volumes are untouched. Already gone: `Ok`.
    pub fn remove_pod(&self, uid: &str) -> Result<(), VolumeError> {
        let dir = self.pod_dir(uid)?;
        match fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(VolumeError::Io {
                op: "removing",
                path: dir,
                source,
            }),
        }
    }

    /// The pod UIDs that have a directory, for orphan cleanup (upstream
    /// `cleanupOrphanedPodDirs`): remove those of pods that are neither known nor running, and only after
    /// the informer's first full list.
    pub fn pod_uids_on_disk(&self) -> Result<Vec<String>, VolumeError> {
        let dir = self.pods_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(VolumeError::Io {
                    op: "reading",
                    path: dir,
                    source,
                });
            }
        };
        let mut uids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| VolumeError::Io {
                op: "reading",
                path: dir.clone(),
                source,
            })?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                uids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        uids.sort();
        Ok(uids)
    }

    /// One volume: what containers mount, and whether its files changed.
    fn setup_volume(
        &self,
        pod: &Pod,
        uid: &str,
        volume: &Volume,
        objects: &dyn ObjectLookup,
        info: &RuntimeInfo,
    ) -> Result<(PreparedVolume, bool), VolumeError> {
        let name = volume.name.as_str();
        let fail = |source: SetUpError| VolumeError::SetUp {
            volume: name.to_owned(),
            source,
        };
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let atomic = |plugin: &str, payload: Result<BTreeMap<String, FileProjection>, SetUpError>| {
            let payload = payload.map_err(fail)?;
            let dir = self.volume_dir(uid, plugin, name)?;
            make_volume_dir(&dir).map_err(fail)?;
            let changed = AtomicWriter::new(&dir).write(&payload).map_err(fail)?;
            Ok((
                PreparedVolume::Host {
                    path: dir,
                    read_only: true,
                },
                changed,
            ))
        };

        if let Some(empty_dir) = &volume.empty_dir {
            return self.setup_empty_dir(uid, name, empty_dir).map_err(|e| match e {
                Setup::Volume(e) => e,
                Setup::SetUp(e) => fail(e),
            });
        }
        if let Some(host_path) = &volume.host_path {
            check_host_path(host_path).map_err(fail)?;
            return Ok((
                PreparedVolume::Host {
                    path: PathBuf::from(&host_path.path),
                    read_only: false,
                },
                false,
            ));
        }
        if let Some(source) = &volume.persistent_volume_claim {
            let (path, read_only) = claim_host_path(namespace, source, objects).map_err(fail)?;
            return Ok((PreparedVolume::Host { path, read_only }, false));
        }
        if let Some(source) = &volume.config_map {
            let optional = source.optional == Some(true);
            let payload = config_map_payload(
                objects.config_map(namespace, &source.name),
                &source.name,
                source.items.as_deref(),
                mode_of(source.default_mode),
                optional,
            );
            return atomic(PLUGIN_CONFIG_MAP, payload);
        }
        if let Some(source) = &volume.secret {
            let secret_name = source.secret_name.as_deref().unwrap_or("");
            let optional = source.optional == Some(true);
            let payload = secret_payload(
                objects.secret(namespace, secret_name),
                secret_name,
                source.items.as_deref(),
                mode_of(source.default_mode),
                optional,
            );
            return atomic(PLUGIN_SECRET, payload);
        }
        if let Some(source) = &volume.downward_api {
            let payload = downward_api_payload(
                pod,
                source.items.as_deref().unwrap_or(&[]),
                mode_of(source.default_mode),
                info,
            );
            return atomic(PLUGIN_DOWNWARD_API, payload);
        }
        if let Some(source) = &volume.projected {
            let default_mode = mode_of(source.default_mode);
            let mut payload = BTreeMap::new();
            let mut errors = Vec::new();
            // projected.go `collectData`: later sources overwrite earlier ones at the same path; a failing
            // source is recorded and the others still collected, then any failure fails the volume.
            for projection in source.sources.iter().flatten() {
                let part = if let Some(cm) = &projection.config_map {
                    config_map_payload(
                        objects.config_map(namespace, &cm.name),
                        &cm.name,
                        cm.items.as_deref(),
                        default_mode,
                        cm.optional == Some(true),
                    )
                } else if let Some(secret) = &projection.secret {
                    secret_payload(
                        objects.secret(namespace, &secret.name),
                        &secret.name,
                        secret.items.as_deref(),
                        default_mode,
                        secret.optional == Some(true),
                    )
                } else if let Some(downward) = &projection.downward_api {
                    downward_api_payload(pod, downward.items.as_deref().unwrap_or(&[]), default_mode, info)
                } else if let Some(token) = &projection.service_account_token {
                    service_account_token_payload(token, objects, default_mode)
                } else {
                    // clusterTrustBundle needs the ClusterTrustBundle objects, which kubeling does not
                    // serve: skipped, so the rest of the volume still works.
                    continue;
                };
                match part {
                    Ok(part) => payload.extend(part),
                    Err(e) => errors.push(e),
                }
            }
            let payload = match errors.len() {
                0 => Ok(payload),
                1 => Err(errors.remove(0)),
                _ => Err(SetUpError::Aggregate(errors)),
            };
            return atomic(PLUGIN_PROJECTED, payload);
        }
        Err(fail(SetUpError::Unsupported(volume_type(volume))))
    }

    fn setup_empty_dir(
        &self,
        uid: &str,
        name: &str,
        source: &EmptyDirVolumeSource,
    ) -> Result<(PreparedVolume, bool), Setup> {
        match source.medium.as_deref().unwrap_or("") {
            "" => {
                // emptyDir `setupDir`: the directory is 0777 whatever the umask. A disk sizeLimit is
                // enforced upstream by eviction, which kubeling does not do.
                let dir = self
                    .volume_dir(uid, PLUGIN_EMPTY_DIR, name)
                    .map_err(Setup::Volume)?;
                make_volume_dir(&dir).map_err(Setup::SetUp)?;
                Ok((
                    PreparedVolume::Host {
                        path: dir,
                        read_only: false,
                    },
                    false,
                ))
            }
            "Memory" => {
                let size_bytes = match &source.size_limit {
                    Some(q) => {
                        let nanos = env::quantity_nanos(&q.0).ok_or_else(|| {
                            Setup::SetUp(SetUpError::DownwardApi(EnvError::InvalidQuantity {
                                field: "sizeLimit".to_owned(),
                                value: q.0.clone(),
                            }))
                        })?;
                        // Quantity.Value(): rounded up to whole bytes. Zero means no limit upstream too.
                        let bytes = (nanos + 999_999_999) / 1_000_000_000;
                        i64::try_from(bytes).ok().filter(|b| *b > 0)
                    }
                    None => None,
                };
                Ok((PreparedVolume::Tmpfs { size_bytes }, false))
            }
            other => Err(Setup::SetUp(SetUpError::UnsupportedMedium(other.to_owned()))),
        }
    }
}

/// Either kind of failure of [`VolumeHost::setup_empty_dir`].
enum Setup {
    Volume(VolumeError),
    SetUp(SetUpError),
}

fn check_dir_name(what: &'static str, value: &str) -> Result<(), VolumeError> {
    if value.is_empty() || value == "." || value == ".." || value.contains(['/', '\0']) {
        return Err(VolumeError::InvalidName {
            what,
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// The volume directory, 0777 as the kubelet's emptyDir (which configMap and the others wrap) leaves it.
fn make_volume_dir(dir: &Path) -> Result<(), SetUpError> {
    fs::create_dir_all(dir).map_err(io_err("creating directory", dir))?;
    let mode = fs::metadata(dir)
        .map_err(io_err("reading", dir))?
        .permissions()
        .mode();
    if mode & 0o777 != 0o777 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).map_err(io_err("chmod", dir))?;
    }
    Ok(())
}

fn mode_of(mode: Option<i32>) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(DEFAULT_MODE) & 0o777
}

/// The volume's type as the API spells it (`persistentVolumeClaim`, `nfs`, ...), for the error.
fn volume_type(volume: &Volume) -> String {
    serde_json::to_value(volume)
        .ok()
        .and_then(|v| {
            v.as_object()
                .and_then(|o| o.keys().find(|k| k.as_str() != "name").cloned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// projected.go's `serviceAccountToken` source: the token the worker got from the token manager, at
/// the projection's path with the volume's mode (upstream uses 0600 only with fsUser/fsGroup, which
/// kubeling does not apply).
fn service_account_token_payload(
    source: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
    objects: &dyn ObjectLookup,
    default_mode: u32,
) -> Result<BTreeMap<String, FileProjection>, SetUpError> {
    let audience = source.audience.as_deref().unwrap_or("");
    let expiration = source
        .expiration_seconds
        .unwrap_or(crate::token_manager::DEFAULT_EXPIRATION_SECONDS);
    match objects.service_account_token(audience, expiration) {
        Some(Ok(token)) => Ok(BTreeMap::from([(
            source.path.clone(),
            FileProjection {
                data: token.as_bytes().to_vec(),
                mode: default_mode,
            },
        )])),
        Some(Err(e)) => Err(SetUpError::Token(e.to_owned())),
        None => Err(SetUpError::Token(
            "failed to fetch token: no token was requested".to_owned(),
        )),
    }
}

/// configmap.go `MakePayload`: every key (`data` and `binaryData`) at its own name, or only the `items`,
/// each at its path with its mode. A missing optional ConfigMap is an empty one.
fn config_map_payload(
    config_map: Option<&ConfigMap>,
    name: &str,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
) -> Result<BTreeMap<String, FileProjection>, SetUpError> {
    let empty = BTreeMap::new();
    let empty_binary = BTreeMap::new();
    let (data, binary) = match config_map {
        Some(cm) => (
            cm.data.as_ref().unwrap_or(&empty),
            cm.binary_data.as_ref().unwrap_or(&empty_binary),
        ),
        None if optional => (&empty, &empty_binary),
        None => {
            return Err(SetUpError::ConfigMapNotFound {
                name: name.to_owned(),
            });
        }
    };
    let lookup = |key: &str| {
        data.get(key)
            .map(|s| s.as_bytes().to_vec())
            .or_else(|| binary.get(key).map(|b| b.0.clone()))
    };
    let keys = data.keys().chain(binary.keys()).map(String::as_str);
    project(keys, lookup, items, default_mode, optional, |key| {
        SetUpError::ConfigMapKeyNotFound { key: key.to_owned() }
    })
}

/// secret.go `MakePayload`, over the decoded `data` (the API's base64 is undone by deserialization).
fn secret_payload(
    secret: Option<&Secret>,
    name: &str,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
) -> Result<BTreeMap<String, FileProjection>, SetUpError> {
    let empty = BTreeMap::new();
    let data = match secret {
        Some(secret) => secret.data.as_ref().unwrap_or(&empty),
        None if optional => &empty,
        None => {
            return Err(SetUpError::SecretNotFound {
                name: name.to_owned(),
            });
        }
    };
    project(
        data.keys().map(String::as_str),
        |key| data.get(key).map(|b| b.0.clone()),
        items,
        default_mode,
        optional,
        |key| SetUpError::SecretKeyNotFound { key: key.to_owned() },
    )
}

/// The shared body of the two `MakePayload`s.
fn project<'a>(
    keys: impl Iterator<Item = &'a str>,
    lookup: impl Fn(&str) -> Option<Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
    missing: impl Fn(&str) -> SetUpError,
) -> Result<BTreeMap<String, FileProjection>, SetUpError> {
    let mut payload = BTreeMap::new();
    match items.filter(|items| !items.is_empty()) {
        None => {
            for key in keys {
                if let Some(data) = lookup(key) {
                    payload.insert(
                        key.to_owned(),
                        FileProjection {
                            data,
                            mode: default_mode,
                        },
                    );
                }
            }
        }
        Some(items) => {
            for item in items {
                let Some(data) = lookup(&item.key) else {
                    if optional {
                        continue;
                    }
                    return Err(missing(&item.key));
                };
                let mode = item.mode.map_or(default_mode, |m| mode_of(Some(m)));
                payload.insert(item.path.clone(), FileProjection { data, mode });
            }
        }
    }
    Ok(payload)
}

/// downwardapi.go `CollectData`: `fieldRef` items from the pod's metadata (labels and annotations as
/// sorted `key="value"` lines), `resourceFieldRef` items from the named container's resources.
fn downward_api_payload(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    info: &RuntimeInfo,
) -> Result<BTreeMap<String, FileProjection>, SetUpError> {
    let mut payload = BTreeMap::new();
    let mut errors = Vec::new();
    for item in items {
        let mode = item.mode.map_or(default_mode, |m| mode_of(Some(m)));
        let value = if let Some(field) = &item.field_ref {
            env::extract_field_path(pod, &field.field_path)
        } else if let Some(resource) = &item.resource_field_ref {
            env::pod_container_resource_value(pod, resource, &info.node_allocatable)
        } else {
            Ok(String::new())
        };
        match value {
            Ok(value) => {
                payload.insert(
                    clean_path(&item.path),
                    FileProjection {
                        data: value.into_bytes(),
                        mode,
                    },
                );
            }
            Err(e) => errors.push(SetUpError::DownwardApi(e)),
        }
    }
    match errors.len() {
        0 => Ok(payload),
        1 => Err(errors.remove(0)),
        _ => Err(SetUpError::Aggregate(errors)),
    }
}

/// A `persistentVolumeClaim` volume: claim → bound volume → its hostPath (or `local.path`), set up like a
/// hostPath volume. A claim not bound yet fails, so the pod waits in ContainerCreating until it is.
fn claim_host_path(
    namespace: &str,
    source: &PersistentVolumeClaimVolumeSource,
    objects: &dyn ObjectLookup,
) -> Result<(PathBuf, bool), SetUpError> {
    let name = &source.claim_name;
    let claim = objects
        .persistent_volume_claim(namespace, name)
        .ok_or_else(|| SetUpError::ClaimNotFound { name: name.clone() })?;
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    let volume_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if phase != "Bound" || volume_name.is_empty() {
        return Err(SetUpError::ClaimNotBound {
            namespace: namespace.to_owned(),
            name: name.clone(),
            phase,
            volume: volume_name,
        });
    }
    let volume = objects
        .persistent_volume(&volume_name)
        .filter(|v| {
            v.spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some_and(|r| r.uid.is_none() || r.uid == claim.metadata.uid)
        })
        .ok_or(SetUpError::VolumeNotFound { name: volume_name })?;
    let spec = volume.spec.as_ref();
    let read_only = source.read_only == Some(true);
    if let Some(host_path) = spec.and_then(|s| s.host_path.as_ref()) {
        check_host_path(host_path)?;
        return Ok((PathBuf::from(&host_path.path), read_only));
    }
    if let Some(local) = spec.and_then(|s| s.local.as_ref()) {
        return Ok((PathBuf::from(&local.path), read_only));
    }
    Err(SetUpError::Unsupported(
        "persistentVolume sources other than hostPath and local".to_owned(),
    ))
}

/// hostpath `checkTypeInternal`: `DirectoryOrCreate` makes the directory (0755) and `FileOrCreate` the
/// file (0644) when missing; the other types must already be what they say. Unset or "" checks nothing.
fn check_host_path(source: &HostPathVolumeSource) -> Result<(), SetUpError> {
    let path = Path::new(&source.path);
    let not_a = |what| SetUpError::HostPathType {
        path: source.path.clone(),
        what,
    };
    let meta = fs::metadata(path).ok();
    let file_type = meta.as_ref().map(fs::Metadata::file_type);
    match source.type_.as_deref().unwrap_or("") {
        "" => Ok(()),
        "DirectoryOrCreate" if meta.is_none() => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(path)
            .map_err(io_err("creating directory", path)),
        "Directory" | "DirectoryOrCreate" => match file_type {
            Some(t) if t.is_dir() => Ok(()),
            _ => Err(not_a("directory")),
        },
        "FileOrCreate" if meta.is_none() => fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map(drop)
            .map_err(io_err("creating", path)),
        "File" | "FileOrCreate" => match file_type {
            Some(t) if t.is_file() => Ok(()),
            _ => Err(not_a("file")),
        },
        "Socket" => match file_type {
            Some(t) if t.is_socket() => Ok(()),
            _ => Err(not_a("socket file")),
        },
        "CharDevice" => match file_type {
            Some(t) if t.is_char_device() => Ok(()),
            _ => Err(not_a("character device")),
        },
        "BlockDevice" => match file_type {
            Some(t) if t.is_block_device() => Ok(()),
            _ => Err(not_a("block device")),
        },
        other => Err(SetUpError::InvalidHostPathType {
            type_: other.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Objects;
    use k8s_openapi::api::core::v1::VolumeMount;
    use serde_json::json;

    fn pod(volumes: serde_json::Value, mounts: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web", "namespace": "ns", "uid": "uid-1",
                "labels": {"tier": "front", "app": "web"},
                "annotations": {"note": "say \"hi\""}
            },
            "spec": {
                "containers": [{"name": "app", "image": "busybox", "volumeMounts": mounts,
                    "resources": {"limits": {"memory": "64Mi"}}}],
                "volumes": volumes
            }
        }))
        .unwrap()
    }

    fn config_map(data: serde_json::Value) -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": "cfg", "namespace": "ns"}, "data": data})).unwrap()
    }

    fn host(dir: &tempfile::TempDir) -> VolumeHost {
        VolumeHost::new(dir.path()).unwrap()
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap()
    }

    fn container(pod: &Pod) -> &Container {
        &pod.spec.as_ref().unwrap().containers[0]
    }

    #[test]
    fn config_map_volume_writes_items_with_their_modes() {
        let dir = tempfile::tempdir().unwrap();
        let pod = pod(
            json!([{"name": "conf", "configMap": {"name": "cfg", "defaultMode": 0o600,
                "items": [{"key": "a", "path": "dir/a.txt"}, {"key": "b", "path": "b.txt", "mode": 0o640}]}}]),
            json!([{"name": "conf", "mountPath": "/etc/conf"}]),
        );
        let objects =
            Objects::new().with_config_map(config_map(json!({"a": "alpha", "b": "beta", "c": "gamma"})));
        let volumes = host(&dir)
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap();
        let vol_dir = dir.path().join("pods/uid-1/volumes/kubernetes.io~configmap/conf");
        assert_eq!(read(&vol_dir.join("dir/a.txt")), "alpha");
        assert_eq!(read(&vol_dir.join("b.txt")), "beta");
        assert!(!vol_dir.join("c").exists(), "keys not in items are not projected");
        assert_eq!(mode(&vol_dir.join("dir/a.txt")), 0o600);
        assert_eq!(mode(&vol_dir.join("b.txt")), 0o640);
        assert_eq!(mode(&vol_dir), 0o777);

        let mounts = volumes.container_mounts(container(&pod), &[]).unwrap();
        assert_eq!(
            mounts.binds,
            [Mount {
                host_path: vol_dir.to_string_lossy().into_owned(),
                container_path: "/etc/conf".into(),
                read_only: true,
            }]
        );
    }

    #[test]
    fn atomic_writer_layout_is_data_symlink_and_per_key_links() {
        let dir = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(dir.path());
        let payload = BTreeMap::from([
            (
                "key".to_owned(),
                FileProjection {
                    data: b"v1".to_vec(),
                    mode: 0o644,
                },
            ),
            (
                "sub/file".to_owned(),
                FileProjection {
                    data: b"f".to_vec(),
                    mode: 0o644,
                },
            ),
        ]);
        assert!(writer.write(&payload).unwrap());
        let ts = fs::read_link(dir.path().join("..data")).unwrap();
        let ts_name = ts.to_string_lossy().into_owned();
        assert!(ts.is_relative());
        // ..YYYY_MM_DD_HH_MM_SS.<digits>
        let (stamp, digits) = ts_name.strip_prefix("..").unwrap().split_once('.').unwrap();
        assert_eq!(stamp.len(), 19, "{ts_name}");
        assert!(
            stamp.split('_').all(|p| p.chars().all(|c| c.is_ascii_digit())),
            "{ts_name}"
        );
        assert!(
            !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()),
            "{ts_name}"
        );
        assert_eq!(mode(&dir.path().join(&ts)), 0o755);
        assert_eq!(
            fs::read_link(dir.path().join("key")).unwrap(),
            Path::new("..data/key")
        );
        assert_eq!(
            fs::read_link(dir.path().join("sub")).unwrap(),
            Path::new("..data/sub")
        );
        assert_eq!(read(&dir.path().join("key")), "v1");
        assert_eq!(read(&dir.path().join("sub/file")), "f");
        assert!(!dir.path().join("..data_tmp").exists());

        // The same payload again changes nothing.
        assert!(!writer.write(&payload).unwrap());
        assert_eq!(fs::read_link(dir.path().join("..data")).unwrap(), ts);
    }

    #[test]
    fn update_switches_to_new_contents_and_prunes_removed_keys() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(&dir);
        let pod = pod(json!([{"name": "conf", "configMap": {"name": "cfg"}}]), json!([]));
        let info = RuntimeInfo::default();
        let objects = Objects::new().with_config_map(config_map(json!({"a": "1", "gone": "x"})));
        host.setup_pod(&pod, &objects, &info).unwrap();
        let vol_dir = dir.path().join("pods/uid-1/volumes/kubernetes.io~configmap/conf");
        let old_ts = fs::read_link(vol_dir.join("..data")).unwrap();
        assert_eq!(
            host.update_pod(&pod, &objects, &info).unwrap(),
            Vec::<String>::new()
        );

        let objects = Objects::new().with_config_map(config_map(json!({"a": "2", "b": "new"})));
        assert_eq!(host.update_pod(&pod, &objects, &info).unwrap(), ["conf"]);
        let new_ts = fs::read_link(vol_dir.join("..data")).unwrap();
        assert_ne!(old_ts, new_ts);
        assert!(!vol_dir.join(&old_ts).exists(), "the old version is removed");
        assert_eq!(read(&vol_dir.join("a")), "2");
        assert_eq!(read(&vol_dir.join("b")), "new");
        assert!(fs::symlink_metadata(vol_dir.join("gone")).is_err());
        let mut entries: Vec<_> = fs::read_dir(&vol_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries, [new_ts.to_string_lossy().as_ref(), "..data", "a", "b"]);

        // A ConfigMap that disappears fails the update and leaves the files as they were.
        let err = host.update_pod(&pod, &Objects::new(), &info).unwrap_err();
        assert!(err.is_missing_object());
        assert_eq!(read(&vol_dir.join("a")), "2");
    }

    #[test]
    fn secret_volume_decodes_base64_and_applies_the_default_mode() {
        let dir = tempfile::tempdir().unwrap();
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "creds", "namespace": "ns"},
            "data": {"password": "czNjcjN0", "token": "AAEC"}
        }))
        .unwrap();
        let pod = pod(
            json!([{"name": "creds", "secret": {"secretName": "creds", "defaultMode": 420}},
                   {"name": "tight", "secret": {"secretName": "creds", "defaultMode": 0o400}}]),
            json!([]),
        );
        let objects = Objects::new().with_secret(secret);
        host(&dir)
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap();
        let base = dir.path().join("pods/uid-1/volumes/kubernetes.io~secret");
        assert_eq!(read(&base.join("creds/password")), "s3cr3t");
        assert_eq!(fs::read(base.join("creds/token")).unwrap(), [0, 1, 2]);
        assert_eq!(mode(&base.join("creds/password")), 0o644);
        assert_eq!(mode(&base.join("tight/password")), 0o400);
    }

    #[test]
    fn downward_api_volume_writes_sorted_quoted_labels() {
        let dir = tempfile::tempdir().unwrap();
        let pod = pod(
            json!([{"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "app", "resource": "limits.memory",
                    "divisor": "1Mi"}}
            ]}}]),
            json!([]),
        );
        host(&dir)
            .setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
            .unwrap();
        let vol = dir
            .path()
            .join("pods/uid-1/volumes/kubernetes.io~downward-api/info");
        assert_eq!(read(&vol.join("labels")), "app=\"web\"\ntier=\"front\"");
        assert_eq!(read(&vol.join("annotations")), "note=\"say \\\"hi\\\"\"");
        assert_eq!(read(&vol.join("name")), "web");
        assert_eq!(read(&vol.join("mem")), "64");
        assert_eq!(mode(&vol.join("labels")), 0o644);
    }

    #[test]
    fn projected_volume_merges_sources_with_the_service_account_token() {
        let dir = tempfile::tempdir().unwrap();
        let pod = pod(
            json!([{"name": "all", "projected": {"defaultMode": 0o440, "sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "cfg", "items": [{"key": "a", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
                {"secret": {"name": "absent", "optional": true}}
            ]}}]),
            json!([]),
        );
        let mut objects = Objects::new().with_config_map(config_map(json!({"a": "PEM"})));
        objects.insert_token("", 3600, Ok("jwt-1".into()));
        host(&dir)
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap();
        let vol = dir.path().join("pods/uid-1/volumes/kubernetes.io~projected/all");
        assert_eq!(read(&vol.join("ca.crt")), "PEM");
        assert_eq!(read(&vol.join("namespace")), "ns");
        assert_eq!(read(&vol.join("token")), "jwt-1");
        assert_eq!(mode(&vol.join("ca.crt")), 0o440);
        assert_eq!(mode(&vol.join("token")), 0o440);

        // A renewed token replaces the file; a token that could not be had fails the volume, and the
        // rest of it keeps its previous files.
        objects.insert_token("", 3600, Ok("jwt-2".into()));
        assert_eq!(
            host(&dir)
                .update_pod(&pod, &objects, &RuntimeInfo::default())
                .unwrap(),
            ["all"]
        );
        assert_eq!(read(&vol.join("token")), "jwt-2");
        objects.insert_token(
            "",
            3600,
            Err("failed to fetch token: serviceaccounts \"x\" not found".into()),
        );
        let err = host(&dir)
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"all\" : failed to fetch token: serviceaccounts \"x\" not found"
        );
        assert_eq!(read(&vol.join("token")), "jwt-2");
        let err = host(&dir)
            .setup_pod(
                &pod,
                &Objects::new().with_config_map(config_map(json!({"a": "PEM"}))),
                &RuntimeInfo::default(),
            )
            .unwrap_err();
        assert!(err.to_string().contains("failed to fetch token"), "{err}");
    }

    #[test]
    fn missing_config_map_fails_with_upstream_text_and_optional_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let host = host(&dir);
        let required = pod(json!([{"name": "conf", "configMap": {"name": "cfg"}}]), json!([]));
        let err = host
            .setup_pod(&required, &Objects::new(), &RuntimeInfo::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"conf\" : configmap \"cfg\" not found"
        );
        assert!(err.is_missing_object());

        let missing_key = pod(
            json!([{"name": "conf", "configMap": {"name": "cfg", "items": [{"key": "nope", "path": "x"}]}}]),
            json!([]),
        );
        let objects = Objects::new().with_config_map(config_map(json!({"a": "1"})));
        let err = host
            .setup_pod(&missing_key, &objects, &RuntimeInfo::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"conf\" : configmap references non-existent config key: nope"
        );

        let optional = pod(
            json!([{"name": "conf", "configMap": {"name": "cfg", "optional": true}}]),
            json!([]),
        );
        host.setup_pod(&optional, &Objects::new(), &RuntimeInfo::default())
            .unwrap();
        let vol = dir.path().join("pods/uid-1/volumes/kubernetes.io~configmap/conf");
        assert!(fs::read_link(vol.join("..data")).is_ok());
    }

    #[test]
    fn host_path_directory_or_create_creates_and_directory_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("made/here");
        let pod = pod(
            json!([{"name": "h", "hostPath": {"path": target, "type": "DirectoryOrCreate"}}]),
            json!([{"name": "h", "mountPath": "/data", "readOnly": true}]),
        );
        let volumes = host(&dir)
            .setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
            .unwrap();
        assert!(target.is_dir());
        assert_eq!(mode(&target), 0o755 & !current_umask());
        let mounts = volumes.container_mounts(container(&pod), &[]).unwrap();
        assert_eq!(mounts.binds[0].host_path, target.to_string_lossy());
        assert!(mounts.binds[0].read_only);

        let file = dir.path().join("plain");
        fs::write(&file, "x").unwrap();
        for (type_, path, want) in [
            (
                "Directory",
                &file,
                format!(
                    "hostPath type check failed: {} is not a directory",
                    file.display()
                ),
            ),
            (
                "Directory",
                &dir.path().join("absent"),
                format!(
                    "hostPath type check failed: {} is not a directory",
                    dir.path().join("absent").display()
                ),
            ),
            (
                "File",
                &target,
                format!("hostPath type check failed: {} is not a file", target.display()),
            ),
            (
                "Socket",
                &file,
                format!(
                    "hostPath type check failed: {} is not a socket file",
                    file.display()
                ),
            ),
            ("Bogus", &file, "Bogus is an invalid volume type".to_owned()),
        ] {
            let pod = pod_with_host_path(path, type_);
            let err = host(&dir)
                .setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("MountVolume.SetUp failed for volume \"h\" : {want}")
            );
        }
        let created = dir.path().join("new-file");
        host(&dir)
            .setup_pod(
                &pod_with_host_path(&created, "FileOrCreate"),
                &Objects::new(),
                &RuntimeInfo::default(),
            )
            .unwrap();
        assert!(created.is_file());
    }

    fn pod_with_host_path(path: &Path, type_: &str) -> Pod {
        pod(
            json!([{"name": "h", "hostPath": {"path": path, "type": type_}}]),
            json!([]),
        )
    }

    /// The process umask, read without changing it (from /proc; 0o022 when unavailable).
    fn current_umask() -> u32 {
        fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            })
            .unwrap_or(0o022)
    }

    #[test]
    fn empty_dir_is_a_shared_directory_and_memory_medium_is_a_tmpfs() {
        let dir = tempfile::tempdir().unwrap();
        let pod = pod(
            json!([{"name": "scratch", "emptyDir": {}},
                   {"name": "fast", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}]),
            json!([{"name": "scratch", "mountPath": "/scratch"}, {"name": "fast", "mountPath": "/fast"}]),
        );
        let volumes = host(&dir)
            .setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
            .unwrap();
        let scratch = dir
            .path()
            .join("pods/uid-1/volumes/kubernetes.io~empty-dir/scratch");
        assert!(scratch.is_dir());
        assert_eq!(mode(&scratch), 0o777);
        assert!(
            !dir.path()
                .join("pods/uid-1/volumes/kubernetes.io~empty-dir/fast")
                .exists()
        );
        let mounts = volumes.container_mounts(container(&pod), &[]).unwrap();
        assert_eq!(mounts.binds.len(), 1);
        assert_eq!(mounts.binds[0].container_path, "/scratch");
        assert!(!mounts.binds[0].read_only);
        assert_eq!(
            mounts.tmpfs,
            [TmpfsMount {
                container_path: "/fast".into(),
                size_bytes: Some(64 << 20),
                read_only: false,
            }]
        );
    }

    #[test]
    fn sub_path_mounts_create_the_directory_and_stay_inside_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let pod = pod(
            json!([{"name": "scratch", "emptyDir": {}}, {"name": "conf", "configMap": {"name": "cfg"}}]),
            json!([
                {"name": "scratch", "mountPath": "/logs", "subPath": "logs/app"},
                {"name": "scratch", "mountPath": "/per-pod", "subPathExpr": "$(POD_NAME)"},
                {"name": "conf", "mountPath": "/etc/app.conf", "subPath": "app.conf"}
            ]),
        );
        let objects = Objects::new().with_config_map(config_map(json!({"app.conf": "x=1"})));
        let volumes = host(&dir)
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap();
        let env = [("POD_NAME".to_owned(), "web".to_owned())];
        let mounts = volumes.container_mounts(container(&pod), &env).unwrap();
        let scratch = dir
            .path()
            .canonicalize()
            .unwrap()
            .join("pods/uid-1/volumes/kubernetes.io~empty-dir/scratch");
        assert_eq!(
            mounts.binds[0].host_path,
            scratch.join("logs/app").to_string_lossy()
        );
        assert!(scratch.join("logs/app").is_dir());
        assert_eq!(mounts.binds[1].host_path, scratch.join("web").to_string_lossy());
        // The configMap key resolves through ..data to the current timestamped file.
        assert!(
            mounts.binds[2]
                .host_path
                .contains("/kubernetes.io~configmap/conf/..20")
        );
        assert_eq!(read(Path::new(&mounts.binds[2].host_path)), "x=1");
        assert!(mounts.binds[2].read_only);

        // A missing subPathExpr variable, `..`, absolute paths and escaping symlinks are refused.
        assert_eq!(
            volumes
                .container_mounts(container(&pod), &[])
                .unwrap_err()
                .to_string(),
            "missing value for POD_NAME"
        );
        let with_mount = |sub_path: &str| Container {
            name: "app".into(),
            volume_mounts: Some(vec![VolumeMount {
                name: "scratch".into(),
                mount_path: "/x".into(),
                sub_path: Some(sub_path.into()),
                ..VolumeMount::default()
            }]),
            ..Container::default()
        };
        assert_eq!(
            volumes
                .container_mounts(&with_mount("../etc"), &[])
                .unwrap_err()
                .to_string(),
            "unable to provision SubPath `../etc`: must not contain '..'"
        );
        assert_eq!(
            volumes
                .container_mounts(&with_mount("/etc"), &[])
                .unwrap_err()
                .to_string(),
            "error SubPath `/etc` must not be an absolute path"
        );
        symlink("/", scratch.join("escape")).unwrap();
        let err = volumes
            .container_mounts(&with_mount("escape/etc"), &[])
            .unwrap_err();
        assert!(matches!(err, VolumeError::SubPathOutside { .. }), "{err}");
        let err = volumes.container_mounts(&with_mount("escape"), &[]).unwrap_err();
        assert!(matches!(err, VolumeError::SubPathOutside { .. }), "{err}");
    }

    #[test]
    fn mounts_of_unknown_volumes_and_unsupported_types_fail() {
        let dir = tempfile::tempdir().unwrap();
        let pod = pod(json!([]), json!([{"name": "ghost", "mountPath": "/g"}]));
        let volumes = host(&dir)
            .setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
            .unwrap();
        assert_eq!(
            volumes
                .container_mounts(container(&pod), &[])
                .unwrap_err()
                .to_string(),
            "cannot find volume \"ghost\" to mount into container \"app\""
        );
        let nfs = pod_json_volume(json!({"name": "data", "nfs": {"server": "s", "path": "/"}}));
        let err = host(&dir)
            .setup_pod(&nfs, &Objects::new(), &RuntimeInfo::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"data\" : nfs volumes are not supported by kubeling"
        );
    }

    #[test]
    fn claim_volumes_mount_the_bound_volumes_host_path_and_wait_while_unbound() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("pv-dir");
        let pod = pod(
            json!([{"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}}]),
            json!([{"name": "www", "mountPath": "/data"}]),
        );
        let claim =
            |phase: &str, volume: Option<&str>| -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
                serde_json::from_value(json!({
                    "metadata": {"name": "www-web-0", "namespace": "ns", "uid": "c-uid"},
                    "spec": {"volumeName": volume},
                    "status": {"phase": phase}
                }))
                .unwrap()
            };
        let volume: k8s_openapi::api::core::v1::PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pvc-c-uid"},
            "spec": {"claimRef": {"namespace": "ns", "name": "www-web-0", "uid": "c-uid"},
                     "hostPath": {"path": target, "type": "DirectoryOrCreate"}}
        }))
        .unwrap();
        let host = host(&dir);
        let err = host
            .setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"www\" : persistentvolumeclaim \"www-web-0\" not found"
        );
        assert!(err.is_missing_object());
        let mut objects = Objects::new();
        objects.insert_claim(claim("Pending", None));
        let err = host
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "MountVolume.SetUp failed for volume \"www\" : PVC ns/www-web-0 has non-bound phase (\"Pending\") or \
             empty pvc.Spec.VolumeName (\"\")"
        );
        objects.insert_claim(claim("Bound", Some("pvc-c-uid")));
        let err = host
            .setup_pod(&pod, &objects, &RuntimeInfo::default())
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("persistentvolume \"pvc-c-uid\" not found"),
            "{err}"
        );
        objects.insert_volume(volume);
        let volumes = host.setup_pod(&pod, &objects, &RuntimeInfo::default()).unwrap();
        assert!(target.is_dir(), "DirectoryOrCreate made it");
        let mounts = volumes.container_mounts(container(&pod), &[]).unwrap();
        assert_eq!(mounts.binds[0].host_path, target.to_string_lossy());
        assert_eq!(mounts.binds[0].container_path, "/data");
        assert!(!mounts.binds[0].read_only);
        // The pod directory's removal leaves the volume alone.
        std::fs::write(target.join("keep"), "x").unwrap();
        host.remove_pod("uid-1").unwrap();
        assert!(target.join("keep").exists());
    }

    fn pod_json_volume(volume: serde_json::Value) -> Pod {
        pod(json!([volume]), json!([]))
    }

    #[test]
    fn remove_pod_deletes_the_pod_directory_but_not_host_paths() {
        let dir = tempfile::tempdir().unwrap();
        let host_dir = dir.path().join("host-data");
        fs::create_dir(&host_dir).unwrap();
        fs::write(host_dir.join("keep"), "x").unwrap();
        let pod = pod(
            json!([{"name": "scratch", "emptyDir": {}}, {"name": "h", "hostPath": {"path": host_dir}}]),
            json!([]),
        );
        let host = host(&dir);
        host.setup_pod(&pod, &Objects::new(), &RuntimeInfo::default())
            .unwrap();
        // A container's symlink to the host path inside the emptyDir must not lead removal outside.
        symlink(
            &host_dir,
            dir.path()
                .join("pods/uid-1/volumes/kubernetes.io~empty-dir/scratch/link"),
        )
        .unwrap();
        assert_eq!(host.pod_uids_on_disk().unwrap(), ["uid-1"]);
        host.remove_pod("uid-1").unwrap();
        assert!(!dir.path().join("pods/uid-1").exists());
        assert!(host_dir.join("keep").exists());
        host.remove_pod("uid-1").unwrap();
        assert!(host.pod_uids_on_disk().unwrap().is_empty());
        assert!(matches!(
            host.remove_pod("../x"),
            Err(VolumeError::InvalidName { .. })
        ));
    }

    #[test]
    fn atomic_writer_rejects_paths_that_escape() {
        let dir = tempfile::tempdir().unwrap();
        let writer = AtomicWriter::new(dir.path());
        for (path, want) in [
            ("../x", "invalid path: must not contain '..': ../x"),
            ("/abs", "invalid path: must be relative path: /abs"),
            ("..data", "invalid path: must not start with '..': ..data"),
            ("", "invalid path: must not be empty: \"\""),
        ] {
            let payload = BTreeMap::from([(
                path.to_owned(),
                FileProjection {
                    data: vec![],
                    mode: 0o644,
                },
            )]);
            assert_eq!(writer.write(&payload).unwrap_err().to_string(), want);
        }
    }
}
