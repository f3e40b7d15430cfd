//! The CronJob controller (`pkg/controller/cronjob/cronjob_controllerv2.go`, `utils.go`; component
//! `cronjob-controller`): creates a Job `<cronjob>-<minutes since the epoch>` at each schedule time, keeps
//! `status.active`, `lastScheduleTime` and `lastSuccessfulTime`, applies the concurrency policy and the
//! history limits, and re-queues itself for the next schedule time plus 100 ms (no polling).
//!
//! Schedules are parsed by the `croner` crate (standard 5-field cron, names, ranges, steps and the
//! `@yearly`…`@hourly` descriptors) on jiff zoned times, so `spec.timeZone` uses the IANA database and DST
//! gaps and folds are handled; `@midnight`, `@every <duration>` and a `TZ=`/`CRON_TZ=` prefix are handled
//! here as robfig/cron does. Differences from upstream: croner also accepts `L`, `W`, `#` and a day of
//! week of 7, which robfig rejects; a time in a DST gap runs when the gap ends (robfig skips it that day); without `spec.timeZone` schedules run in UTC (upstream: the controller
//! manager's local zone, normally UTC).

use std::sync::Arc;
use std::time::Duration;

use client::events::{EventType, Recorder};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use futures_util::future::BoxFuture;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use tokio_util::sync::CancellationToken;

use crate::controller_ref::{controller_of, controller_ref};
use crate::informer::{Change, Informer, key, key_of, split_key};
use crate::job::finished_type;
use crate::pod_control::{api_message, is_namespace_terminating, object_ref};
use crate::{Context, Error, Reconciler, WorkQueue, run_workers};

/// The event source.
pub const COMPONENT: &str = "cronjob-controller";
/// kube-controller-manager `--concurrent-cron-job-syncs`.
pub const WORKERS: usize = 5;
/// upstream `nextScheduleDelta`: re-queue padding for clock skew.
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);
/// The annotation with the nominal start time, RFC 3339 in the CronJob's zone.
pub const SCHEDULED_TIMESTAMP_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// More missed start times than this gives `TooManyMissedTimes`.
pub const MANY_MISSED: i64 = 100;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A cron expression in a zone.
    Cron(Box<Cron>, TimeZone),
    /// `@every <duration>` (robfig's ConstantDelaySchedule, whole seconds).
    Every(Duration),
}

impl Schedule {
    /// The first activation strictly after `t` (robfig `Next`); `None` when there is none.
    pub fn next(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Cron(cron, tz) => cron
                .find_next_occurrence(&t.to_zoned(tz.clone()), false)
                .ok()
                .map(|z| z.timestamp()),
            Schedule::Every(d) => {
                let whole = Timestamp::from_second(t.as_second()).ok()?;
                whole.checked_add(SignedDuration::try_from(*d).ok()?).ok()
            }
        }
    }
}

/// Parse a Go duration of hours, minutes and seconds (`1h30m`, `90s`) for `@every`.
fn parse_every(s: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut num = String::new();
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let c = rest.chars().next()?;
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            rest = &rest[1..];
            continue;
        }
        let (unit, len) = if rest.starts_with("ms") {
            (0.001, 2)
        } else {
            match c {
                'h' => (3600.0, 1),
                'm' => (60.0, 1),
                's' => (1.0, 1),
                _ => return None,
            }
        };
        total += num.parse::<f64>().ok()? * unit;
        num.clear();
        rest = &rest[len..];
    }
    if !num.is_empty() {
        return None;
    }
    // robfig: delays under a second become one second, and are whole seconds.
    Some(Duration::from_secs((total.floor() as u64).max(1)))
}

/// `formatSchedule` + robfig `ParseStandard`: `TZ=`/`CRON_TZ=` inside the schedule wins over
/// `spec.timeZone`; the default zone is UTC.
pub fn parse_schedule(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, String> {
    let mut spec = schedule.trim();
    let mut tz = match time_zone {
        Some(name) => TimeZone::get(name).map_err(|e| e.to_string())?,
        None => TimeZone::UTC,
    };
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').expect("has =");
        let space = spec
            .find(' ')
            .ok_or_else(|| format!("missing spec after timezone: {spec}"))?;
        let name = &spec[eq + 1..space];
        tz = TimeZone::get(name).map_err(|e| format!("provided bad location {name}: {e}"))?;
        spec = spec[space..].trim();
    }
    let expr = if let Some(d) = spec.strip_prefix("@every ") {
        return parse_every(d).map(Schedule::Every).ok_or_else(|| {
            format!(
                "failed to parse duration {spec}: time: invalid duration \"{}\"",
                d.trim()
            )
        });
    } else if spec.starts_with('@') {
        match spec.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            _ => return Err(format!("unrecognized descriptor: {spec}")),
        }
        .to_string()
    } else {
        let fields = spec.split_whitespace().count();
        if fields != 5 {
            return Err(format!("expected exactly 5 fields, found {fields}: {spec}"));
        }
        spec.to_string()
    };
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    let cron = parser.parse(&expr).map_err(|e| e.to_string())?;
    Ok(Schedule::Cron(Box::new(cron), tz))
}

/// `mostRecentScheduleTime`: (earliest time considered, the most recent activation ≤ now after it, the
/// estimated number of missed activations).
pub fn most_recent_schedule_time(
    cj: &CronJob,
    now: Timestamp,
    sched: &Schedule,
    include_starting_deadline: bool,
) -> Result<(Timestamp, Option<Timestamp>, i64), String> {
    let mut earliest = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .or(cj.metadata.creation_timestamp.as_ref())
        .map(|t| t.0)
        .unwrap_or(now);
    if include_starting_deadline && let Some(d) = cj.spec.as_ref().and_then(|s| s.starting_deadline_seconds) {
        let deadline = now
            .checked_sub(SignedDuration::from_secs(d))
            .unwrap_or(Timestamp::MIN);
        if deadline > earliest {
            earliest = deadline;
        }
    }
    let Some(t1) = sched.next(earliest) else {
        return Ok((earliest, None, 0));
    };
    if now < t1 {
        return Ok((earliest, None, 0));
    }
    let Some(t2) = sched.next(t1) else {
        return Ok((earliest, Some(t1), 1));
    };
    if now < t2 {
        return Ok((earliest, Some(t1), 1));
    }
    let between = t2.duration_since(t1).as_secs_f64().round() as i64;
    if between < 1 {
        return Err("time difference between two schedules is less than 1 second".into());
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed = elapsed / between + 1;
    // Start one interval early and let the schedule find the real times (irregular schedules).
    let potential = t1 + SignedDuration::from_secs((missed - 2) * between);
    let mut most_recent = None;
    let mut t = sched.next(potential);
    while let Some(x) = t.filter(|x| *x <= now) {
        most_recent = Some(x);
        t = sched.next(x);
    }
    Ok((earliest, most_recent, missed))
}

/// `nextScheduleTimeDuration`: how long until the next activation after the most recent one, plus 100 ms.
pub fn next_schedule_delay(cj: &CronJob, now: Timestamp, sched: &Schedule) -> Option<Duration> {
    let from = match most_recent_schedule_time(cj, now, sched, false) {
        Err(_) => now,
        Ok((earliest, None, _)) => earliest,
        Ok((_, Some(t), _)) => t,
    };
    let next = sched.next(from)?;
    let d = now.duration_until(next);
    let d = if d.is_negative() {
        Duration::ZERO
    } else {
        d.unsigned_abs()
    };
    Some(d + NEXT_SCHEDULE_DELTA)
}

/// The Job name for a scheduled time: `<cronjob>-<unix seconds / 60>`.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// Go's `time.RFC3339` in `tz` (`Z` for a zero offset).
pub fn rfc3339_in(t: Timestamp, tz: &TimeZone) -> String {
    let z = t.to_zoned(tz.clone());
    if z.offset().seconds() == 0 {
        z.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// Go's `time.RFC1123Z` in UTC (the MissSchedule event).
pub fn rfc1123z_utc(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%a, %d %b %Y %H:%M:%S +0000")
        .to_string()
}

/// What the scheduling half of a sync does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing due now; look again after this long.
    Wait(Option<Duration>),
    /// The most recent time is past `startingDeadlineSeconds`: a MissSchedule warning.
    Missed(Timestamp, Option<Duration>),
    /// A Job for that time exists or was recorded already.
    AlreadyRun(Option<Duration>),
    /// Forbid with Jobs running: JobAlreadyActive.
    Forbidden(Option<Duration>),
    /// Start the Job for this time (Replace deletes the active Jobs first).
    Start {
        /// The nominal time.
        scheduled: Timestamp,
        /// Whether the active Jobs are deleted first.
        replace: bool,
    },
}

/// `syncCronJob`'s scheduling decision after `status.active` is reconciled, with whether more than 100
/// start times were missed.
pub fn decide_schedule(cj: &CronJob, now: Timestamp, sched: &Schedule) -> Result<(Step, bool), String> {
    let (_, most_recent, missed) = most_recent_schedule_time(cj, now, sched, true)?;
    let Some(scheduled) = most_recent.filter(|t| *t <= now) else {
        return Ok((Step::Wait(next_schedule_delay(cj, now, sched)), false));
    };
    let too_many = missed > MANY_MISSED;
    let spec = cj.spec.as_ref();
    let later = next_schedule_delay(cj, now, sched);
    if let Some(d) = spec.and_then(|s| s.starting_deadline_seconds)
        && scheduled
            .checked_add(SignedDuration::from_secs(d))
            .unwrap_or(Timestamp::MAX)
            < now
    {
        return Ok((Step::Missed(scheduled, later), too_many));
    }
    let status = cj.status.as_ref();
    let name = job_name(cj.metadata.name.as_deref().unwrap_or(""), scheduled);
    let active = status.and_then(|s| s.active.as_deref()).unwrap_or(&[]);
    let already = active.iter().any(|r| r.name.as_deref() == Some(name.as_str()))
        || status.and_then(|s| s.last_schedule_time.as_ref()).map(|t| t.0) == Some(scheduled);
    if already {
        return Ok((Step::AlreadyRun(later), too_many));
    }
    let policy = spec
        .and_then(|s| s.concurrency_policy.as_deref())
        .unwrap_or("Allow");
    if policy == "Forbid" && !active.is_empty() {
        return Ok((Step::Forbidden(later), too_many));
    }
    Ok((
        Step::Start {
            scheduled,
            replace: policy == "Replace",
        },
        too_many,
    ))
}

/// `getJobFromTemplate2`: the Job for `scheduled`.
pub fn job_for(cj: &CronJob, scheduled: Timestamp, tz: &TimeZone) -> Job {
    let spec = cj.spec.clone().unwrap_or_default();
    let template = spec.job_template;
    let tm = template.metadata.unwrap_or_default();
    let mut annotations = tm.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
        rfc3339_in(scheduled, tz),
    );
    let name = cj.metadata.name.as_deref().unwrap_or("");
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(name, scheduled)),
            namespace: cj.metadata.namespace.clone(),
            labels: tm.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![owner(cj)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

fn owner(cj: &CronJob) -> OwnerReference {
    controller_ref(
        "batch/v1",
        "CronJob",
        cj.metadata.name.as_deref().unwrap_or(""),
        cj.metadata.uid.as_deref().unwrap_or(""),
    )
}

/// The reference `status.active` holds.
fn job_ref(job: &Job) -> ObjectReference {
    object_ref("batch/v1", "Job", &job.metadata)
}

/// The first step of a sync: `status.active` against the owned Jobs.
#[derive(Debug, Default, PartialEq)]
pub struct ActiveReview {
    /// Unfinished owned Jobs missing from `status.active` (UnexpectedJob, after a live re-check).
    pub unexpected: Vec<String>,
    /// Listed Jobs that finished: (name, Complete|Failed) for SawCompletedJob; removed from the list.
    pub completed: Vec<(String, String)>,
    /// Listed Jobs not in the cache (checked live; MissingJob if gone).
    pub missing: Vec<ObjectReference>,
    /// The newest completionTime of a succeeded Job, if newer than `lastSuccessfulTime`.
    pub last_successful: Option<Timestamp>,
}

/// Reconcile `status.active` with the owned Jobs (pure).
pub fn review_active(cj: &CronJob, jobs: &[&Job]) -> ActiveReview {
    let mut r = ActiveReview::default();
    let status = cj.status.as_ref();
    let active = status.and_then(|s| s.active.as_deref()).unwrap_or(&[]);
    let listed = |uid: Option<&str>| active.iter().any(|a| a.uid.as_deref() == uid);
    let mut newest = status.and_then(|s| s.last_successful_time.as_ref()).map(|t| t.0);
    for j in jobs {
        let name = j.metadata.name.clone().unwrap_or_default();
        let finished = finished_type(j);
        let found = listed(j.metadata.uid.as_deref());
        match finished {
            None if !found => r.unexpected.push(name),
            Some(t) if found => r.completed.push((name, t.to_string())),
            _ => {}
        }
        if finished == Some("Complete")
            && let Some(ct) = j.status.as_ref().and_then(|s| s.completion_time.as_ref())
            && newest.is_none_or(|n| ct.0 > n)
        {
            newest = Some(ct.0);
            r.last_successful = Some(ct.0);
        }
    }
    for a in active {
        if !jobs.iter().any(|j| j.metadata.uid == a.uid) {
            r.missing.push(a.clone());
        }
    }
    r
}

/// Which finished Jobs the history limits remove (oldest start first, names breaking ties).
pub fn jobs_over_history_limit<'a>(cj: &CronJob, jobs: &[&'a Job]) -> Vec<&'a Job> {
    let spec = cj.spec.as_ref();
    let mut out = Vec::new();
    for (kind, limit) in [
        ("Complete", spec.and_then(|s| s.successful_jobs_history_limit)),
        ("Failed", spec.and_then(|s| s.failed_jobs_history_limit)),
    ] {
        let Some(limit) = limit else { continue };
        let mut of_kind: Vec<&Job> = jobs
            .iter()
            .copied()
            .filter(|j| finished_type(j) == Some(kind))
            .collect();
        let excess = of_kind.len().saturating_sub(limit.max(0) as usize);
        if excess == 0 {
            continue;
        }
        of_kind.sort_by(|a, b| {
            let start = |j: &Job| j.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0);
            match (start(a), start(b)) {
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (x, y) if x == y => a.metadata.name.cmp(&b.metadata.name),
                (x, y) => x.cmp(&y),
            }
        });
        out.extend(of_kind.into_iter().take(excess));
    }
    out
}

struct CronJobController {
    client: kube::Client,
    cronjobs: Arc<Informer<CronJob>>,
    jobs: Arc<Informer<Job>>,
    recorder: Arc<Recorder>,
}

/// The CronJob key a Job's controllerRef names, if it is a CronJob.
fn owner_key(job: &Job) -> Option<String> {
    let r = controller_of(&job.metadata)?;
    (r.kind == "CronJob").then(|| key(job.metadata.namespace.as_deref(), &r.name))
}

/// Start the controller.
pub fn start(ctx: &Arc<Context>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
    let queue = WorkQueue::new("cronjob");
    let cronjobs = ctx.informers.get::<CronJob>();
    let jobs = ctx.informers.get::<Job>();
    let recorder = ctx.recorder(COMPONENT);
    let q = queue.clone();
    let rec = recorder.clone();
    cronjobs.on_change(move |change| match change {
        Change::Added(cj) | Change::Deleted(cj) => q.add(key_of(cj.as_ref())),
        Change::Updated { old, new } => {
            let spec = |c: &CronJob| c.spec.as_ref().map(|s| (s.schedule.clone(), s.time_zone.clone()));
            if spec(old) != spec(new) {
                // A new schedule: requeue for its next time (sooner than a queued one is fine too).
                let s = new.spec.as_ref();
                match parse_schedule(
                    s.map_or("", |s| s.schedule.as_str()),
                    s.and_then(|s| s.time_zone.as_deref()),
                ) {
                    Ok(sched) => {
                        let d = next_schedule_delay(new, Timestamp::now(), &sched).unwrap_or(Duration::ZERO);
                        q.add_after(key_of(new.as_ref()), d);
                    }
                    Err(_) => rec.emit(
                        object_ref("batch/v1", "CronJob", &new.metadata),
                        EventType::Warning,
                        "UnParseableCronJobSchedule",
                        format!(
                            "unparseable schedule for cronjob: {}",
                            s.map_or("", |s| s.schedule.as_str())
                        ),
                    ),
                }
            } else {
                q.add(key_of(new.as_ref()));
            }
        }
    });
    let q = queue.clone();
    jobs.on_change(move |change| match change {
        Change::Added(j) | Change::Deleted(j) => {
            if let Some(k) = owner_key(j) {
                q.add(k);
            }
        }
        Change::Updated { old, new } => {
            let (o, n) = (owner_key(old), owner_key(new));
            if let Some(o) = o.as_ref().filter(|o| Some(*o) != n.as_ref()) {
                q.add(o.clone());
            }
            if let Some(n) = n {
                q.add(n);
            }
        }
    });
    let r = Arc::new(CronJobController {
        client: ctx.client.clone(),
        cronjobs,
        jobs,
        recorder,
    });
    Box::pin(run_workers(ctx.informers.clone(), queue, WORKERS, r, cancel))
}

impl CronJobController {
    fn job_api(&self, ns: &str) -> Api<Job> {
        Api::namespaced(self.client.clone(), ns)
    }

    /// `deleteJob`: Background propagation, dropped from `status.active`, `SuccessfulDelete`.
    async fn delete_job(
        &self,
        cj: &mut CronJob,
        cj_ref: &ObjectReference,
        ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> bool {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match self.job_api(ns).delete(name, &dp).await {
            Ok(_) => {}
            Err(e) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Warning,
                    "FailedDelete",
                    format!("Deleted job: {}", api_message(&e)),
                );
                return false;
            }
        }
        if let Some(a) = cj.status.as_mut().and_then(|s| s.active.as_mut()) {
            a.retain(|r| r.uid.as_deref() != uid);
        }
        self.recorder.emit(
            cj_ref.clone(),
            EventType::Normal,
            "SuccessfulDelete",
            format!("Deleted job {name}"),
        );
        true
    }
}

#[async_trait::async_trait]
impl Reconciler for CronJobController {
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some(shared) = self.cronjobs.get(key) else {
            return Ok(None);
        };
        let (ns, name) = split_key(key);
        let mut cj = (*shared).clone();
        let cj_ref = object_ref("batch/v1", "CronJob", &cj.metadata);
        let all_jobs = self.jobs.list_ns(ns);
        let jobs: Vec<&Job> = all_jobs
            .iter()
            .map(|j| j.as_ref())
            .filter(|j| {
                // By UID: Jobs orphaned from an earlier CronJob of the same name are not this one's.
                controller_of(&j.metadata).is_some_and(|r| {
                    r.kind == "CronJob" && r.name == name && Some(&r.uid) == shared.metadata.uid.as_ref()
                })
            })
            .collect();
        let mut update = false;

        // History limits first, as upstream's sync does.
        for j in jobs_over_history_limit(&cj, &jobs) {
            let jname = j.metadata.name.as_deref().unwrap_or("");
            if self
                .delete_job(&mut cj, &cj_ref, ns, jname, j.metadata.uid.as_deref())
                .await
            {
                update = true;
            }
        }

        let review = review_active(&cj, &jobs);
        let status = cj.status.get_or_insert_with(Default::default);
        if !review.unexpected.is_empty() {
            // The cache may be older than our own status write: look at the live CronJob first.
            let fresh = Api::<CronJob>::namespaced(self.client.clone(), ns)
                .get(name)
                .await?;
            let fresh_active = fresh.status.and_then(|s| s.active).unwrap_or_default();
            for jname in &review.unexpected {
                if let Some(r) = fresh_active
                    .iter()
                    .find(|r| r.name.as_deref() == Some(jname.as_str()))
                {
                    status.active.get_or_insert_with(Vec::new).push(r.clone());
                } else {
                    self.recorder.emit(
                        cj_ref.clone(),
                        EventType::Warning,
                        "UnexpectedJob",
                        format!("Saw a job that the controller did not create or forgot: {jname}"),
                    );
                }
            }
        }
        for (jname, condition) in &review.completed {
            if let Some(a) = status.active.as_mut() {
                a.retain(|r| r.name.as_deref() != Some(jname.as_str()));
            }
            self.recorder.emit(
                cj_ref.clone(),
                EventType::Normal,
                "SawCompletedJob",
                format!("Saw completed job: {jname}, status: {condition}"),
            );
            update = true;
        }
        if let Some(t) = review.last_successful {
            status.last_successful_time = Some(Time(t));
            update = true;
        }
        for missing in &review.missing {
            let jname = missing.name.as_deref().unwrap_or("");
            match self.job_api(ns).get(jname).await {
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.recorder.emit(
                        cj_ref.clone(),
                        EventType::Normal,
                        "MissingJob",
                        format!("Active job went missing: {jname}"),
                    );
                    if let Some(a) = status.active.as_mut() {
                        a.retain(|r| r.uid != missing.uid);
                    }
                    update = true;
                }
                Err(e) => return Err(e.into()),
                Ok(_) => {}
            }
        }

        let requeue = self.schedule(&mut cj, &cj_ref, &mut update).await;
        if update {
            if let Some(s) = cj.status.as_mut()
                && s.active.as_ref().is_some_and(Vec::is_empty)
            {
                s.active = None;
            }
            Api::<CronJob>::namespaced(self.client.clone(), ns)
                .replace_status(name, &PostParams::default(), &cj)
                .await?;
        }
        requeue
    }
}

impl CronJobController {
    /// The scheduling half of `syncCronJob`: returns the requeue (or the error that retries the key).
    async fn schedule(
        &self,
        cj: &mut CronJob,
        cj_ref: &ObjectReference,
        update: &mut bool,
    ) -> Result<Option<Duration>, Error> {
        if cj.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let spec = cj.spec.clone().unwrap_or_default();
        let tz = match spec.time_zone.as_deref() {
            None => TimeZone::UTC,
            Some(name) => match TimeZone::get(name) {
                Ok(tz) => tz,
                Err(e) => {
                    self.recorder.emit(
                        cj_ref.clone(),
                        EventType::Warning,
                        "UnknownTimeZone",
                        format!("invalid timeZone: {name:?}: {e}"),
                    );
                    return Ok(None);
                }
            },
        };
        if spec.suspend == Some(true) {
            return Ok(None);
        }
        if spec.schedule.contains("TZ") {
            self.recorder.emit(
                cj_ref.clone(),
                EventType::Warning,
                "UnsupportedSchedule",
                format!(
                    "CRON_TZ or TZ used in schedule {:?} is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                    spec.schedule
                ),
            );
        }
        let sched = match parse_schedule(&spec.schedule, spec.time_zone.as_deref()) {
            Ok(s) => s,
            Err(e) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Warning,
                    "UnparseableSchedule",
                    format!("unparseable schedule: {:?} : {e}", spec.schedule),
                );
                return Ok(None);
            }
        };
        let now = Timestamp::now();
        let (step, too_many) = match decide_schedule(cj, now, &sched) {
            Ok(x) => x,
            Err(e) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Warning,
                    "InvalidSchedule",
                    format!("invalid schedule: {} : {e}", spec.schedule),
                );
                return Ok(None);
            }
        };
        if too_many {
            self.recorder.emit(
                cj_ref.clone(),
                EventType::Warning,
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
            );
        }
        let (scheduled, replace) = match step {
            Step::Wait(d) | Step::AlreadyRun(d) => return Ok(d),
            Step::Missed(t, d) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Warning,
                    "MissSchedule",
                    format!("Missed scheduled time to start a job: {}", rfc1123z_utc(t)),
                );
                return Ok(d);
            }
            Step::Forbidden(d) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Normal,
                    "JobAlreadyActive",
                    "Not starting job because prior execution is running and concurrency policy is Forbid"
                        .into(),
                );
                return Ok(d);
            }
            Step::Start { scheduled, replace } => (scheduled, replace),
        };
        let ns = cj.metadata.namespace.clone().unwrap_or_default();
        if replace {
            let active = cj
                .status
                .as_ref()
                .and_then(|s| s.active.clone())
                .unwrap_or_default();
            for a in active {
                let jname = a.name.clone().unwrap_or_default();
                let job = match self.job_api(&ns).get(&jname).await {
                    Ok(j) => j,
                    Err(e) => {
                        self.recorder.emit(
                            cj_ref.clone(),
                            EventType::Warning,
                            "FailedGet",
                            format!("Get job: {}", api_message(&e)),
                        );
                        return Err(e.into());
                    }
                };
                if !self
                    .delete_job(cj, cj_ref, &ns, &jname, job.metadata.uid.as_deref())
                    .await
                {
                    return Err(Error::Other(format!("could not replace job {ns}/{jname}")));
                }
                *update = true;
            }
        }
        let want = job_for(cj, scheduled, &tz);
        let created = match self.job_api(&ns).create(&PostParams::default(), &want).await {
            Ok(j) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created job {}", j.metadata.name.as_deref().unwrap_or("")),
                );
                j
            }
            Err(e) if is_namespace_terminating(&e) => return Err(e.into()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Created before (a lost status write, or another actor): adopt it into the status only if
                // it is ours and not listed yet.
                let jname = want.metadata.name.as_deref().unwrap_or("");
                let existing = self.job_api(&ns).get(jname).await?;
                let ours = controller_of(&existing.metadata)
                    .is_some_and(|r| Some(&r.uid) == cj.metadata.uid.as_ref());
                let listed = cj
                    .status
                    .as_ref()
                    .and_then(|s| s.active.as_ref())
                    .is_some_and(|a| a.iter().any(|r| r.uid == existing.metadata.uid));
                if !ours || listed {
                    // Keep the schedule going: the next time is still ours to run.
                    return Ok(next_schedule_delay(cj, Timestamp::now(), &sched));
                }
                existing
            }
            Err(e) => {
                self.recorder.emit(
                    cj_ref.clone(),
                    EventType::Warning,
                    "FailedCreate",
                    format!("Error creating job: {}", api_message(&e)),
                );
                return Err(e.into());
            }
        };
        let status = cj.status.get_or_insert_with(Default::default);
        status.active.get_or_insert_with(Vec::new).push(job_ref(&created));
        status.last_schedule_time = Some(Time(scheduled));
        *update = true;
        Ok(next_schedule_delay(cj, Timestamp::now(), &sched))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cronjob(spec: serde_json::Value, status: serde_json::Value, created: &str) -> CronJob {
        let mut spec = spec;
        spec["jobTemplate"] = json!({"metadata": {"labels": {"l": "v"}, "annotations": {"a": "b"}},
                                     "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        serde_json::from_value(
            json!({"metadata": {"name": "hello", "namespace": "ns", "uid": "cu",
                                                   "creationTimestamp": created},
                                      "spec": spec, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn schedules_parse_like_robfig_parse_standard() {
        let t = at("2026-03-04T10:17:30Z");
        let cases = [
            ("*/1 * * * *", None, "2026-03-04T10:18:00Z"),
            ("*/15 * * * *", None, "2026-03-04T10:30:00Z"),
            ("0 * * * *", None, "2026-03-04T11:00:00Z"),
            ("@hourly", None, "2026-03-04T11:00:00Z"),
            ("@daily", None, "2026-03-05T00:00:00Z"),
            ("@midnight", None, "2026-03-05T00:00:00Z"),
            ("@weekly", None, "2026-03-08T00:00:00Z"),
            ("@monthly", None, "2026-04-01T00:00:00Z"),
            ("@yearly", None, "2027-01-01T00:00:00Z"),
            ("0 9 * * MON-FRI", None, "2026-03-05T09:00:00Z"),
            ("30 2 * JAN,MAR *", None, "2026-03-05T02:30:00Z"),
            ("0 9 * * *", Some("Asia/Tokyo"), "2026-03-05T00:00:00Z"),
            ("TZ=Asia/Tokyo 0 9 * * *", None, "2026-03-05T00:00:00Z"),
            (
                "CRON_TZ=America/New_York 0 9 * * *",
                Some("Asia/Tokyo"),
                "2026-03-04T14:00:00Z",
            ),
            ("@every 1h30m", None, "2026-03-04T11:47:30Z"),
            // Both days restricted: either matches (Vixie cron's OR).
            ("0 0 1 * FRI", None, "2026-03-06T00:00:00Z"),
        ];
        for (s, tz, want) in cases {
            let sched = parse_schedule(s, tz).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sched.next(t), Some(at(want)), "{s} in {tz:?}");
        }
        for bad in [
            "* * * *",
            "* * * * * *",
            "@fortnightly",
            "61 * * * *",
            "@every x",
            "TZ=Nowhere/City * * * * *",
        ] {
            assert!(parse_schedule(bad, None).is_err(), "{bad} must not parse");
        }
        assert!(parse_schedule("* * * * *", Some("Not/AZone")).is_err());
    }

    #[test]
    fn dst_gaps_and_folds_follow_the_zone() {
        // 2026-03-08 02:30 does not exist in New York: croner runs it when the gap ends (03:00 EDT);
        // robfig skips that day.
        let s = parse_schedule("30 2 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            s.next(at("2026-03-08T05:00:00Z")),
            Some(at("2026-03-08T07:00:00Z"))
        );
        assert_eq!(
            s.next(at("2026-03-08T07:00:00Z")),
            Some(at("2026-03-09T06:30:00Z"))
        );
        // 9:00 in New York is 14:00 UTC in winter and 13:00 UTC in summer.
        let s = parse_schedule("0 9 * * *", Some("America/New_York")).unwrap();
        assert_eq!(
            s.next(at("2026-03-07T15:00:00Z")),
            Some(at("2026-03-08T13:00:00Z"))
        );
    }

    #[test]
    fn most_recent_missed_time_and_the_count_of_misses() {
        let s = parse_schedule("*/1 * * * *", None).unwrap();
        let cj = cronjob(
            json!({"schedule": "*/1 * * * *"}),
            json!({}),
            "2026-03-04T10:00:30Z",
        );
        let cases = [
            // (now, most recent, missed)
            ("2026-03-04T10:00:59Z", None, 0),
            ("2026-03-04T10:01:00Z", Some("2026-03-04T10:01:00Z"), 1),
            ("2026-03-04T10:01:30Z", Some("2026-03-04T10:01:00Z"), 1),
            ("2026-03-04T10:05:10Z", Some("2026-03-04T10:05:00Z"), 5),
            ("2026-03-04T12:00:00Z", Some("2026-03-04T12:00:00Z"), 120),
        ];
        for (now, want, missed) in cases {
            let (_, got, n) = most_recent_schedule_time(&cj, at(now), &s, true).unwrap();
            assert_eq!(got, want.map(at), "at {now}");
            assert_eq!(n, missed, "misses at {now}");
        }
        // lastScheduleTime moves the start; startingDeadlineSeconds bounds it.
        let cj = cronjob(
            json!({"schedule": "*/1 * * * *", "startingDeadlineSeconds": 30}),
            json!({"lastScheduleTime": "2026-03-04T10:01:00Z"}),
            "2026-03-04T10:00:30Z",
        );
        let (earliest, got, _) =
            most_recent_schedule_time(&cj, at("2026-03-04T12:00:10Z"), &s, true).unwrap();
        assert_eq!(earliest, at("2026-03-04T11:59:40Z"));
        assert_eq!(got, Some(at("2026-03-04T12:00:00Z")));
        let bad = parse_schedule("59 23 31 2 *", None).unwrap();
        assert_eq!(
            most_recent_schedule_time(&cj, at("2026-03-04T12:00:10Z"), &bad, true)
                .unwrap()
                .1,
            None,
            "a schedule that never fires has no missed time"
        );
    }

    #[test]
    fn requeue_is_the_next_time_plus_100ms() {
        let s = parse_schedule("*/1 * * * *", None).unwrap();
        let cj = cronjob(
            json!({"schedule": "*/1 * * * *"}),
            json!({}),
            "2026-03-04T10:00:30Z",
        );
        assert_eq!(
            next_schedule_delay(&cj, at("2026-03-04T10:00:40Z"), &s),
            Some(Duration::from_millis(20_100))
        );
        let cj = cronjob(
            json!({"schedule": "*/1 * * * *"}),
            json!({"lastScheduleTime": "2026-03-04T10:01:00Z"}),
            "2026-03-04T10:00:30Z",
        );
        assert_eq!(
            next_schedule_delay(&cj, at("2026-03-04T10:01:00.5Z"), &s),
            Some(Duration::from_millis(59_600))
        );
    }

    #[test]
    fn scheduling_decisions() {
        let s = parse_schedule("*/1 * * * *", None).unwrap();
        let now = at("2026-03-04T10:05:10Z");
        let start = |spec: serde_json::Value, status: serde_json::Value| {
            decide_schedule(&cronjob(spec, status, "2026-03-04T10:00:30Z"), now, &s).unwrap()
        };
        assert_eq!(
            start(json!({"schedule": "x"}), json!({})),
            (
                Step::Start {
                    scheduled: at("2026-03-04T10:05:00Z"),
                    replace: false
                },
                false
            )
        );
        // The deadline bounds the search, so a time older than it is never found (upstream's v2 logic:
        // MissSchedule is all but unreachable).
        assert!(matches!(
            start(json!({"startingDeadlineSeconds": 5}), json!({})).0,
            Step::Wait(Some(_))
        ));
        assert!(matches!(
            start(json!({"startingDeadlineSeconds": 15}), json!({})).0,
            Step::Start { .. }
        ));
        assert!(matches!(
            start(json!({}), json!({"lastScheduleTime": "2026-03-04T10:05:00Z"})).0,
            Step::Wait(Some(_))
        ));
        let active = json!({"active": [{"name": "hello-29543645", "uid": "x"}]});
        assert!(matches!(start(json!({}), active.clone()).0, Step::AlreadyRun(_)));
        let other_active = json!({"active": [{"name": "hello-1", "uid": "x"}]});
        assert!(matches!(
            start(json!({"concurrencyPolicy": "Forbid"}), other_active.clone()).0,
            Step::Forbidden(_)
        ));
        assert!(matches!(
            start(json!({"concurrencyPolicy": "Replace"}), other_active).0,
            Step::Start { replace: true, .. }
        ));
        let long_ago =
            decide_schedule(&cronjob(json!({}), json!({}), "2026-03-01T00:00:00Z"), now, &s).unwrap();
        assert!(long_ago.1, "more than 100 misses");
        assert_eq!(
            long_ago.0,
            Step::Start {
                scheduled: at("2026-03-04T10:05:00Z"),
                replace: false
            }
        );
    }

    #[test]
    fn jobs_are_named_by_minute_and_annotated_in_the_zone() {
        let cj = cronjob(
            json!({"schedule": "*/1 * * * *"}),
            json!({}),
            "2026-03-04T10:00:30Z",
        );
        let t = at("2026-03-04T10:05:00Z");
        assert_eq!(job_name("hello", t), format!("hello-{}", t.as_second() / 60));
        let j = job_for(&cj, t, &TimeZone::UTC);
        assert_eq!(j.metadata.name.as_deref(), Some("hello-29543645"));
        let ann = j.metadata.annotations.unwrap();
        assert_eq!(ann[SCHEDULED_TIMESTAMP_ANNOTATION], "2026-03-04T10:05:00Z");
        assert_eq!(ann["a"], "b");
        assert_eq!(j.metadata.labels.unwrap()["l"], "v");
        let o = &j.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (o.kind.as_str(), o.uid.as_str(), o.controller),
            ("CronJob", "cu", Some(true))
        );
        assert_eq!(
            rfc3339_in(t, &TimeZone::get("Asia/Tokyo").unwrap()),
            "2026-03-04T19:05:00+09:00"
        );
        assert_eq!(rfc1123z_utc(t), "Wed, 04 Mar 2026 10:05:00 +0000");
    }

    fn job(name: &str, finished: Option<&str>, start: &str, completion: Option<&str>) -> Job {
        let mut v = json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
                           "status": {"startTime": start}});
        if let Some(t) = finished {
            v["status"]["conditions"] = json!([{"type": t, "status": "True"}]);
        }
        if let Some(c) = completion {
            v["status"]["completionTime"] = json!(c);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn active_list_review() {
        let cj = cronjob(
            json!({}),
            json!({"active": [{"name": "a", "uid": "a"}, {"name": "b", "uid": "b"}, {"name": "gone", "uid": "gone"}],
                   "lastSuccessfulTime": "2026-03-04T09:00:00Z"}),
            "2026-03-04T00:00:00Z",
        );
        let a = job("a", None, "2026-03-04T10:00:00Z", None);
        let b = job(
            "b",
            Some("Complete"),
            "2026-03-04T10:00:00Z",
            Some("2026-03-04T10:00:05Z"),
        );
        let c = job("c", None, "2026-03-04T10:00:00Z", None);
        let d = job("d", Some("Failed"), "2026-03-04T10:00:00Z", None);
        let r = review_active(&cj, &[&a, &b, &c, &d]);
        assert_eq!(r.unexpected, ["c"]);
        assert_eq!(r.completed, [("b".to_string(), "Complete".to_string())]);
        assert_eq!(r.missing.len(), 1);
        assert_eq!(r.missing[0].name.as_deref(), Some("gone"));
        assert_eq!(r.last_successful, Some(at("2026-03-04T10:00:05Z")));
    }

    #[test]
    fn history_limits_remove_the_oldest_finished_jobs() {
        let cj = cronjob(
            json!({"successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 0}),
            json!({}),
            "2026-03-04T00:00:00Z",
        );
        let s1 = job("s1", Some("Complete"), "2026-03-04T10:00:00Z", None);
        let s2 = job("s2", Some("Complete"), "2026-03-04T10:01:00Z", None);
        let s3 = job("s3", Some("Complete"), "2026-03-04T10:02:00Z", None);
        let f1 = job("f1", Some("Failed"), "2026-03-04T10:00:00Z", None);
        let r = job("r", None, "2026-03-04T10:00:00Z", None);
        let names: Vec<&str> = jobs_over_history_limit(&cj, &[&s3, &r, &s1, &f1, &s2])
            .iter()
            .map(|j| j.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["s1", "s2", "f1"]);
    }
}
