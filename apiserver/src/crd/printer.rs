//! `kubectl get` Tables of custom resources (upstream `apiextensions-apiserver/pkg/registry/
//! customresource/tableconvertor`): NAME, then the version's `additionalPrinterColumns` read by
//! JSONPath, or AGE when it has none. Cells keep their JSON type; `date` columns print as ages. Pure.

use jiff::Timestamp;
use serde_json::{Value, json};

use super::{Column, json_path};
use crate::table::{self, IncludeObject};

/// Upstream's description of the NAME column.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, \
     although some resources may allow a client to request the generation of an appropriate name \
     automatically. Name is primarily intended for creation idempotence and configuration definition. \
     Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// The columns, AGE when the CRD names none (upstream's default).
fn effective(columns: &[Column]) -> Vec<Column> {
    if columns.is_empty() {
        vec![Column {
            name: "Age".into(),
            ty: "date".into(),
            format: String::new(),
            description:
                "CreationTimestamp is a timestamp representing the server time when this object was \
                          created."
                    .into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }]
    } else {
        columns.to_vec()
    }
}

/// The column definitions.
pub fn definitions(columns: &[Column]) -> Vec<Value> {
    let mut out = vec![json!({"name": "Name", "type": "string", "format": "name",
                              "description": NAME_DESCRIPTION, "priority": 0})];
    for c in effective(columns) {
        out.push(json!({"name": c.name, "type": c.ty, "format": c.format,
                        "description": c.description, "priority": c.priority}));
    }
    out
}

fn cell(c: &Column, obj: &Value, now: Timestamp) -> Value {
    let Some(v) = json_path(obj, &c.json_path) else {
        return Value::Null;
    };
    match (c.ty.as_str(), v) {
        (_, Value::Null) => Value::Null,
        ("date", Value::String(s)) => match s.parse::<Timestamp>() {
            Ok(t) => json!(table::human_duration(now.duration_since(t))),
            Err(_) => json!(s),
        },
        ("integer", Value::Number(n)) if n.is_i64() => v.clone(),
        ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) | ("string", Value::String(_)) => {
            v.clone()
        }
        // A value of another type prints as its JSON text (upstream prints Go's formatting).
        (_, Value::String(s)) => json!(s),
        (_, other) => json!(other.to_string()),
    }
}

/// One row's cells.
pub fn cells(columns: &[Column], obj: &Value, now: Timestamp) -> Vec<Value> {
    let name = obj
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or_else(|| json!(""));
    let mut out = vec![name];
    out.extend(effective(columns).iter().map(|c| cell(c, obj, now)));
    out
}

/// A whole Table, like [`table::table`] but with the CRD's columns.
pub fn table(
    columns: &[Column],
    objs: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now: Timestamp,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let mut t = table::table(
        table::Printer::Generic,
        objs,
        resource_version,
        continue_token,
        now,
        include,
        with_columns,
    );
    if with_columns {
        t["columnDefinitions"] = Value::Array(definitions(columns));
    }
    if let Some(rows) = t.get_mut("rows").and_then(Value::as_array_mut) {
        for (row, obj) in rows.iter_mut().zip(objs) {
            if let Some(r) = row.as_object_mut() {
                r.insert("cells".into(), Value::Array(cells(columns, obj, now)));
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: &str, path: &str) -> Column {
        Column {
            name: name.into(),
            ty: ty.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: path.into(),
        }
    }

    #[test]
    fn rows_hold_name_then_the_printer_columns_typed() {
        let now: Timestamp = "2024-01-01T01:00:00Z".parse().unwrap();
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": "2024-01-01T00:00:00Z"},
                         "spec": {"replicas": 3, "color": "red", "on": true}});
        let cols = vec![
            col("Replicas", "integer", ".spec.replicas"),
            col("Color", "string", ".spec.color"),
            col("On", "boolean", ".spec.on"),
            col("Missing", "string", ".spec.none"),
            col("Age", "date", ".metadata.creationTimestamp"),
        ];
        assert_eq!(
            cells(&cols, &obj, now),
            vec![
                json!("w"),
                json!(3),
                json!("red"),
                json!(true),
                Value::Null,
                json!("60m")
            ]
        );
        assert_eq!(cells(&[], &obj, now), vec![json!("w"), json!("60m")]);
        let defs = definitions(&[]);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[1]["name"], "Age");
    }
}
