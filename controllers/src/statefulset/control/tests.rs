use super::*;
use serde_json::json;

fn set(extra: Value) -> StatefulSet {
    let mut v = json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "set-uid", "generation": 2},
        "spec": {
            "replicas": 3,
            "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "sts"}},
            "template": {"metadata": {"labels": {"app": "sts"}},
                         "spec": {"containers": [{"name": "c", "image": "v1"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}}}]
        }
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn merge(a: &mut Value, b: Value) {
    if let (Some(a), Value::Object(b)) = (a.as_object_mut(), &b) {
        for (k, v) in b {
            match a.get_mut(k) {
                Some(x) if x.is_object() && v.is_object() => merge(x, v.clone()),
                _ => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

fn t0() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().unwrap()
}

/// A pod `web-N` in `phase`, ready or not, at revision `rev`.
fn pod(name: &str, phase: &str, ready: bool, rev: &str) -> Arc<Pod> {
    let (_, ordinal) = identity::parent_and_ordinal(name).unwrap();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
                         "labels": {"app": "sts", identity::POD_NAME_LABEL: name,
                                    identity::POD_INDEX_LABEL: ordinal.to_string(),
                                    identity::REVISION_LABEL: rev}},
            "spec": {"containers": [{"name": "c", "image": "v1"}],
                     "volumes": [{"name": "www", "persistentVolumeClaim": {"claimName": format!("www-{name}")}}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                                                       "lastTransitionTime": "2025-12-31T00:00:00Z"}]}
        }))
        .unwrap(),
    )
}

fn terminating(p: Arc<Pod>) -> Arc<Pod> {
    let mut p = (*p).clone();
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    Arc::new(p)
}

fn claims(names: &[&str]) -> HashMap<String, Arc<PersistentVolumeClaim>> {
    names
        .iter()
        .map(|n| {
            let c: PersistentVolumeClaim =
                serde_json::from_value(json!({"metadata": {"name": n, "namespace": "ns"}})).unwrap();
            (n.to_string(), Arc::new(c))
        })
        .collect()
}

fn rev(set: &StatefulSet, name: &str, image: &str) -> ControllerRevision {
    let mut s = set.clone();
    s.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some(image.into());
    let mut r = revision_for(&s, 1, 0);
    r.metadata.name = Some(name.into());
    r
}

/// The plan as short strings: `create web-0 [www-web-0]`, `delete web-2`, `fix web-0`; groups split by `|`.
fn summary(p: &Plan) -> String {
    p.groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|a| match a {
                    Action::Create {
                        pod,
                        missing_claims,
                        blocked,
                    } => {
                        let claims: Vec<_> = missing_claims
                            .iter()
                            .map(|c| c.metadata.name.clone().unwrap())
                            .collect();
                        let b = blocked
                            .as_ref()
                            .map(|b| format!(" blocked: {b}"))
                            .unwrap_or_default();
                        format!(
                            "create {} {} [{}]{b}",
                            pod.metadata.name.as_deref().unwrap(),
                            identity::pod_revision(pod),
                            claims.join(",")
                        )
                    }
                    Action::Delete { name, .. } => format!("delete {name}"),
                    Action::Fix {
                        pod_name,
                        missing_claims,
                        labels,
                        claim_refs,
                        ..
                    } => format!(
                        "fix {pod_name} claims={} labels={} refs={}",
                        missing_claims.len(),
                        labels.is_some(),
                        claim_refs.len()
                    ),
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

fn run(s: &StatefulSet, pods: &[Arc<Pod>], claim_names: &[&str], cur: &str, upd: &str) -> Plan {
    let current = rev(s, cur, "v1");
    let update = rev(s, upd, if cur == upd { "v1" } else { "v2" });
    let c = claims(claim_names);
    plan(&Inputs {
        set: s,
        pods,
        claims: &c,
        current: &current,
        update: &update,
        collision_count: 0,
        now: t0(),
    })
}

#[test]
fn ordered_ready_creates_one_pod_at_a_time_after_the_previous_is_ready() {
    let s = set(json!({}));
    type Case<'a> = (&'a str, Vec<Arc<Pod>>, Vec<&'a str>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        ("empty set", vec![], vec![], "create web-0 r1 [www-web-0]"),
        (
            "web-0 ready",
            vec![pod("web-0", "Running", true, "r1")],
            vec!["www-web-0"],
            "create web-1 r1 [www-web-1]",
        ),
        (
            "claim exists already",
            vec![pod("web-0", "Running", true, "r1")],
            vec!["www-web-0", "www-web-1"],
            "create web-1 r1 []",
        ),
        (
            "web-0 not ready",
            vec![pod("web-0", "Running", false, "r1")],
            vec!["www-web-0"],
            "",
        ),
        (
            "web-0 pending without its claim",
            vec![pod("web-0", "Pending", false, "r1")],
            vec![],
            "fix web-0 claims=1 labels=false refs=0",
        ),
        (
            "a gap is filled first",
            vec![
                pod("web-0", "Running", true, "r1"),
                pod("web-2", "Running", true, "r1"),
            ],
            vec!["www-web-0", "www-web-2"],
            "create web-1 r1 [www-web-1]",
        ),
        (
            "a failed pod is deleted and blocks the rest",
            vec![pod("web-0", "Failed", false, "r1")],
            vec!["www-web-0"],
            "delete web-0",
        ),
        (
            "a failed pod being deleted waits",
            vec![terminating(pod("web-0", "Failed", false, "r1"))],
            vec!["www-web-0"],
            "",
        ),
        (
            "a succeeded middle pod is deleted",
            vec![
                pod("web-0", "Running", true, "r1"),
                pod("web-1", "Succeeded", false, "r1"),
            ],
            vec!["www-web-0", "www-web-1"],
            "delete web-1",
        ),
    ];
    for (what, pods, cl, want) in cases {
        assert_eq!(summary(&run(&s, &pods, &cl, "r1", "r1")), want, "{what}");
    }
}

#[test]
fn parallel_creates_every_missing_pod_at_once_and_deletes_condemned_ones_together() {
    let s = set(json!({"spec": {"podManagementPolicy": "Parallel"}}));
    assert_eq!(
        summary(&run(&s, &[], &[], "r1", "r1")),
        "create web-0 r1 [www-web-0], create web-1 r1 [www-web-1], create web-2 r1 [www-web-2]"
    );
    let s = set(json!({"spec": {"podManagementPolicy": "Parallel", "replicas": 1}}));
    let pods = [
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Running", false, "r1"),
        pod("web-2", "Running", true, "r1"),
    ];
    assert_eq!(
        summary(&run(&s, &pods, &["www-web-0"], "r1", "r1")),
        "delete web-2, delete web-1"
    );
}

#[test]
fn scale_down_goes_highest_ordinal_first_one_at_a_time_while_healthy() {
    let s = set(json!({"spec": {"replicas": 1}}));
    let all = |r2: Arc<Pod>| {
        vec![
            pod("web-0", "Running", true, "r1"),
            pod("web-1", "Running", true, "r1"),
            r2,
        ]
    };
    let cl = ["www-web-0", "www-web-1", "www-web-2"];
    assert_eq!(
        summary(&run(
            &s,
            &all(pod("web-2", "Running", true, "r1")),
            &cl,
            "r1",
            "r1"
        )),
        "delete web-2"
    );
    assert_eq!(
        summary(&run(
            &s,
            &all(terminating(pod("web-2", "Running", true, "r1"))),
            &cl,
            "r1",
            "r1"
        )),
        "",
        "waits for web-2 to go"
    );
    // An unhealthy condemned pod goes only when it is the first unhealthy one (the lowest).
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Running", false, "r1"),
        pod("web-2", "Running", false, "r1"),
    ];
    assert_eq!(summary(&run(&s, &pods, &cl, "r1", "r1")), "");
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Running", false, "r1"),
        pod("web-2", "Running", true, "r1"),
    ];
    assert_eq!(summary(&run(&s, &pods, &cl, "r1", "r1")), "delete web-2");
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Running", false, "r1"),
    ];
    assert_eq!(summary(&run(&s, &pods, &cl, "r1", "r1")), "delete web-1");
    // Status counts condemned pods too.
    let p = run(&s, &all(pod("web-2", "Running", true, "r1")), &cl, "r1", "r1");
    assert_eq!((p.status.replicas, p.status.ready_replicas), (3, 3));
}

#[test]
fn rolling_update_replaces_the_highest_old_pod_and_waits_for_it() {
    let s = set(json!({}));
    let cl = ["www-web-0", "www-web-1", "www-web-2"];
    let old = || {
        vec![
            pod("web-0", "Running", true, "r1"),
            pod("web-1", "Running", true, "r1"),
        ]
    };
    let mut pods = old();
    pods.push(pod("web-2", "Running", true, "r1"));
    let p = run(&s, &pods, &cl, "r1", "r2");
    assert_eq!(summary(&p), "delete web-2");
    assert_eq!(p.status.current_replicas, 2, "decremented for the deleted pod");
    assert_eq!(p.status.update_revision, "r2");
    // web-2 gone: recreated at the update revision.
    assert_eq!(summary(&run(&s, &old(), &cl, "r1", "r2")), "create web-2 r2 []");
    // web-2 new but not ready: wait.
    let mut pods = old();
    pods.push(pod("web-2", "Running", false, "r2"));
    assert_eq!(summary(&run(&s, &pods, &cl, "r1", "r2")), "");
    // web-2 new and ready: web-1 next.
    let mut pods = old();
    pods.push(pod("web-2", "Running", true, "r2"));
    let p = run(&s, &pods, &cl, "r1", "r2");
    assert_eq!(summary(&p), "delete web-1");
    assert_eq!((p.status.current_replicas, p.status.updated_replicas), (1, 1));
    assert_eq!(p.status.current_revision, "r1");
    // All updated and ready: the rolling update completes.
    let pods = vec![
        pod("web-0", "Running", true, "r2"),
        pod("web-1", "Running", true, "r2"),
        pod("web-2", "Running", true, "r2"),
    ];
    let p = run(&s, &pods, &cl, "r1", "r2");
    assert_eq!(summary(&p), "");
    assert_eq!(p.status.current_revision, "r2");
    assert_eq!(p.status.current_replicas, 3);
    assert!(p.write_status);
}

#[test]
fn a_partition_limits_the_update_and_pods_below_it_keep_the_current_revision() {
    let s = set(json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 2}}}}));
    let cl = ["www-web-0", "www-web-1", "www-web-2"];
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Running", true, "r1"),
        pod("web-2", "Running", true, "r2"),
    ];
    let p = run(&s, &pods, &cl, "r1", "r2");
    assert_eq!(summary(&p), "");
    assert_eq!((p.status.updated_replicas, p.status.current_replicas), (1, 2));
    assert_eq!(p.status.current_revision, "r1");
    // web-1 deleted by hand: recreated at the current revision.
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-2", "Running", true, "r2"),
    ];
    assert_eq!(summary(&run(&s, &pods, &cl, "r1", "r2")), "create web-1 r1 []");
}

#[test]
fn on_delete_never_replaces_pods_and_never_completes() {
    let s = set(json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}}));
    let cl = ["www-web-0", "www-web-1", "www-web-2"];
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Running", true, "r1"),
        pod("web-2", "Running", true, "r1"),
    ];
    let p = run(&s, &pods, &cl, "r1", "r2");
    assert_eq!(summary(&p), "");
    assert_eq!(p.status.current_revision, "r1");
    // A deleted pod comes back at the update revision.
    assert_eq!(
        summary(&run(&s, &pods[..2], &cl, "r1", "r2")),
        "create web-2 r2 []"
    );
    let all_new = vec![
        pod("web-0", "Running", true, "r2"),
        pod("web-1", "Running", true, "r2"),
        pod("web-2", "Running", true, "r2"),
    ];
    assert_eq!(run(&s, &all_new, &cl, "r1", "r2").status.current_revision, "r1");
}

#[test]
fn start_ordinal_shifts_names_and_drifted_labels_are_fixed() {
    let s = set(json!({"spec": {"ordinals": {"start": 5}, "replicas": 2}}));
    assert_eq!(
        summary(&run(&s, &[], &[], "r1", "r1")),
        "create web-5 r1 [www-web-5]"
    );
    let mut p = (*pod("web-5", "Running", true, "r1")).clone();
    p.metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(identity::POD_INDEX_LABEL);
    let plan = run(&s, &[Arc::new(p)], &["www-web-5"], "r1", "r1");
    assert_eq!(
        summary(&plan),
        "fix web-5 claims=0 labels=true refs=0 | create web-6 r1 [www-web-6]"
    );
}

#[test]
fn a_claim_being_deleted_blocks_the_pod() {
    let s = set(json!({"spec": {"replicas": 1}}));
    let mut c = claims(&["www-web-0"]);
    let mut dying = (*c["www-web-0"]).clone();
    dying.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    c.insert("www-web-0".into(), Arc::new(dying));
    let r = rev(&s, "r1", "v1");
    let p = plan(&Inputs {
        set: &s,
        pods: &[],
        claims: &c,
        current: &r,
        update: &r,
        collision_count: 0,
        now: t0(),
    });
    assert_eq!(
        summary(&p),
        "create web-0 r1 [] blocked: pvc www-web-0 is being deleted"
    );
}

#[test]
fn status_counts_and_min_ready_seconds_requeue() {
    let s = set(json!({"spec": {"minReadySeconds": 10}}));
    let pods = vec![
        pod("web-0", "Running", true, "r1"),
        pod("web-1", "Pending", false, "r1"),
    ];
    let p = run(&s, &pods, &["www-web-0", "www-web-1"], "r1", "r1");
    assert_eq!(
        p.status,
        Status {
            observed_generation: 2,
            replicas: 2,
            ready_replicas: 1,
            available_replicas: 1,
            current_replicas: 2,
            updated_replicas: 2,
            current_revision: "r1".into(),
            update_revision: "r1".into(),
            collision_count: 0,
        }
    );
    // minReadySeconds 10, plus a second: availability needs the time strictly passed, in whole seconds.
    assert_eq!(p.requeue, Some(Duration::from_secs(11)));
    assert!(p.write_status);
    assert_eq!(p.status.patch()["status"]["readyReplicas"], 1);
}

#[test]
fn update_revisions_are_reused_renumbered_or_created() {
    let s = set(json!({}));
    let mut old = s.clone();
    old.spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0]
        .image = Some("v0".into());
    let same = Arc::new(revision_for(&s, 1, 0));
    let other = Arc::new(revision_for(&old, 2, 0));
    assert_eq!(
        find_update_revision(&s, &[other.clone(), same.clone()], 0),
        UpdateRevision::Newest(1)
    );
    assert_eq!(
        find_update_revision(&s, &[same.clone(), other.clone()], 0),
        UpdateRevision::Renumber(0, 3)
    );
    match find_update_revision(&s, &[other], 0) {
        UpdateRevision::Create(r) => {
            assert_eq!(r.revision, 3);
            let name = r.metadata.name.clone().unwrap();
            let hash = &r.metadata.labels.as_ref().unwrap()[history::HASH_LABEL];
            assert_eq!(name, format!("web-{hash}"));
            assert_eq!(r.metadata.labels.as_ref().unwrap()["app"], "sts");
            assert_eq!(
                r.metadata.owner_references.as_ref().unwrap()[0].kind,
                "StatefulSet"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_ne!(
        revision_for(&s, 1, 0).metadata.name,
        revision_for(&s, 1, 1).metadata.name,
        "the collision count changes the name"
    );
}

#[test]
fn a_deleting_set_only_reports_status() {
    let mut s = set(json!({}));
    s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t0()));
    let p = run(
        &s,
        &[pod("web-0", "Running", true, "r1")],
        &["www-web-0"],
        "r1",
        "r1",
    );
    assert!(p.groups.is_empty());
    assert_eq!(p.status.replicas, 1);
}
