//! Every built-in kind served as data: `kubectl api-resources` lists them as kube-apiserver 1.33 does, and a
//! manifest holding one object of every kind applies, re-applies unchanged, reads back and deletes.

mod common;

use common::Cluster;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/kinds/every-kind.yaml");

#[test]
fn api_resources_list_the_step_7_kinds_as_upstream() {
    let c = Cluster::start();
    let out = c.ok(&["api-resources", "--no-headers"]);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    for want in [
        "podtemplates v1 true PodTemplate",
        "componentstatuses cs v1 false ComponentStatus",
        "bindings v1 true Binding",
        "ingresses ing networking.k8s.io/v1 true Ingress",
        "ipaddresses ip networking.k8s.io/v1 false IPAddress",
        "horizontalpodautoscalers hpa autoscaling/v2 true HorizontalPodAutoscaler",
        "priorityclasses pc scheduling.k8s.io/v1 false PriorityClass",
        "certificatesigningrequests csr certificates.k8s.io/v1 false CertificateSigningRequest",
        "apiservices apiregistration.k8s.io/v1 false APIService",
        "flowschemas flowcontrol.apiserver.k8s.io/v1 false FlowSchema",
        "volumeattachments storage.k8s.io/v1 false VolumeAttachment",
    ] {
        let want: Vec<&str> = want.split_whitespace().collect();
        assert!(rows.contains(&want), "{want:?} missing from:\n{out}");
    }
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
    c.ok(&["delete", "-f", FIXTURE, "--wait=false"]);
}
