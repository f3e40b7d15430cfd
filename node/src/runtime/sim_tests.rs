use super::*;
use crate::runtime::CriState;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn per_container_values_prefer_the_named_entry() {
    let cases = [
        ("1", "app", Some("1")),
        ("app=1", "app", Some("1")),
        ("app=1", "side", None),
        ("0, app=3", "app", Some("3")),
        ("0, app=3", "side", Some("0")),
        ("app=3,0", "side", Some("0")),
        (" app = 2s ", "app", Some("2s")),
        ("", "app", None),
    ];
    for (value, container, want) in cases {
        assert_eq!(per_container(value, container), want, "{value:?} {container}");
    }
}

#[test]
fn durations_are_go_durations() {
    let cases = [
        ("0", Some(Duration::ZERO)),
        ("0s", Some(Duration::ZERO)),
        ("500ms", Some(Duration::from_millis(500))),
        ("2s", Some(Duration::from_secs(2))),
        ("1m30s", Some(Duration::from_secs(90))),
        ("1.5s", Some(Duration::from_millis(1500))),
        ("", None),
        ("5", None),
        ("2x", None),
        ("s", None),
    ];
    for (s, want) in cases {
        assert_eq!(parse_duration(s).ok(), want, "{s:?}");
    }
}

#[test]
fn behaviour_follows_annotations_and_kwok_defaults() {
    let job = map(&[("batch.kubernetes.io/job-name", "pi")]);
    let none = BTreeMap::new();
    let b = |ann: &[(&str, &str)], labels: &BTreeMap<String, String>, c: &str, init: bool| {
        behaviour(&map(ann), labels, c, init)
    };
    let runs = Behaviour::default();
    let exits = |after: u64, code: i32| Behaviour {
        exit_after: Some(Duration::from_secs(after)),
        exit_code: code,
        ..Behaviour::default()
    };
    let cases: Vec<(Result<Behaviour, String>, Result<Behaviour, String>)> = vec![
        // A Deployment's container runs until stopped; a Job's and an init container exit 0 at once.
        (b(&[], &none, "app", false), Ok(runs)),
        (b(&[], &job, "app", false), Ok(exits(0, 0))),
        (b(&[], &none, "init", true), Ok(exits(0, 0))),
        (b(&[(EXIT_AFTER, "never")], &job, "app", false), Ok(runs)),
        // An exit code alone asks for an exit; exit-after sets when.
        (b(&[(EXIT_CODE, "3")], &none, "app", false), Ok(exits(0, 3))),
        (
            b(&[(EXIT_AFTER, "5s"), (EXIT_CODE, "1")], &none, "app", false),
            Ok(exits(5, 1)),
        ),
        (b(&[(EXIT_CODE, "side=1")], &none, "app", false), Ok(runs)),
        (
            b(&[(START_DELAY, "app=2s")], &none, "app", false),
            Ok(Behaviour {
                start_delay: Duration::from_secs(2),
                ..runs
            }),
        ),
        (
            b(&[(EXIT_CODE, "x")], &none, "app", false),
            Err("annotation sim.kubeling.dev/exit-code=\"x\": not an exit code (0-255)".into()),
        ),
        (
            b(&[(EXIT_CODE, "256")], &none, "app", false),
            Err("annotation sim.kubeling.dev/exit-code=\"256\": not an exit code (0-255)".into()),
        ),
        (
            b(&[(EXIT_AFTER, "soon")], &none, "app", false),
            Err(
                "annotation sim.kubeling.dev/exit-after=\"soon\": invalid duration \"soon\" (examples: 500ms, 2s, 1m30s)"
                    .into(),
            ),
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
}

#[test]
fn probe_answers_follow_annotations() {
    let secs = |s| Some(Duration::from_secs(s));
    let cases = [
        (map(&[]), READINESS, secs(0), Ok(ProbeAnswer::Pass)),
        (
            map(&[(LIVENESS, "fail")]),
            LIVENESS,
            secs(9),
            Ok(ProbeAnswer::Fail),
        ),
        (
            map(&[(LIVENESS, "app=fail")]),
            READINESS,
            secs(9),
            Ok(ProbeAnswer::Pass),
        ),
        (
            map(&[(READINESS, "side=fail")]),
            READINESS,
            secs(9),
            Ok(ProbeAnswer::Pass),
        ),
        (
            map(&[(READY_AFTER, "5s")]),
            READINESS,
            secs(4),
            Ok(ProbeAnswer::Fail),
        ),
        (
            map(&[(READY_AFTER, "5s")]),
            READINESS,
            secs(5),
            Ok(ProbeAnswer::Pass),
        ),
        (
            map(&[(READY_AFTER, "5s")]),
            READINESS,
            None,
            Ok(ProbeAnswer::Fail),
        ),
        (
            map(&[(READY_AFTER, "5s")]),
            LIVENESS,
            secs(0),
            Ok(ProbeAnswer::Pass),
        ),
        (
            map(&[(STARTUP, "maybe")]),
            STARTUP,
            secs(0),
            Err("annotation sim.kubeling.dev/startup=\"maybe\": expected pass or fail".to_owned()),
        ),
    ];
    for (ann, key, running, want) in cases {
        assert_eq!(probe_answer(&ann, key, "app", running), want, "{ann:?} {key}");
    }
}

#[test]
fn signals_give_128_plus_their_number() {
    let cases = [
        (None, 143),
        (Some("SIGTERM"), 143),
        (Some("SIGKILL"), 137),
        (Some("KILL"), 137),
        (Some("SIGINT"), 130),
        (Some("9"), 137),
        (Some("SIGWHAT"), 143),
    ];
    for (signal, want) in cases {
        assert_eq!(signal_exit_code(signal), want, "{signal:?}");
    }
}

#[test]
fn pod_cidrs_are_disjoint_twentys_of_10_128() {
    assert_eq!(PodCidr::for_node(0).unwrap().to_string(), "10.128.0.0/20");
    assert_eq!(PodCidr::for_node(1).unwrap().to_string(), "10.128.16.0/20");
    assert_eq!(PodCidr::for_node(16).unwrap().to_string(), "10.129.0.0/20");
    assert_eq!(PodCidr::for_node(1023).unwrap().to_string(), "10.191.240.0/20");
    assert!(PodCidr::for_node(1024).is_err());
}

#[test]
fn the_ip_pool_hands_out_every_address_once_and_reuses_released_ones() {
    let cidr = PodCidr {
        base: Ipv4Addr::new(10, 0, 0, 0),
        prefix: 29,
    };
    let mut pool = IpPool::new(cidr);
    let got: Vec<Ipv4Addr> = std::iter::from_fn(|| pool.allocate()).collect();
    // .0 network, .1 gateway, .7 broadcast stay out.
    let want: Vec<Ipv4Addr> = (2..=6).map(|i| Ipv4Addr::new(10, 0, 0, i)).collect();
    assert_eq!(got, want);
    pool.release(Ipv4Addr::new(10, 0, 0, 4));
    pool.release(Ipv4Addr::new(192, 168, 0, 1));
    assert_eq!(pool.allocate(), Some(Ipv4Addr::new(10, 0, 0, 4)));
    assert_eq!(pool.allocate(), None);
}

fn runtime() -> SimRuntime {
    SimRuntime::new(
        Owner {
            cluster: "c".into(),
            node: "n".into(),
        },
        PodCidr::for_node(2).unwrap(),
    )
}

fn sandbox(uid: &str, annotations: &[(&str, &str)], labels: &[(&str, &str)]) -> SandboxConfig {
    SandboxConfig {
        pod_name: format!("pod-{uid}"),
        namespace: "ns".into(),
        uid: uid.into(),
        image: "pause".into(),
        annotations: map(annotations),
        labels: map(labels),
        ..SandboxConfig::default()
    }
}

fn container(sandbox_id: &str, uid: &str, name: &str) -> ContainerConfig {
    ContainerConfig {
        pod_name: format!("pod-{uid}"),
        namespace: "ns".into(),
        uid: uid.into(),
        name: name.into(),
        sandbox_id: sandbox_id.into(),
        image: "nginx:1".into(),
        hash: "abc".into(),
        termination_message_policy: "File".into(),
        ..ContainerConfig::default()
    }
}

async fn running_pod(rt: &SimRuntime, uid: &str, annotations: &[(&str, &str)]) -> (String, String) {
    let s = rt.create_sandbox(&sandbox(uid, annotations, &[])).await.unwrap();
    rt.start(&s).await.unwrap();
    let c = rt.create_container(&container(&s, uid, "app")).await.unwrap();
    rt.start(&c).await.unwrap();
    (s, c)
}

#[tokio::test]
async fn a_pod_runs_with_an_ip_from_the_node_range_and_stops_with_sigterm() {
    let rt = runtime();
    let (s, c) = running_pod(&rt, "u1", &[]).await;
    let sb = rt.inspect(&s).await.unwrap();
    assert_eq!(sb.cri_state(), CriState::Running);
    assert_eq!(sb.ip_address, "10.128.32.2");
    let st = rt.inspect(&c).await.unwrap();
    assert_eq!(st.cri_state(), CriState::Running);
    assert!(st.image_id.starts_with("sha256:"));
    // The pod's containers, found by UID, carry the kubelet's labels.
    let list = rt.list(&ListFilter::containers().pod_uid("u1")).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].container_name(), Some("app"));
    assert_eq!(list[0].sandbox_id(), Some(s.as_str()));
    assert_eq!(list[0].hash(), Some("abc"));
    assert_eq!(list[0].restart_count(), Some(0));
    assert_eq!(list[0].attempt(), Some(0));
    assert_eq!(rt.list(&ListFilter::sandboxes()).await.unwrap().len(), 1);
    assert!(
        rt.list(&ListFilter::all().pod_uid("u2"))
            .await
            .unwrap()
            .is_empty()
    );

    rt.stop_container(&c, Duration::from_secs(30), None)
        .await
        .unwrap();
    let st = rt.inspect(&c).await.unwrap();
    assert_eq!(st.exit_code, 143);
    assert_eq!(st.cri_state(), CriState::Exited { reason: "Error" });
    rt.stop_container(&s, Duration::from_secs(30), None)
        .await
        .unwrap();
    assert_eq!(rt.inspect(&s).await.unwrap().ip_address, "");
    for id in [&c, &s] {
        rt.remove_container(id).await.unwrap();
        rt.remove_container(id).await.unwrap();
        assert!(rt.inspect(id).await.unwrap_err().is_not_found());
    }
    assert!(rt.list(&ListFilter::all()).await.unwrap().is_empty());
    assert_eq!(rt.container_count(), 0);
}

#[tokio::test]
async fn next_change_is_the_next_natural_exit_of_the_pods_containers() {
    let rt = runtime();
    assert_eq!(rt.next_change("nobody"), NextChange::Never);
    let (_, _) = running_pod(&rt, "forever", &[]).await;
    assert_eq!(rt.next_change("forever"), NextChange::Never);
    let (_, c) = running_pod(&rt, "short", &[(EXIT_AFTER, "30s")]).await;
    let started = rt.started_at(&c).unwrap();
    let exit = started.checked_add(jiff::SignedDuration::from_secs(30)).unwrap();
    assert_eq!(rt.next_change("short"), NextChange::At(exit));
    // A stopped container no longer changes on its own.
    rt.stop_container(&c, Duration::ZERO, None).await.unwrap();
    assert_eq!(rt.next_change("short"), NextChange::Never);
}

#[tokio::test]
async fn a_job_pod_completes_and_an_exit_annotation_fails_after_its_delay() {
    let rt = runtime();
    let s = rt
        .create_sandbox(&sandbox("job", &[], &[("job-name", "pi")]))
        .await
        .unwrap();
    rt.start(&s).await.unwrap();
    let c = rt.create_container(&container(&s, "job", "pi")).await.unwrap();
    rt.start(&c).await.unwrap();
    let st = rt.inspect(&c).await.unwrap();
    assert_eq!(st.cri_state(), CriState::Exited { reason: "Completed" });
    assert_eq!(st.exit_code, 0);

    let (_, c) = running_pod(&rt, "bad", &[(EXIT_AFTER, "300ms"), (EXIT_CODE, "2")]).await;
    assert_eq!(rt.inspect(&c).await.unwrap().cri_state(), CriState::Running);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let st = rt.inspect(&c).await.unwrap();
    assert_eq!(st.cri_state(), CriState::Exited { reason: "Error" });
    assert_eq!(st.exit_code, 2);
    let (started, finished) = (st.started_at.unwrap(), st.finished_at.unwrap());
    assert_eq!(finished.duration_since(started).as_millis(), 300);
    // A stop after the natural exit keeps the natural exit.
    rt.stop_container(&c, Duration::ZERO, Some("SIGKILL"))
        .await
        .unwrap();
    assert_eq!(rt.inspect(&c).await.unwrap().exit_code, 2);
}

#[tokio::test]
async fn an_init_container_exits_zero_and_a_bad_annotation_fails_creation() {
    let rt = runtime();
    let s = rt
        .create_sandbox(&sandbox("p", &[(EXIT_CODE, "app=oops")], &[]))
        .await
        .unwrap();
    rt.start(&s).await.unwrap();
    let mut init = container(&s, "p", "init");
    init.init = true;
    let i = rt.create_container(&init).await.unwrap();
    rt.start(&i).await.unwrap();
    assert_eq!(
        rt.inspect(&i).await.unwrap().cri_state(),
        CriState::Exited { reason: "Completed" }
    );
    let err = rt.create_container(&container(&s, "p", "app")).await.unwrap_err();
    assert!(err.to_string().contains("sim.kubeling.dev/exit-code"), "{err}");
}

#[tokio::test]
async fn start_waits_for_the_start_delay_and_needs_a_running_sandbox() {
    let rt = runtime();
    let s = rt
        .create_sandbox(&sandbox("d", &[(START_DELAY, "200ms")], &[]))
        .await
        .unwrap();
    let c = rt.create_container(&container(&s, "d", "app")).await.unwrap();
    assert!(rt.start(&c).await.is_err(), "the sandbox is not running");
    rt.start(&s).await.unwrap();
    let t0 = std::time::Instant::now();
    rt.start(&c).await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert_eq!(rt.inspect(&c).await.unwrap().cri_state(), CriState::Running);
}

#[tokio::test]
async fn logs_name_the_container_and_honour_tail_and_follow() {
    let rt = runtime();
    let (_, c) = running_pod(&rt, "l", &[(EXIT_AFTER, "300ms"), (EXIT_CODE, "1")]).await;
    let read = |options: LogOptions| {
        let rt = rt.clone();
        let c = c.clone();
        async move {
            let mut s = rt.logs(&c, &options).await.unwrap();
            let mut out = Vec::new();
            while let Some(chunk) = s.next().await {
                out.extend_from_slice(&chunk.unwrap());
            }
            String::from_utf8(out).unwrap()
        }
    };
    let now = read(LogOptions::default()).await;
    assert_eq!(
        now,
        "sim: container app of pod ns/pod-l started (image nginx:1)\n"
    );
    // Follow ends with the container, with its exit line.
    let followed = read(LogOptions {
        follow: true,
        ..Default::default()
    })
    .await;
    assert_eq!(
        followed,
        "sim: container app of pod ns/pod-l started (image nginx:1)\n\
         sim: container app of pod ns/pod-l exited with code 1\n"
    );
    let tail = read(LogOptions {
        tail: Some(1),
        timestamps: true,
        ..Default::default()
    })
    .await;
    assert!(
        tail.ends_with(" sim: container app of pod ns/pod-l exited with code 1\n"),
        "{tail}"
    );
    assert_eq!(tail.lines().count(), 1);
    let limited = read(LogOptions {
        limit_bytes: Some(3),
        ..Default::default()
    })
    .await;
    assert_eq!(limited, "sim");
}

#[tokio::test]
async fn exec_succeeds_in_a_running_container_only() {
    let rt = runtime();
    let (_, c) = running_pod(&rt, "e", &[]).await;
    let out = rt
        .exec_sync(
            &c,
            &["cat".into(), "/tmp/healthy".into()],
            Some(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0);
    rt.stop_container(&c, Duration::ZERO, None).await.unwrap();
    assert!(rt.exec_sync(&c, &["true".into()], None).await.is_err());
}

#[tokio::test]
async fn images_are_always_present() {
    let rt = runtime();
    let image = rt.ensure_image("nginx", PullPolicy::Always).await.unwrap();
    assert_eq!(image.repo_tags, ["nginx:latest"]);
    assert!(image.image_ref().starts_with("docker-pullable://nginx@sha256:"));
    assert!(matches!(
        rt.ensure_image("Bad Image", PullPolicy::Never).await,
        Err(RuntimeError::InvalidImageName { .. })
    ));
    assert_eq!(rt.version().await.unwrap(), RUNTIME_VERSION);
}
