//! Every built-in kind served as data: `kubectl api-resources` lists them as kube-apiserver 1.33 does, and a
//! manifest holding one object of every kind applies, re-applies unchanged, reads back and deletes.

mod common;

use common::Cluster;
use std::collections::BTreeSet;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/kinds/every-kind.yaml");

/// `kubectl api-resources` of kube-apiserver 1.33 with its default groups (GA only; the beta groups it
/// serves off by default are off here too): NAME, SHORTNAMES, APIVERSION, NAMESPACED, KIND.
const UPSTREAM_API_RESOURCES: &str = "
bindings v1 true Binding
componentstatuses cs v1 false ComponentStatus
configmaps cm v1 true ConfigMap
endpoints ep v1 true Endpoints
events ev v1 true Event
limitranges limits v1 true LimitRange
namespaces ns v1 false Namespace
nodes no v1 false Node
persistentvolumeclaims pvc v1 true PersistentVolumeClaim
persistentvolumes pv v1 false PersistentVolume
pods po v1 true Pod
podtemplates v1 true PodTemplate
replicationcontrollers rc v1 true ReplicationController
resourcequotas quota v1 true ResourceQuota
secrets v1 true Secret
serviceaccounts sa v1 true ServiceAccount
services svc v1 true Service
mutatingwebhookconfigurations admissionregistration.k8s.io/v1 false MutatingWebhookConfiguration
validatingadmissionpolicies admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicy
validatingadmissionpolicybindings admissionregistration.k8s.io/v1 false ValidatingAdmissionPolicyBinding
validatingwebhookconfigurations admissionregistration.k8s.io/v1 false ValidatingWebhookConfiguration
customresourcedefinitions crd,crds apiextensions.k8s.io/v1 false CustomResourceDefinition
apiservices apiregistration.k8s.io/v1 false APIService
controllerrevisions apps/v1 true ControllerRevision
daemonsets ds apps/v1 true DaemonSet
deployments deploy apps/v1 true Deployment
replicasets rs apps/v1 true ReplicaSet
statefulsets sts apps/v1 true StatefulSet
selfsubjectreviews authentication.k8s.io/v1 false SelfSubjectReview
tokenreviews authentication.k8s.io/v1 false TokenReview
localsubjectaccessreviews authorization.k8s.io/v1 true LocalSubjectAccessReview
selfsubjectaccessreviews authorization.k8s.io/v1 false SelfSubjectAccessReview
selfsubjectrulesreviews authorization.k8s.io/v1 false SelfSubjectRulesReview
subjectaccessreviews authorization.k8s.io/v1 false SubjectAccessReview
horizontalpodautoscalers hpa autoscaling/v2 true HorizontalPodAutoscaler
cronjobs cj batch/v1 true CronJob
jobs batch/v1 true Job
certificatesigningrequests csr certificates.k8s.io/v1 false CertificateSigningRequest
leases coordination.k8s.io/v1 true Lease
endpointslices discovery.k8s.io/v1 true EndpointSlice
events ev events.k8s.io/v1 true Event
flowschemas flowcontrol.apiserver.k8s.io/v1 false FlowSchema
prioritylevelconfigurations flowcontrol.apiserver.k8s.io/v1 false PriorityLevelConfiguration
ingressclasses networking.k8s.io/v1 false IngressClass
ingresses ing networking.k8s.io/v1 true Ingress
ipaddresses ip networking.k8s.io/v1 false IPAddress
networkpolicies netpol networking.k8s.io/v1 true NetworkPolicy
servicecidrs networking.k8s.io/v1 false ServiceCIDR
runtimeclasses node.k8s.io/v1 false RuntimeClass
poddisruptionbudgets pdb policy/v1 true PodDisruptionBudget
clusterrolebindings rbac.authorization.k8s.io/v1 false ClusterRoleBinding
clusterroles rbac.authorization.k8s.io/v1 false ClusterRole
rolebindings rbac.authorization.k8s.io/v1 true RoleBinding
roles rbac.authorization.k8s.io/v1 true Role
priorityclasses pc scheduling.k8s.io/v1 false PriorityClass
csidrivers storage.k8s.io/v1 false CSIDriver
csinodes storage.k8s.io/v1 false CSINode
csistoragecapacities storage.k8s.io/v1 true CSIStorageCapacity
storageclasses sc storage.k8s.io/v1 false StorageClass
volumeattachments storage.k8s.io/v1 false VolumeAttachment
";

#[test]
fn api_resources_lists_what_kube_apiserver_1_33_lists() {
    let c = Cluster::start();
    let out = c.ok(&["api-resources", "--no-headers"]);
    let ours: BTreeSet<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    let upstream: BTreeSet<Vec<&str>> = UPSTREAM_API_RESOURCES
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let missing: Vec<_> = upstream.difference(&ours).collect();
    let extra: Vec<_> = ours.difference(&upstream).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing: {missing:?}\nnot upstream's: {extra:?}\n{out}"
    );
    // And each one answers `kubectl get` (create-only and review kinds have no list, as upstream).
    let listable: Vec<String> = upstream
        .iter()
        .filter(|r| !r[0].ends_with("reviews") && r[0] != "bindings")
        .map(|r| {
            let group = r[r.len() - 3].rsplit_once('/').map_or("", |(g, _)| g);
            if group.is_empty() {
                r[0].to_string()
            } else {
                format!("{}.{group}", r[0])
            }
        })
        .collect();
    c.ok(&["get", &listable.join(","), "-A"]);
}

#[test]
fn a_manifest_of_every_kind_applies_reapplies_unchanged_and_deletes() {
    let c = Cluster::start();
    let applied = c.ok(&["apply", "-f", FIXTURE]);
    assert!(!applied.contains("unchanged"), "{applied}");
    let again = c.ok(&["apply", "-f", FIXTURE]);
    for line in again.lines() {
        assert!(line.ends_with("unchanged"), "re-apply changed something: {line}");
    }
    let got = c.ok(&["get", "-f", FIXTURE, "-o", "name"]);
    assert_eq!(got.lines().count(), applied.lines().count(), "{got}");
    let hpa_v1 = c.ok(&[
        "get",
        "horizontalpodautoscalers.v1.autoscaling",
        "-n",
        "kinds",
        "web",
        "-o",
        "jsonpath={.spec.targetCPUUtilizationPercentage}",
    ]);
    assert_eq!(hpa_v1, "70");
    let pcs = c.ok(&["get", "priorityclasses", "-o", "name"]);
    assert!(
        pcs.contains("system-node-critical") && pcs.contains("system-cluster-critical"),
        "{pcs}"
    );
    // The objects work as their kinds do: the CSR records who asked, the RoleBinding grants, the CRD serves.
    let csr = c.ok(&["get", "csr", "kinds-client", "-o", "jsonpath={.spec.username}"]);
    assert_eq!(csr, "kubeling-admin");
    let can = c.ok(&[
        "auth",
        "can-i",
        "list",
        "pods",
        "-n",
        "kinds",
        "--as=system:serviceaccount:kinds:app",
    ]);
    assert_eq!(can.trim(), "yes");
    // A review is created from a manifest as upstream, validated against the OpenAPI documents.
    let sar = "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: system:serviceaccount:kinds:app\n  resourceAttributes: {namespace: kinds, verb: get, resource: configmaps}\n";
    let allowed = c.ok_stdin(&["create", "-f", "-", "-o", "jsonpath={.status.allowed}"], sar);
    assert_eq!(allowed, "true");
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.kinds.example.com",
        "--timeout=10s",
    ]);
    c.ok(&["get", "gadgets", "-n", "kinds"]);
    c.ok(&["delete", "-f", FIXTURE, "--wait=false"]);
}
