//! kuttl's subset matching (`internal/utils/subset.go`, `IsSubset(expected, actual)`), as a pure function
//! that reports every differing field rather than the first, so the closest candidate can be chosen by
//! the number of differences.
//!
//! - Maps: every key of expected must be in actual and match; extra keys in actual are ignored.
//! - Arrays: the lengths must be equal and elements are compared by position (no "contains").
//! - Scalars: equal with identical JSON types; an integer never equals a float or a string (`1` vs `"1"`
//!   is a type mismatch), as Go's `reflect.TypeOf` comparison after the JSON decoder.
//! - `null` expected matches a present `null` only; a missing key is "key is missing from map".

use serde_json::Value;

/// One field that does not match: where, what was expected, what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDiff {
    /// The path from the object's root, as `.spec.containers[0].image`.
    pub path: String,
    /// The expected value (compact JSON) or a description.
    pub expected: String,
    /// The actual value (compact JSON), `<missing>` when the field is absent, or a description.
    pub actual: String,
    /// What is wrong, in kuttl's words (`key is missing from map`, `slice length mismatch: 1 != 2`, ...).
    pub message: String,
}

impl std::fmt::Display for FieldDiff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() { "." } else { &self.path };
        write!(f, "{path}: {}", self.message)?;
        // kuttl's value-mismatch message carries both values already.
        if !self.message.contains(&self.expected) {
            write!(f, " (expected {}, actual {})", self.expected, self.actual)?;
        }
        Ok(())
    }
}

/// The longest rendering of a value inside a diff; longer values are cut with `...`.
const MAX_RENDERED: usize = 200;

/// A value as compact JSON for a diff line, cut at [`MAX_RENDERED`] characters.
pub fn render(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > MAX_RENDERED {
        let cut: String = s.chars().take(MAX_RENDERED).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// The JSON type name as Go's decoder would see it (`int64`, `float64`, `string`, ...).
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "nil",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// kuttl's `IsSubset(expected, actual)`: `Ok` when expected is a subset of actual, else every differing
/// field (at least one).
pub fn kuttl_subset(actual: &Value, expected: &Value) -> Result<(), Vec<FieldDiff>> {
    let mut diffs = Vec::new();
    subset_at("", expected, actual, &mut diffs);
    if diffs.is_empty() { Ok(()) } else { Err(diffs) }
}

fn subset_at(path: &str, expected: &Value, actual: &Value, diffs: &mut Vec<FieldDiff>) {
    let (te, ta) = (type_name(expected), type_name(actual));
    if te != ta {
        diffs.push(FieldDiff {
            path: path.to_string(),
            expected: render(expected),
            actual: render(actual),
            message: format!("type mismatch: {te} != {ta}"),
        });
        return;
    }
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => subset_at(&p, ev, av, diffs),
                    None => diffs.push(FieldDiff {
                        path: p,
                        expected: render(ev),
                        actual: "<missing>".into(),
                        message: "key is missing from map".into(),
                    }),
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            if e.len() != a.len() {
                diffs.push(FieldDiff {
                    path: path.to_string(),
                    expected: render(expected),
                    actual: render(actual),
                    message: format!("slice length mismatch: {} != {}", e.len(), a.len()),
                });
                return;
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                subset_at(&format!("{path}[{i}]"), ev, av, diffs);
            }
        }
        _ if expected == actual => {}
        _ => diffs.push(FieldDiff {
            path: path.to_string(),
            expected: render(expected),
            actual: render(actual),
            message: format!(
                "value mismatch, expected: {} != actual: {}",
                render(expected),
                render(actual)
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(r: Result<(), Vec<FieldDiff>>) -> Vec<String> {
        match r {
            Ok(()) => vec![],
            Err(d) => d
                .into_iter()
                .map(|d| format!("{} {}", d.path, d.message))
                .collect(),
        }
    }

    #[test]
    fn subset_table() {
        let cases: Vec<(&str, Value, Value, Vec<&str>)> = vec![
            ("equal scalars", json!(1), json!(1), vec![]),
            (
                "extra keys in actual are ignored",
                json!({"a": 1}),
                json!({"a": 1, "b": 2}),
                vec![],
            ),
            (
                "nested maps are partial",
                json!({"s": {"r": 1}}),
                json!({"s": {"r": 1, "x": 2}}),
                vec![],
            ),
            (
                "a missing key",
                json!({"s": {"r": 1}}),
                json!({"s": {}}),
                vec![".s.r key is missing from map"],
            ),
            (
                "int against string is a type mismatch",
                json!({"r": "1"}),
                json!({"r": 1}),
                vec![".r type mismatch: string != int64"],
            ),
            (
                "int against float is a type mismatch",
                json!({"r": 1.5}),
                json!({"r": 1}),
                vec![".r type mismatch: float64 != int64"],
            ),
            (
                "a different value",
                json!({"status": {"phase": "Running"}}),
                json!({"status": {"phase": "Pending"}}),
                vec![".status.phase value mismatch, expected: \"Running\" != actual: \"Pending\""],
            ),
            (
                "arrays by position",
                json!([{"a": 1}, {"b": 2}]),
                json!([{"a": 1, "x": 0}, {"b": 2}]),
                vec![],
            ),
            (
                "arrays in another order do not match",
                json!({"l": [1, 2]}),
                json!({"l": [2, 1]}),
                vec![
                    ".l[0] value mismatch, expected: 1 != actual: 2",
                    ".l[1] value mismatch, expected: 2 != actual: 1",
                ],
            ),
            (
                "arrays of another length do not match",
                json!({"l": [1]}),
                json!({"l": [1, 2]}),
                vec![".l slice length mismatch: 1 != 2"],
            ),
            (
                "a null matches a present null",
                json!({"a": null}),
                json!({"a": null}),
                vec![],
            ),
            (
                "a null does not match a missing key",
                json!({"a": null}),
                json!({}),
                vec![".a key is missing from map"],
            ),
            (
                "a null does not match a value",
                json!({"a": null}),
                json!({"a": 1}),
                vec![".a type mismatch: nil != int64"],
            ),
            (
                "every difference is reported",
                json!({"a": 1, "b": {"c": true}, "d": "x"}),
                json!({"a": 2, "b": {"c": false}}),
                vec![
                    ".a value mismatch, expected: 1 != actual: 2",
                    ".b.c value mismatch, expected: true != actual: false",
                    ".d key is missing from map",
                ],
            ),
        ];
        for (name, expected, actual, want) in cases {
            assert_eq!(paths(kuttl_subset(&actual, &expected)), want, "{name}");
        }
    }

    #[test]
    fn long_values_are_cut() {
        let v = json!("x".repeat(500));
        let r = render(&v);
        assert!(r.ends_with("...") && r.len() < 220, "{r}");
    }
}
