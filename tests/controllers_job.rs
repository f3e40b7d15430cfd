//! Step 6's Job, CronJob and TTL-after-finished controllers with the real binary, kubectl and Docker. One
//! cluster for the file; every case runs at the same time in its own namespace, so the file takes about as
//! long as its slowest case (the CronJob's wait for a minute boundary).

mod common;
#[path = "../fixtures/testbox/image.rs"]
mod testbox_image;

use std::time::{Duration, Instant};

use common::Cluster;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);

/// A Job manifest: `spec_extra` lines go under `spec` (two spaces), `container_extra` under the container.
fn job(name: &str, spec_extra: &str, container_extra: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n{spec_extra}  template:\n    spec:\n      \
         restartPolicy: Never\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        \
         image: {}\n{container_extra}",
        testbox_image::ensure_testbox_image()
    )
}

struct Ns<'a> {
    c: &'a Cluster,
    ns: String,
}

impl<'a> Ns<'a> {
    fn new(c: &'a Cluster, ns: &str) -> Ns<'a> {
        c.ok(&["create", "namespace", ns]);
        Ns {
            c,
            ns: ns.to_string(),
        }
    }

    fn args<'b>(&'b self, args: &[&'b str]) -> Vec<&'b str> {
        let mut v = vec!["-n", self.ns.as_str()];
        v.extend_from_slice(args);
        v
    }

    fn ok(&self, args: &[&str]) -> String {
        self.c.ok(&self.args(args))
    }

    fn apply(&self, manifest: &str) {
        self.c.ok_stdin(&self.args(&["apply", "-f", "-"]), manifest);
    }

    fn get(&self, what: &[&str]) -> Value {
        let mut a = vec!["get"];
        a.extend_from_slice(what);
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    fn wait_json(&self, what: &[&str], timeout: Duration, cond: impl FnMut(&Value) -> bool) -> Value {
        let mut w = vec!["-n", self.ns.as_str()];
        w.extend_from_slice(what);
        self.c.wait_json(&w, timeout, cond)
    }

    /// `kubectl wait --for=condition=<cond> job/<name>`; returns its output.
    fn wait_for(&self, cond: &str, job: &str, timeout: Duration) -> String {
        let for_ = format!("--for=condition={cond}");
        let t = format!("--timeout={}s", timeout.as_secs());
        let target = format!("job/{job}");
        self.ok(&["wait", &for_, &target, &t])
    }

    fn pods(&self, job: &str) -> Vec<Value> {
        let sel = format!("job-name={job}");
        self.get(&["pods", "-l", &sel])["items"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Events about `name` as `reason|message`.
    fn events(&self, name: &str) -> Vec<String> {
        let sel = format!("involvedObject.name={name}");
        self.get(&["events", "--field-selector", &sel])["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{}|{}",
                    e["reason"].as_str().unwrap_or(""),
                    e["message"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    fn wait_event(&self, name: &str, pred: impl Fn(&str) -> bool, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let evs = self.events(name);
            if evs.iter().any(|e| pred(e)) {
                return evs;
            }
            assert!(
                Instant::now() < deadline,
                "no such event for {name} in {}: {evs:#?}",
                self.ns
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `type=status/reason` of each condition.
fn conditions(job: &Value) -> Vec<String> {
    job["status"]["conditions"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|c| {
                    format!(
                        "{}={}/{}",
                        c["type"].as_str().unwrap_or(""),
                        c["status"].as_str().unwrap_or(""),
                        c["reason"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn time(v: &Value) -> i64 {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_second()
}

fn completes_with_parallelism(c: &Cluster) {
    let n = Ns::new(c, "job-complete");
    n.apply(&job(
        "x",
        "  completions: 3\n  parallelism: 2\n",
        "        command: [sh, -c, \"echo done\"]\n",
    ));
    let out = n.wait_for("complete", "x", WAIT);
    assert_eq!(out.trim(), "job.batch/x condition met");
    let j = n.get(&["job", "x"]);
    assert_eq!(
        conditions(&j),
        [
            "SuccessCriteriaMet=True/CompletionsReached",
            "Complete=True/CompletionsReached"
        ]
    );
    let row = n.ok(&["get", "job", "x", "--no-headers"]);
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[..3], ["x", "Complete", "3/3"], "{row}");
    let complete = &j["status"]["conditions"][1];
    assert_eq!(complete["message"], "Reached expected number of succeeded pods");
    assert_eq!(j["status"]["succeeded"], 3);
    assert!(j["status"].get("failed").is_none(), "{}", j["status"]);
    assert_eq!(j["status"]["completionTime"], complete["lastTransitionTime"]);
    let uid = j["metadata"]["uid"].as_str().unwrap();
    let pods = n.pods("x");
    assert_eq!(pods.len(), 3, "{pods:#?}");
    for p in &pods {
        assert!(p["metadata"]["name"].as_str().unwrap().starts_with("x-"));
        let labels = &p["metadata"]["labels"];
        assert_eq!(labels["batch.kubernetes.io/job-name"], "x");
        assert_eq!(labels["batch.kubernetes.io/controller-uid"], uid);
        assert_eq!(labels["controller-uid"], uid);
        assert!(
            p["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty()),
            "the tracking finalizer is gone once counted: {}",
            p["metadata"]
        );
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!(
            (owner["kind"].as_str(), owner["controller"].as_bool()),
            (Some("Job"), Some(true))
        );
    }
    let evs = n.wait_event("x", |e| e == "Completed|Job completed", WAIT);
    let created = evs
        .iter()
        .filter(|e| e.starts_with("SuccessfulCreate|Created pod: x-"))
        .count();
    assert!(created >= 1, "{evs:#?}");
}

fn fails_after_the_backoff_limit(c: &Cluster) {
    let n = Ns::new(c, "job-backoff");
    n.apply(&job(
        "fail",
        "  backoffLimit: 1\n",
        "        command: [sh, -c, \"exit 1\"]\n",
    ));
    let out = n.wait_for("failed", "fail", Duration::from_secs(180));
    assert_eq!(out.trim(), "job.batch/fail condition met");
    let j = n.get(&["job", "fail"]);
    assert_eq!(j["status"]["failed"], 2);
    assert_eq!(
        conditions(&j),
        [
            "FailureTarget=True/BackoffLimitExceeded",
            "Failed=True/BackoffLimitExceeded"
        ]
    );
    assert_eq!(
        j["status"]["conditions"][1]["message"],
        "Job has reached the specified backoff limit"
    );
    n.wait_event(
        "fail",
        |e| e == "BackoffLimitExceeded|Job has reached the specified backoff limit",
        WAIT,
    );
    let mut pods = n.pods("fail");
    assert_eq!(pods.len(), 2, "{pods:#?}");
    pods.sort_by_key(|p| time(&p["metadata"]["creationTimestamp"]));
    let first_finished =
        time(&pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]);
    let second_created = time(&pods[1]["metadata"]["creationTimestamp"]);
    assert!(
        second_created - first_finished >= 10,
        "the replacement waits the 10 s pod-failure backoff: finished {first_finished}, created {second_created}"
    );
}

fn fails_at_the_active_deadline(c: &Cluster) {
    let n = Ns::new(c, "job-deadline");
    n.apply(&job(
        "slow",
        "  activeDeadlineSeconds: 5\n",
        "        args: [sleep]\n",
    ));
    let out = n.wait_for("failed", "slow", Duration::from_secs(90));
    assert_eq!(out.trim(), "job.batch/slow condition met");
    let j = n.get(&["job", "slow"]);
    assert_eq!(
        conditions(&j),
        [
            "FailureTarget=True/DeadlineExceeded",
            "Failed=True/DeadlineExceeded"
        ]
    );
    assert_eq!(
        j["status"]["conditions"][1]["message"],
        "Job was active longer than specified deadline"
    );
    let start = time(&j["status"]["startTime"]);
    let failed_at = time(&j["status"]["conditions"][0]["lastTransitionTime"]);
    assert!(
        failed_at - start >= 5,
        "not before the deadline: {start} → {failed_at}"
    );
    // Failed comes only after the pod is gone (no terminating pods).
    assert!(n.pods("slow").is_empty(), "{:#?}", n.pods("slow"));
    n.wait_event(
        "slow",
        |e| e == "DeadlineExceeded|Job was active longer than specified deadline",
        WAIT,
    );
}

fn indexed_job_records_completed_indexes(c: &Cluster) {
    let n = Ns::new(c, "job-indexed");
    n.apply(&job(
        "idx",
        "  completions: 3\n  parallelism: 3\n  completionMode: Indexed\n",
        "        command: [sh, -c, \"echo index=$JOB_COMPLETION_INDEX\"]\n",
    ));
    n.wait_for("complete", "idx", WAIT);
    let j = n.get(&["job", "idx"]);
    assert_eq!(j["status"]["completedIndexes"], "0-2");
    assert_eq!(j["status"]["succeeded"], 3);
    let mut seen = Vec::new();
    for p in n.pods("idx") {
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        let ix = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"],
            ix.as_str()
        );
        assert!(name.starts_with(&format!("idx-{ix}-")), "{name}");
        assert_eq!(p["spec"]["hostname"], format!("idx-{ix}"));
        let logs = n.ok(&["logs", &name]);
        assert!(logs.contains(&format!("index={ix}")), "{name}: {logs}");
        seen.push(ix);
    }
    seen.sort();
    assert_eq!(seen, ["0", "1", "2"]);
}

fn suspend_and_resume(c: &Cluster) {
    let n = Ns::new(c, "job-suspend");
    n.apply(&job(
        "s",
        "  suspend: true\n",
        "        command: [sh, -c, \"echo resumed\"]\n",
    ));
    let j = n.wait_json(&["job", "s"], WAIT, |j| {
        conditions(j).iter().any(|c| c == "Suspended=True/JobSuspended")
    });
    assert!(
        j["status"].get("startTime").is_none(),
        "a suspended Job has not started: {}",
        j["status"]
    );
    assert!(n.pods("s").is_empty(), "no pods while suspended");
    let row = n.ok(&["get", "job", "s", "--no-headers"]);
    assert_eq!(row.split_whitespace().nth(1), Some("Suspended"), "{row}");
    n.ok(&["patch", "job", "s", "-p", r#"{"spec":{"suspend":false}}"#]);
    let j = n.wait_json(&["job", "s"], WAIT, |j| {
        conditions(j).iter().any(|c| c == "Suspended=False/JobResumed")
    });
    assert!(j["status"]["startTime"].is_string(), "{}", j["status"]);
    n.wait_for("complete", "s", WAIT);
    assert_eq!(n.pods("s").len(), 1);
    let evs = n.events("s");
    let pos = |want: &str| {
        evs.iter()
            .position(|e| e == want)
            .unwrap_or_else(|| panic!("{want}: {evs:#?}"))
    };
    assert!(
        pos("Suspended|Job suspended") < pos("Resumed|Job resumed"),
        "{evs:#?}"
    );
}

fn ttl_deletes_the_finished_job(c: &Cluster) {
    let n = Ns::new(c, "job-ttl");
    n.apply(&job(
        "ttl",
        "  ttlSecondsAfterFinished: 5\n",
        "        command: [sh, -c, \"true\"]\n",
    ));
    n.wait_for("complete", "ttl", WAIT);
    let finished = Instant::now();
    // The TTL controller deletes with propagationPolicy Foreground: the garbage collector removes the pods
    // first, then the Job goes.
    common::eventually(
        Duration::from_secs(40),
        "the Job and its pods to be gone after its TTL",
        || {
            let out = c.kubectl(&n.args(&["get", "job", "ttl"]));
            let gone = !out.status.success()
                && String::from_utf8_lossy(&out.stderr).contains(r#"jobs.batch "ttl" not found"#);
            let pods = c.ok(&n.args(&["get", "pods", "-l", "job-name=ttl", "-o", "name"]));
            (gone && pods.trim().is_empty()).then_some(())
        },
    );
    assert!(
        finished.elapsed() >= Duration::from_secs(3),
        "not deleted before the TTL: {:?}",
        finished.elapsed()
    );
}

fn cronjob_creates_a_job_each_minute(c: &Cluster) {
    let n = Ns::new(c, "job-cron");
    let image = format!("--image={}", testbox_image::ensure_testbox_image());
    n.ok(&[
        "create",
        "cronjob",
        "hello",
        &image,
        "--schedule=*/1 * * * *",
        "--",
        "sh",
        "-c",
        "echo hi",
    ]);
    let jobs = n.wait_json(&["jobs"], Duration::from_secs(75), |v| {
        v["items"].as_array().is_some_and(|l| !l.is_empty())
    });
    let j = &jobs["items"][0];
    let name = j["metadata"]["name"].as_str().unwrap().to_string();
    let minutes: i64 = name.strip_prefix("hello-").unwrap().parse().unwrap();
    let scheduled = &j["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"];
    assert_eq!(
        time(scheduled),
        minutes * 60,
        "the name counts minutes since the epoch"
    );
    let owner = &j["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["name"].as_str()),
        (Some("CronJob"), Some("hello"))
    );
    let created = format!("SuccessfulCreate|Created job {name}");
    n.wait_event("hello", |e| e == created, WAIT);
    let completed = format!("SawCompletedJob|Saw completed job: {name}, status: Complete");
    n.wait_event("hello", |e| e == completed, WAIT);
    let cj = n.wait_json(&["cronjob", "hello"], WAIT, |cj| {
        cj["status"]["lastSuccessfulTime"].is_string()
    });
    assert_eq!(time(&cj["status"]["lastScheduleTime"]), minutes * 60);
}

/// One concurrent case of the file.
type Case = fn(&Cluster);

#[test]
fn job_cronjob_and_ttl_controllers_run_jobs_as_upstream() {
    testbox_image::ensure_testbox_image();
    let c = Cluster::up();
    let cases: &[(&str, Case)] = &[
        ("completes_with_parallelism", completes_with_parallelism),
        ("fails_after_the_backoff_limit", fails_after_the_backoff_limit),
        ("fails_at_the_active_deadline", fails_at_the_active_deadline),
        (
            "indexed_job_records_completed_indexes",
            indexed_job_records_completed_indexes,
        ),
        ("suspend_and_resume", suspend_and_resume),
        ("ttl_deletes_the_finished_job", ttl_deletes_the_finished_job),
        (
            "cronjob_creates_a_job_each_minute",
            cronjob_creates_a_job_each_minute,
        ),
    ];
    let failures: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|(name, f)| {
                let c = &c;
                (*name, s.spawn(move || f(c)))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|(name, h)| h.join().err().map(|_| name.to_string()))
            .collect()
    });
    assert!(failures.is_empty(), "failed cases: {failures:?}");
}
