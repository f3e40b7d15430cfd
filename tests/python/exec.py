"""The Python client's exec stream (it offers only v4.channel.k8s.io) against kubeling up.

argv: kubeconfig, pod name (a running pod whose container has the testbox shell).
"""
import sys

from kubernetes import client, config
from kubernetes.stream import stream

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
pod = sys.argv[2]

out = stream(core.connect_get_namespaced_pod_exec, pod, "default",
             command=["sh", "-c", "echo from-python"],
             stderr=True, stdin=False, stdout=True, tty=False)
assert "from-python" in out, out

resp = stream(core.connect_get_namespaced_pod_exec, pod, "default",
              command=["sh", "-c", "exit 7"], stderr=True, stdin=False, stdout=True, tty=False,
              _preload_content=False)
resp.run_forever(timeout=10)
assert resp.returncode == 7, resp.returncode
print("python exec: ok")
