//! The batch/v1 strategies (upstream `pkg/registry/batch/{job,cronjob}/strategy.go`): the scheme
//! defaults of `pkg/apis/batch/v1/defaults.go`, the Job's generated selector and template labels
//! (reference §6.2), validation from `pkg/apis/batch/validation`, and which writes bump
//! `metadata.generation`.
//!
//! Deliberate difference: where upstream prints a whole Go struct with `%#v` (an immutable template),
//! the error prints the value as JSON.

use serde_json::{Map, Value, json};

use super::workload::{
    FIELD_IMMUTABLE, default_template, ensure_object, go_label_selector, go_string_map, immutable_selector,
    invalid_printed, non_negative, selector_matches, set_default, validate_label_selector, validate_template,
};
use crate::error::FieldError;

/// upstream `batch.LegacyJobNameLabel` / `batch.JobNameLabel`.
pub const LEGACY_JOB_NAME_LABEL: &str = "job-name";
/// upstream `batch.JobNameLabel`.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// upstream `batch.LegacyControllerUidLabel`.
pub const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// upstream `batch.ControllerUidLabel`.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// upstream `validation.ValidateCronJobCreate`: a Job name is the CronJob's plus 11 characters.
const CRON_JOB_NAME_MAX: usize = 52;

/// The batch/v1 resources with a strategy here.
pub fn handles(plural: &str) -> bool {
    matches!(plural, "jobs" | "cronjobs")
}

/// `SetDefaults_PodFailurePolicyOnPodConditionsPattern` over a JobSpec.
fn default_pod_failure_policy(spec: &mut Value) {
    for rule in spec
        .pointer_mut("/podFailurePolicy/rules")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for pattern in rule
            .get_mut("onPodConditions")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if pattern
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                pattern["status"] = json!("True");
            }
        }
    }
}

/// `SetDefaults_Job`. JobPodReplacementPolicy is on (beta since 1.29).
fn default_job(obj: &mut Value) {
    let spec = ensure_object(obj, &["spec"]);
    let unset = |s: &Value, k: &str| s.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec["completions"] = json!(1);
        spec["parallelism"] = json!(1);
    }
    set_default(spec, "parallelism", json!(1));
    if unset(spec, "backoffLimit") {
        spec["backoffLimit"] = if unset(spec, "backoffLimitPerIndex") {
            json!(6)
        } else {
            json!(i32::MAX)
        };
    }
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    default_pod_failure_policy(spec);
    if unset(spec, "podReplacementPolicy") {
        spec["podReplacementPolicy"] = if unset(spec, "podFailurePolicy") {
            json!("TerminatingOrFailed")
        } else {
            json!("Failed")
        };
    }
    set_default(spec, "manualSelector", json!(false));
    default_template(obj, "/spec/template");
    // A Job without labels takes its template's.
    let template_labels = obj.pointer("/spec/template/metadata/labels").cloned();
    if let Some(labels) = template_labels.filter(Value::is_object)
        && obj
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        super::meta_mut(obj).insert("labels".into(), labels);
    }
}

/// `SetDefaults_CronJob`, and the template defaults of its job template's pods.
fn default_cron_job(obj: &mut Value) {
    let spec = ensure_object(obj, &["spec"]);
    if spec
        .get("concurrencyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        spec["concurrencyPolicy"] = json!("Allow");
    }
    set_default(spec, "suspend", json!(false));
    set_default(spec, "successfulJobsHistoryLimit", json!(3));
    set_default(spec, "failedJobsHistoryLimit", json!(1));
    let job_spec = ensure_object(spec, &["jobTemplate", "spec"]);
    default_pod_failure_policy(job_spec);
    default_template(obj, "/spec/jobTemplate/spec/template");
}

/// The scheme defaults, on every decoded object.
pub fn default(plural: &str, obj: &mut Value) {
    match plural {
        "jobs" => default_job(obj),
        "cronjobs" => default_cron_job(obj),
        _ => {}
    }
}

/// upstream `generateSelector`: the job-name and controller-uid labels (legacy and prefixed, each only if
/// absent) on the template, and `batch.kubernetes.io/controller-uid` in the selector. Conflicting
/// user-set values are left for validation to reject.
fn generate_selector(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let labels = ensure_object(obj, &["spec", "template", "metadata", "labels"]);
    for (key, value) in [
        (LEGACY_JOB_NAME_LABEL, &name),
        (JOB_NAME_LABEL, &name),
        (LEGACY_CONTROLLER_UID_LABEL, &uid),
        (CONTROLLER_UID_LABEL, &uid),
    ] {
        set_default(labels, key, json!(value));
    }
    let selector = ensure_object(obj, &["spec", "selector", "matchLabels"]);
    set_default(selector, CONTROLLER_UID_LABEL, json!(uid));
}

fn manual_selector(obj: &Value) -> bool {
    obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true)
}

/// Create: defaults, the generated selector unless `manualSelector`, no status. The registry has set
/// name and uid before this runs.
pub fn prepare_create(plural: &str, obj: &mut Value) {
    default(plural, obj);
    if plural == "jobs" && !manual_selector(obj) {
        generate_selector(obj);
        // Upstream's read back from storage defaults again: a Job that had no labels now takes the
        // generated template labels.
        default(plural, obj);
    }
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
}

/// Update: defaults (the registry already kept the other half of spec/status).
pub fn prepare_update(plural: &str, new: &mut Value) {
    default(plural, new);
}

/// Whether an update (not a status write) bumps `metadata.generation`: a spec change.
pub fn bumps_generation(new: &Value, old: &Value) -> bool {
    new.get("spec") != old.get("spec")
}

/// Validation of a create (`old` none), update, or status update.
pub fn validate(plural: &str, obj: &Value, old: Option<&Value>, status_update: bool) -> Vec<FieldError> {
    match (plural, status_update) {
        ("jobs", true) => validate_job_status(obj),
        ("jobs", false) => {
            let mut errs = validate_job(obj, old);
            if let Some(old) = old {
                errs.extend(validate_job_update(obj, old));
            }
            errs
        }
        ("cronjobs", true) => {
            let mut errs = Vec::new();
            non_negative(obj, "/status/active", "status.active", &mut errs);
            errs
        }
        ("cronjobs", false) => validate_cron_job(obj, old),
        _ => Vec::new(),
    }
}

fn compact(v: Option<&Value>) -> String {
    v.map_or_else(|| "null".to_string(), Value::to_string)
}

/// upstream `validateJobSpec`, shared by Jobs and CronJob job templates: `spec` is the JobSpec,
/// `path` where it sits (`spec`, `spec.jobTemplate.spec`).
fn validate_job_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        non_negative(spec, &format!("/{f}"), &format!("{path}.{f}"), &mut errs);
    }
    let mode = spec.get("completionMode").and_then(Value::as_str);
    if let Some(mode) = mode {
        if !matches!(mode, "NonIndexed" | "Indexed") {
            errs.push(FieldError::not_supported(
                format!("{path}.completionMode"),
                &json!(mode),
                &["NonIndexed", "Indexed"],
            ));
        }
        if mode == "Indexed" && spec.get("completions").is_none_or(Value::is_null) {
            errs.push(FieldError::required(
                format!("{path}.completions"),
                "when completion mode is Indexed",
            ));
        }
    }
    let has_failure_policy = spec.get("podFailurePolicy").is_some_and(|p| !p.is_null());
    if let Some(p) = spec.get("podReplacementPolicy").and_then(Value::as_str) {
        if has_failure_policy && p != "Failed" {
            errs.push(FieldError::not_supported(
                format!("{path}.podReplacementPolicy"),
                &json!(p),
                &["Failed"],
            ));
        } else if !matches!(p, "TerminatingOrFailed" | "Failed") {
            errs.push(FieldError::not_supported(
                format!("{path}.podReplacementPolicy"),
                &json!(p),
                &["Failed", "TerminatingOrFailed"],
            ));
        }
    }
    let template_path = format!("{path}.template");
    errs.extend(validate_template(spec, "/template", &template_path));
    let policy = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    if has_failure_policy && policy != "Never" {
        errs.push(FieldError::invalid(
            format!("{template_path}.spec.restartPolicy"),
            &json!(policy),
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    } else if !matches!(policy, "OnFailure" | "Never") {
        errs.push(FieldError::not_supported(
            format!("{template_path}.spec.restartPolicy"),
            &json!(policy),
            &["OnFailure", "Never"],
        ));
    }
    errs
}

/// upstream `ValidateJob`: metadata is the registry's; here the generated selector and the spec.
fn validate_job(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let selector = obj.pointer("/spec/selector").filter(|s| !s.is_null());
    if !manual_selector(obj) && selector.is_some() {
        let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        if uid.is_empty() {
            errs.push(FieldError::required("metadata.uid", ""));
        }
        let labels = obj.pointer("/spec/template/metadata/labels");
        // RequirePrefixedLabels: always on create; on update only if the old Job had them (Jobs older
        // than 1.27 lack the prefixed labels).
        let old_has_prefixed = old.is_none_or(|o| {
            let l = o.pointer("/spec/template/metadata/labels");
            [JOB_NAME_LABEL, CONTROLLER_UID_LABEL]
                .iter()
                .all(|k| l.and_then(|l| l.get(*k)).is_some())
        });
        let mut expected = vec![(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)];
        if old_has_prefixed {
            expected.extend([(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]);
        }
        for (key, want) in &expected {
            let path = format!("spec.template.metadata.labels[{key}]");
            match labels.and_then(|l| l.get(*key)).and_then(Value::as_str) {
                None => errs.push(FieldError::required(path, want)),
                Some(have) if have != *want => errs.push(invalid_printed(
                    &path,
                    &go_string_map(labels),
                    &format!("must be '{want}'"),
                )),
                Some(_) => {}
            }
        }
        let expected: Map<String, Value> = expected.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        if selector_matches(selector, Some(&expected)) == Some(false) {
            errs.push(invalid_printed(
                "spec.selector",
                &go_label_selector(selector),
                "`selector` not auto-generated",
            ));
        }
    }
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    errs.extend(validate_job_spec(&spec, "spec"));
    match selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => errs.extend(validate_label_selector(Some(sel), "spec.selector")),
    }
    let labels = obj.pointer("/spec/template/metadata/labels");
    if selector.is_some() && selector_matches(selector, labels.and_then(Value::as_object)) == Some(false) {
        errs.push(invalid_printed(
            "spec.template.metadata.labels",
            &go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
    errs
}

/// The template fields a suspended Job that never started may change (upstream
/// `AllowMutableSchedulingDirectives`): node affinity, node selector, tolerations, scheduling gates,
/// and the template's labels and annotations.
fn without_scheduling_directives(template: Option<&Value>) -> Value {
    let mut t = template.cloned().unwrap_or(json!({}));
    if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
        for k in ["nodeSelector", "tolerations", "schedulingGates"] {
            spec.remove(k);
        }
        if let Some(affinity) = spec.get_mut("affinity").and_then(Value::as_object_mut) {
            affinity.remove("nodeAffinity");
        }
    }
    if let Some(m) = t.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("labels");
        m.remove("annotations");
    }
    t
}

/// upstream `ValidateJobSpecUpdate`: the selector, the template (but see
/// [`without_scheduling_directives`]), the completion mode and the pod failure policy are immutable;
/// completions too, unless an Indexed Job scales completions and parallelism together.
fn validate_job_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    errs.extend(immutable_selector(new, old));
    let (nt, ot) = (new.pointer("/spec/template"), old.pointer("/spec/template"));
    let suspended_never_started = old.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
        && old.pointer("/status/startTime").is_none_or(Value::is_null);
    let template_changed = if suspended_never_started {
        without_scheduling_directives(nt) != without_scheduling_directives(ot)
    } else {
        nt != ot
    };
    if template_changed {
        errs.push(invalid_printed("spec.template", &compact(nt), FIELD_IMMUTABLE));
    }
    let field = |v: &Value, f: &str| v.pointer(&format!("/spec/{f}")).cloned();
    let indexed = field(new, "completionMode") == Some(json!("Indexed"));
    let elastic = indexed
        && field(new, "completions") == field(new, "parallelism")
        && field(old, "completions") == field(old, "parallelism");
    if field(new, "completions") != field(old, "completions") && !elastic {
        errs.push(invalid_printed(
            "spec.completions",
            &compact(field(new, "completions").as_ref()),
            FIELD_IMMUTABLE,
        ));
    }
    for f in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
    ] {
        if field(new, f) != field(old, f) {
            errs.push(invalid_printed(
                &format!("spec.{f}"),
                &compact(field(new, f).as_ref()),
                FIELD_IMMUTABLE,
            ));
        }
    }
    errs
}

/// The cheap part of `ValidateJobUpdateStatus`: counts never negative. The transition rules (terminal
/// conditions, index formats) are left out so as never to block the job controller.
fn validate_job_status(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for c in ["active", "succeeded", "failed", "ready", "terminating"] {
        non_negative(obj, &format!("/status/{c}"), &format!("status.{c}"), &mut errs);
    }
    errs
}

/// upstream `ValidateCronJobCreate`/`ValidateCronJobUpdate`.
fn validate_cron_job(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if old.is_none() && name.len() > CRON_JOB_NAME_MAX {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            &format!("must be no more than {CRON_JOB_NAME_MAX} characters"),
        ));
    }
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let schedule = spec.get("schedule").and_then(Value::as_str).unwrap_or("");
    let time_zone = spec.get("timeZone").filter(|v| !v.is_null());
    if schedule.is_empty() {
        errs.push(FieldError::required("spec.schedule", ""));
    } else {
        if let Err(e) = cron::parse_standard(schedule) {
            errs.push(FieldError::invalid("spec.schedule", &json!(schedule), &e));
        }
        // New objects may not carry a zone in the schedule; old ones that did may keep it.
        let allow_tz = old.is_some_and(|o| {
            o.pointer("/spec/schedule")
                .and_then(Value::as_str)
                .is_some_and(|s| s.contains("TZ"))
        });
        if schedule.contains("TZ") {
            if !allow_tz {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    &json!(schedule),
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                ));
            } else if time_zone.is_some() {
                errs.push(FieldError::invalid(
                    "spec.schedule",
                    &json!(schedule),
                    "cannot use both timeZone field and TZ or CRON_TZ in schedule",
                ));
            }
        }
    }
    if let Some(tz) = time_zone {
        errs.extend(validate_time_zone(tz.as_str().unwrap_or("")));
    }
    non_negative(
        obj,
        "/spec/startingDeadlineSeconds",
        "spec.startingDeadlineSeconds",
        &mut errs,
    );
    match spec
        .get("concurrencyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("")
    {
        "Allow" | "Forbid" | "Replace" => {}
        "" => errs.push(FieldError::required("spec.concurrencyPolicy", "")),
        other => errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            &json!(other),
            &["Allow", "Forbid", "Replace"],
        )),
    }
    non_negative(
        obj,
        "/spec/successfulJobsHistoryLimit",
        "spec.successfulJobsHistoryLimit",
        &mut errs,
    );
    non_negative(
        obj,
        "/spec/failedJobsHistoryLimit",
        "spec.failedJobsHistoryLimit",
        &mut errs,
    );
    let job_spec = spec.pointer("/jobTemplate/spec").cloned().unwrap_or(json!({}));
    errs.extend(validate_job_spec(&job_spec, "spec.jobTemplate.spec"));
    if let Some(sel) = job_spec.get("selector").filter(|s| !s.is_null()) {
        errs.push(invalid_printed(
            "spec.jobTemplate.spec.selector",
            &go_label_selector(Some(sel)),
            "`selector` will be auto-generated",
        ));
    }
    if job_spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::not_supported(
            "spec.jobTemplate.spec.manualSelector",
            &json!(true),
            &["nil", "false"],
        ));
    }
    errs
}

/// upstream `validateTimeZone`: an explicit IANA zone that this machine knows.
fn validate_time_zone(tz: &str) -> Vec<FieldError> {
    let invalid = |msg: &str| vec![FieldError::invalid("spec.timeZone", &json!(tz), msg)];
    if tz.is_empty() {
        return invalid("timeZone must be nil or non-empty string");
    }
    let valid_part = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && !p.is_empty()
            && p.len() <= 14
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_+.".contains(&b))
    };
    if !tz.split('/').all(valid_part) {
        return invalid(&format!("unknown time zone {tz}"));
    }
    if tz.eq_ignore_ascii_case("Local") {
        return invalid(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        );
    }
    // A machine without a zone database cannot tell; accept rather than refuse every zone.
    let db_empty = jiff::tz::db().available().next().is_none();
    if tz != "UTC" && !db_empty && jiff::tz::TimeZone::get(tz).is_err() {
        return invalid(&format!("unknown time zone {tz}"));
    }
    Vec::new()
}

/// A port of the checks of `robfig/cron/v3` `ParseStandard`, which upstream validates schedules with:
/// five fields or a descriptor, with its error texts.
pub mod cron {
    /// (min, max, names) per field: minute, hour, day of month, month, day of week.
    const FIELDS: [(i64, i64, &[&str]); 5] = [
        (0, 59, &[]),
        (0, 23, &[]),
        (1, 31, &[]),
        (
            1,
            12,
            &[
                "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
            ],
        ),
        (0, 6, &["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
    ];

    /// Whether `spec` parses; the error is robfig's message.
    pub fn parse_standard(spec: &str) -> Result<(), String> {
        let mut spec = spec.trim();
        if spec.is_empty() {
            return Err("empty spec string".into());
        }
        if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
            let Some(i) = spec.find(' ') else {
                return Err(format!("provided bad location {spec}: unknown time zone"));
            };
            spec = spec[i..].trim();
        }
        if let Some(descriptor) = spec.strip_prefix('@') {
            return match descriptor {
                "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => Ok(()),
                d if d.starts_with("every ") => {
                    let dur = d["every ".len()..].trim();
                    if is_go_duration(dur) {
                        Ok(())
                    } else {
                        Err(format!(
                            "failed to parse duration {spec}: time: invalid duration {dur:?}"
                        ))
                    }
                }
                _ => Err(format!("unrecognized descriptor: {spec}")),
            };
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            ));
        }
        for (field, (min, max, names)) in fields.iter().zip(FIELDS) {
            for range in field.split(',') {
                parse_range(range, min, max, names)?;
            }
        }
        Ok(())
    }

    fn parse_range(expr: &str, min: i64, max: i64, names: &[&str]) -> Result<(), String> {
        let range_and_step: Vec<&str> = expr.split('/').collect();
        let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
        let single = low_and_high.len() == 1;
        let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
            (min, max)
        } else {
            let start = int_or_name(low_and_high[0], names)?;
            let end = match low_and_high.len() {
                1 => start,
                2 => int_or_name(low_and_high[1], names)?,
                _ => return Err(format!("too many hyphens: {expr}")),
            };
            (start, end)
        };
        let step = match range_and_step.len() {
            1 => 1,
            2 => {
                let step = must_int(range_and_step[1])?;
                if single {
                    end = max;
                }
                step
            }
            _ => return Err(format!("too many slashes: {expr}")),
        };
        if start < min {
            return Err(format!(
                "beginning of range ({start}) below minimum ({min}): {expr}"
            ));
        }
        if end > max {
            return Err(format!("end of range ({end}) above maximum ({max}): {expr}"));
        }
        if start > end {
            return Err(format!(
                "beginning of range ({start}) beyond end of range ({end}): {expr}"
            ));
        }
        if step == 0 {
            return Err(format!("step of range should be a positive number: {expr}"));
        }
        Ok(())
    }

    fn int_or_name(expr: &str, names: &[&str]) -> Result<i64, String> {
        let lower = expr.to_ascii_lowercase();
        if let Some(i) = names.iter().position(|n| *n == lower) {
            // Months count from 1, weekdays from 0.
            return Ok(if names.len() == 12 { i as i64 + 1 } else { i as i64 });
        }
        must_int(expr)
    }

    fn must_int(expr: &str) -> Result<i64, String> {
        let n: i64 = expr.parse().map_err(|_| {
            format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax")
        })?;
        if n < 0 {
            return Err(format!("negative number ({n}) not allowed: {expr}"));
        }
        Ok(n)
    }

    /// Go's `time.ParseDuration` grammar: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, units ns us µs ms s m h.
    fn is_go_duration(s: &str) -> bool {
        let s = s.strip_prefix(['-', '+']).unwrap_or(s);
        if s == "0" {
            return true;
        }
        let mut rest = s;
        if rest.is_empty() {
            return false;
        }
        while !rest.is_empty() {
            let num = rest
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(rest.len());
            if num == 0 || rest[..num].matches('.').count() > 1 {
                return false;
            }
            rest = &rest[num..];
            let unit = ["ns", "us", "µs", "ms", "s", "m", "h"]
                .iter()
                .filter(|u| rest.starts_with(**u))
                .max_by_key(|u| u.len());
            let Some(unit) = unit else { return false };
            rest = &rest[unit.len()..];
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Value {
        json!({"metadata": {"name": "pi", "uid": "u-1"},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "pi", "image": "perl:5.34"}]}}}})
    }

    #[test]
    fn job_create_defaults_and_generates_the_selector() {
        let mut j = job();
        prepare_create("jobs", &mut j);
        let s = &j["spec"];
        assert_eq!(s["completions"], 1);
        assert_eq!(s["parallelism"], 1);
        assert_eq!(s["backoffLimit"], 6);
        assert_eq!(s["completionMode"], "NonIndexed");
        assert_eq!(s["suspend"], false);
        assert_eq!(s["manualSelector"], false);
        assert_eq!(s["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            s["selector"],
            json!({"matchLabels": {CONTROLLER_UID_LABEL: "u-1"}})
        );
        let want = json!({CONTROLLER_UID_LABEL: "u-1", JOB_NAME_LABEL: "pi",
                          LEGACY_CONTROLLER_UID_LABEL: "u-1", LEGACY_JOB_NAME_LABEL: "pi"});
        assert_eq!(s["template"]["metadata"]["labels"], want);
        assert_eq!(j["metadata"]["labels"], want);
        assert!(
            validate("jobs", &j, None, false).is_empty(),
            "{:?}",
            validate("jobs", &j, None, false)
        );
    }

    #[test]
    fn job_defaults_depend_on_the_other_fields() {
        let mut j = job();
        j["spec"]["parallelism"] = json!(3);
        j["spec"]["backoffLimitPerIndex"] = json!(1);
        j["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget"}]}]});
        j["metadata"]["labels"] = json!({"mine": "1"});
        prepare_create("jobs", &mut j);
        assert!(j["spec"].get("completions").is_none());
        assert_eq!(j["spec"]["backoffLimit"], i32::MAX);
        assert_eq!(j["spec"]["podReplacementPolicy"], "Failed");
        assert_eq!(
            j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"],
            "True"
        );
        assert_eq!(j["metadata"]["labels"], json!({"mine": "1"}));
    }

    #[test]
    fn manual_selector_jobs_keep_their_labels() {
        let mut j = job();
        j["spec"]["manualSelector"] = json!(true);
        j["spec"]["selector"] = json!({"matchLabels": {"app": "pi"}});
        j["spec"]["template"]["metadata"] = json!({"labels": {"app": "pi"}});
        prepare_create("jobs", &mut j);
        assert_eq!(j["spec"]["template"]["metadata"]["labels"], json!({"app": "pi"}));
        assert!(validate("jobs", &j, None, false).is_empty());
    }

    #[test]
    fn job_validation_rejects_bad_restart_policies_and_template_changes() {
        let mut j = job();
        j["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        prepare_create("jobs", &mut j);
        assert_eq!(
            validate("jobs", &j, None, false)[0].message,
            "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \
             \"Never\""
        );

        let mut old = job();
        prepare_create("jobs", &mut old);
        let mut new = old.clone();
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("perl:6");
        let errs = validate("jobs", &new, Some(&old), false);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].message.starts_with("spec.template: Invalid value: {"));
        assert!(errs[0].message.ends_with(": field is immutable"));

        // Suspended and never started: scheduling directives may change.
        old["spec"]["suspend"] = json!(true);
        let mut moved = old.clone();
        moved["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        assert!(validate("jobs", &moved, Some(&old), false).is_empty());

        let mut wrong_uid = job();
        wrong_uid["spec"]["selector"] = json!({"matchLabels": {CONTROLLER_UID_LABEL: "other"}});
        prepare_create("jobs", &mut wrong_uid);
        let msgs: Vec<String> = validate("jobs", &wrong_uid, None, false)
            .into_iter()
            .map(|e| e.message)
            .collect();
        assert!(
            msgs.iter().any(|m| m.ends_with("`selector` not auto-generated")),
            "{msgs:?}"
        );
    }

    #[test]
    fn cron_job_defaults_and_schedule_checks() {
        let mut cj = json!({"metadata": {"name": "hello"}, "spec": {"schedule": "*/1 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        prepare_create("cronjobs", &mut cj);
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["suspend"], false);
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
        // Job defaults are for Jobs, not job templates; pod template defaults apply.
        assert!(cj["spec"]["jobTemplate"]["spec"].get("backoffLimit").is_none());
        assert_eq!(
            cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        assert!(validate("cronjobs", &cj, None, false).is_empty());

        let mut tz = cj.clone();
        tz["spec"]["schedule"] = json!("CRON_TZ=UTC 0 * * * *");
        assert_eq!(
            validate("cronjobs", &tz, None, false)[0].message,
            "spec.schedule: Invalid value: \"CRON_TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use \
             timeZone field instead"
        );
        assert!(validate("cronjobs", &tz, Some(&tz), false).is_empty());
        let mut bad = cj.clone();
        bad["spec"]["schedule"] = json!("bogus");
        assert_eq!(
            validate("cronjobs", &bad, None, false)[0].message,
            "spec.schedule: Invalid value: \"bogus\": expected exactly 5 fields, found 1: [bogus]"
        );
        let mut zone = cj.clone();
        zone["spec"]["timeZone"] = json!("Local");
        assert!(
            validate("cronjobs", &zone, None, false)[0]
                .message
                .contains("explicit time zone")
        );
    }

    #[test]
    fn robfig_standard_parser_accepts_and_rejects_like_upstream() {
        for ok in [
            "* * * * *",
            "0 0 1 1 *",
            "*/5 1-5 * JAN-mar sun",
            "@hourly",
            "@every 1h30m",
            "0 0 * * 0,6",
        ] {
            assert_eq!(cron::parse_standard(ok), Ok(()), "{ok}");
        }
        for (bad, want) in [
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            (
                "x * * * *",
                "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax",
            ),
            ("@often", "unrecognized descriptor: @often"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ] {
            assert_eq!(cron::parse_standard(bad), Err(want.to_string()), "{bad}");
        }
    }
}
