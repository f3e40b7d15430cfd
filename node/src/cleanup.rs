//! Removing everything a cluster made in Docker: its pods' containers on every node, then its service gateway
//! and network. Containers outlive the node agent by design (`kubeling up` can stop and adopt them again); this is
//! for callers that end a cluster for good, such as the test harness and `kubeling test`.

use std::collections::HashMap;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};

use crate::runtime::naming::LABEL_KUBELING_CLUSTER;

/// Removes (force) every container labelled with `cluster_id`, then the cluster's gateway and network. Returns
/// how many pod containers were removed. Errors from Docker are returned; containers already gone are not one.
pub async fn remove_cluster(docker: &Docker, cluster_id: &str) -> Result<usize, bollard::errors::Error> {
    let filters = HashMap::from([("label", vec![format!("{LABEL_KUBELING_CLUSTER}={cluster_id}")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let found = docker.list_containers(Some(options)).await?;
    let mut removed = 0;
    for c in found {
        let Some(id) = c.id else { continue };
        let options = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
        match docker.remove_container(&id, Some(options)).await {
            Ok(()) => removed += 1,
            Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {}
            Err(e) => return Err(e),
        }
    }
    crate::network::remove(docker, cluster_id).await;
    Ok(removed)
}

/// [`remove_cluster`] with a fresh connection to the local engine, for the cluster whose node data dir is
/// `node_dir` (its `cluster-id` file); nothing to do when the file is missing.
pub async fn remove_cluster_of(node_dir: &std::path::Path) -> Result<usize, bollard::errors::Error> {
    let Ok(id) = std::fs::read_to_string(node_dir.join("cluster-id")) else {
        return Ok(0);
    };
    let docker = Docker::connect_with_local_defaults()?;
    remove_cluster(&docker, id.trim()).await
}
