"""The Python client's port-forward (the v4 channel protocol) against kubeling up.

argv: kubeconfig, pod name (a running pod serving HTTP on 8080 with testbox `serve`).
"""
import sys

from kubernetes import client, config
from kubernetes.stream import portforward

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
pod = sys.argv[2]

pf = portforward(core.connect_get_namespaced_pod_portforward, pod, "default", ports="8080")
sock = pf.socket(8080)
sock.setblocking(True)
sock.settimeout(30)
sock.sendall(b"GET /hostname HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
data = b""
while True:
    chunk = sock.recv(65536)
    if not chunk:
        break
    data += chunk
sock.close()
assert data.startswith(b"HTTP/1.1 200"), data
assert data.endswith(b"\r\n\r\n" + pod.encode() + b"\n"), data
assert pf.error(8080) is None, pf.error(8080)
print("python portforward: ok")
