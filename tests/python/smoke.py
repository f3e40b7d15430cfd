"""The Python `kubernetes` client against kubeling: discovery, CRUD, watch, errors.

Run by tests/python_client.rs with the kubeconfig of a fresh cluster as argv[1].
"""
import sys

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()

version = client.VersionApi().get_code()
assert version.git_version.startswith("v1.33."), version

names = [ns.metadata.name for ns in core.list_namespace().items]
for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
    assert ns in names, names

resources = [r.name for r in core.get_api_resources().resources]
assert "pods" in resources and "pods/status" in resources, resources

cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="py"), data={"a": "1"})
created = core.create_namespaced_config_map("default", cm)
rv = created.metadata.resource_version

pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="py-pod", labels={"app": "py"}),
    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox:1.36")]),
)
core.create_namespaced_pod("default", pod)
listed = core.list_namespaced_pod("default", label_selector="app=py")
assert [p.metadata.name for p in listed.items] == ["py-pod"], listed
assert listed.items[0].status.phase == "Pending"

# A watch from the configmap's revision sees the later changes, each once.
# A list body is sent as a JSON patch, a dict as a strategic merge patch.
core.patch_namespaced_config_map("py", "default", [{"op": "replace", "path": "/data/a", "value": "2"}])
core.patch_namespaced_config_map("py", "default", {"metadata": {"labels": {"smp": "yes"}}})
core.delete_namespaced_config_map("py", "default")
seen = []
w = watch.Watch()
for event in w.stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=5):
    seen.append((event["type"], event["object"].metadata.name))
    if event["type"] == "DELETED":
        w.stop()
assert seen == [("MODIFIED", "py"), ("MODIFIED", "py"), ("DELETED", "py")], seen

try:
    core.read_namespaced_pod("missing", "default")
    raise AssertionError("expected a 404")
except ApiException as e:
    assert e.status == 404, e

status = core.delete_namespaced_pod("py-pod", "default")
assert status.metadata.name == "py-pod"
print("python client: ok")
