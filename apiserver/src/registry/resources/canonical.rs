//! The canonical form of a built-in kind's object, walked from the kind's schema.
//!
//! Every write of a built-in kind stores the object as k8s-openapi writes it back after reading it:
//! unknown fields dropped, an absent or null required field at its default, times in their canonical
//! form, bytes re-encoded, `apiVersion` and `kind` of the type, and a value of the wrong JSON type
//! refused. Deserialising into the typed struct and serialising it again did that, but compiled serde's
//! code for every type of every kind into the release build: a quarter of the API server's compile time
//! (ARCHITECTURE.md, Decisions: canonical forms from the schema).
//!
//! This walks the schemas the OpenAPI documents serve (`components.json`, generated from k8s-openapi and
//! checked against it by a test), compiled once into a table. The leaves still go through their own
//! serde types (strings, integers, times, quantities, int-or-string, bytes, raw JSON), so their values
//! and error messages are serde's. The rules of k8s-openapi's generated structs are the walker's:
//! - a field the struct does not have is dropped;
//! - a null field is absent (a required time refuses it);
//! - an absent required field takes its type's default (`""`, `0`, `false`, `[]`, `{}`, the struct with
//!   its own required fields), except a time, which has none: "missing field";
//! - a kind's struct checks `apiVersion` and `kind` when given and always writes its own.
//!
//! The test `the_walk_is_the_typed_round_trip` compares the two on generated objects of every kind.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

/// The type of a field, an array's items or a map's values.
#[derive(Clone, Debug, PartialEq)]
enum Ty {
    Str,
    Bool,
    I32,
    I64,
    F64,
    /// base64 (`format: byte`).
    Bytes,
    Time,
    MicroTime,
    Quantity,
    IntOrString,
    /// Any JSON, kept as it is (RawExtension, FieldsV1).
    Raw,
    /// A struct of the table, by index.
    Struct(usize),
    Array(Box<Ty>),
    Map(Box<Ty>),
    /// A schema the walker does not model (the JSONSchemaProps unions of CRDs); no walked kind reaches one.
    Unsupported(String),
}

#[derive(Debug)]
struct Field {
    name: String,
    ty: Ty,
    required: bool,
}

#[derive(Debug)]
struct Struct {
    /// What serde says it expected when the value is not an object (`ContainerPort`, `Pod`).
    expecting: String,
    /// Sorted by name.
    fields: Vec<Field>,
    /// `(apiVersion, kind)` of a kind's struct.
    resource: Option<(String, String)>,
}

impl Struct {
    fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .binary_search_by(|f| f.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.fields[i])
    }
}

/// Every struct of `components.json`, and the struct of each kind.
#[derive(Debug)]
struct Table {
    structs: Vec<Struct>,
    /// `group/version/Kind` (`/v1/Pod` for core) -> struct.
    kinds: HashMap<String, usize>,
}

const SCHEMA_PREFIX: &str = "#/components/schemas/";

/// The type a component stands for, when it is not a struct of fields.
fn leaf_component(name: &str) -> Option<Ty> {
    Some(match name {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time" => Ty::Time,
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime" => Ty::MicroTime,
        "io.k8s.apimachinery.pkg.api.resource.Quantity" => Ty::Quantity,
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString" => Ty::IntOrString,
        "io.k8s.apimachinery.pkg.runtime.RawExtension" | "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            Ty::Raw
        }
        _ => return None,
    })
}

/// What the walk reads of a schema. The rest, descriptions above all (most of the file's 0.9 MB), is
/// skipped unread: the table compiles in about a millisecond.
#[derive(Deserialize)]
struct Schema {
    #[serde(rename = "$ref")]
    reference: Option<String>,
    #[serde(rename = "allOf", default)]
    all_of: Vec<Schema>,
    #[serde(rename = "type")]
    kind: Option<String>,
    format: Option<String>,
    items: Option<Box<Schema>>,
    #[serde(rename = "additionalProperties")]
    values: Option<Box<Schema>>,
    properties: Option<BTreeMap<String, Schema>>,
    #[serde(default)]
    required: Vec<String>,
}

impl Schema {
    /// The component it refers to: `{"$ref": ...}` or `{"allOf": [{"$ref": ...}]}`.
    fn component(&self) -> Option<&str> {
        let r = match (&self.reference, self.all_of.as_slice()) {
            (Some(r), _) => r,
            (None, [one]) => one.reference.as_ref()?,
            _ => return None,
        };
        r.strip_prefix(SCHEMA_PREFIX)
    }
}

fn property_ty(p: &Schema, index: &HashMap<&str, usize>) -> Ty {
    if let Some(name) = p.component() {
        return leaf_component(name)
            .or_else(|| index.get(name).map(|&i| Ty::Struct(i)))
            .unwrap_or_else(|| Ty::Unsupported(name.to_string()));
    }
    let unsupported = || Ty::Unsupported(format!("type {:?}, format {:?}", p.kind, p.format));
    match (p.kind.as_deref(), p.format.as_deref()) {
        (Some("string"), Some("byte")) => Ty::Bytes,
        (Some("string"), None) => Ty::Str,
        (Some("boolean"), None) => Ty::Bool,
        (Some("integer"), Some("int32")) => Ty::I32,
        (Some("integer"), Some("int64")) => Ty::I64,
        (Some("number"), Some("double")) => Ty::F64,
        (Some("array"), None) => match &p.items {
            Some(items) => Ty::Array(Box::new(property_ty(items, index))),
            None => unsupported(),
        },
        (Some("object"), None) => match &p.values {
            Some(values) => Ty::Map(Box::new(property_ty(values, index))),
            None => unsupported(),
        },
        _ => unsupported(),
    }
}

/// The last segment of a component name: the Rust type's name, which serde's errors give.
fn short_name(component: &str) -> &str {
    component.rsplit('.').next().unwrap_or(component)
}

impl Table {
    fn compile(components: &str) -> Result<Table, String> {
        #[derive(Deserialize)]
        struct Components {
            kinds: BTreeMap<String, String>,
            schemas: BTreeMap<String, Schema>,
        }
        let c: Components = serde_json::from_str(components).map_err(|e| e.to_string())?;
        let structs: Vec<(&str, &Schema, &BTreeMap<String, Schema>)> = c
            .schemas
            .iter()
            .filter_map(|(name, s)| Some((name.as_str(), s, s.properties.as_ref()?)))
            .collect();
        let index: HashMap<&str, usize> = structs.iter().enumerate().map(|(i, (n, _, _))| (*n, i)).collect();
        let mut out: Vec<Struct> = structs
            .iter()
            .map(|(name, schema, properties)| Struct {
                expecting: short_name(name).to_string(),
                // Sorted by name, as a BTreeMap iterates.
                fields: properties
                    .iter()
                    .map(|(f, p)| Field {
                        name: f.clone(),
                        ty: property_ty(p, &index),
                        required: schema.required.contains(f),
                    })
                    .collect(),
                resource: None,
            })
            .collect();
        let mut kinds = HashMap::new();
        for (gvk, component) in &c.kinds {
            let Some(&i) = index.get(component.as_str()) else {
                return Err(format!("{gvk}: no struct {component}"));
            };
            let mut parts = gvk.splitn(3, '/');
            let (group, version, kind) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            let api_version = if group.is_empty() {
                version.to_string()
            } else {
                format!("{group}/{version}")
            };
            // A kind's struct says its kind when it expected an object, and writes both type fields.
            out[i].expecting = kind.to_string();
            out[i].resource = Some((api_version, kind.to_string()));
            kinds.insert(gvk.clone(), i);
        }
        Ok(Table { structs: out, kinds })
    }
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        Table::compile(crate::http::openapi::components_json())
            .expect("components.json is checked by its test")
    })
}

/// Compile the table now, so that the first write does not wait for it (a few milliseconds).
pub fn warm() {
    let _ = table();
}

/// The canonical form of `v`, an object of the built-in kind `group/version/kind`.
pub fn canonical(group: &str, version: &str, kind: &str, v: &Value) -> Result<Value, String> {
    let t = table();
    let Some(&i) = t.kinds.get(&format!("{group}/{version}/{kind}")) else {
        return Err(format!("no schema for {kind} in {group}/{version}"));
    };
    walk_struct(t, &t.structs[i], v)
}

fn err(e: serde_json::Error) -> String {
    e.to_string()
}

/// A leaf read by its own serde type and written back.
fn leaf<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Result<Value, String> {
    let typed = T::deserialize(v).map_err(err)?;
    serde_json::to_value(typed).map_err(err)
}

fn walk(t: &Table, ty: &Ty, v: &Value) -> Result<Value, String> {
    match ty {
        Ty::Str => String::deserialize(v).map(Value::String).map_err(err),
        Ty::Bool => bool::deserialize(v).map(Value::Bool).map_err(err),
        Ty::I32 => i32::deserialize(v).map(Value::from).map_err(err),
        Ty::I64 => i64::deserialize(v).map(Value::from).map_err(err),
        Ty::F64 => f64::deserialize(v).map(Value::from).map_err(err),
        Ty::Bytes => leaf::<ByteString>(v),
        Ty::Time => leaf::<Time>(v),
        Ty::MicroTime => leaf::<MicroTime>(v),
        Ty::Quantity => leaf::<Quantity>(v),
        Ty::IntOrString => leaf::<IntOrString>(v),
        Ty::Raw => Ok(v.clone()),
        Ty::Struct(i) => walk_struct(t, &t.structs[*i], v),
        Ty::Array(item) => match v {
            Value::Array(items) => items
                .iter()
                .map(|x| walk(t, item, x))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            // serde's own message: "invalid type: ..., expected a sequence".
            _ => Err(Vec::<IgnoredAny>::deserialize(v)
                .err()
                .map_or_else(String::new, err)),
        },
        Ty::Map(value) => match v {
            Value::Object(m) => m
                .iter()
                .map(|(k, x)| Ok((k.clone(), walk(t, value, x)?)))
                .collect::<Result<Map<_, _>, String>>()
                .map(Value::Object),
            _ => Err(BTreeMap::<String, IgnoredAny>::deserialize(v)
                .err()
                .map_or_else(String::new, err)),
        },
        Ty::Unsupported(what) => Err(format!("no canonical form for {what}")),
    }
}

/// serde's refusal of a value that is not an object where the struct `expecting` was.
fn not_an_object(expecting: &str, v: &Value) -> String {
    struct Expect<'a>(&'a str);
    impl serde::de::Visitor<'_> for Expect<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    serde::Deserializer::deserialize_struct(v, "", &[], Expect(expecting))
        .err()
        .map_or_else(String::new, err)
}

/// The value an absent required field takes; `None` for a type without a default (a time).
fn default(t: &Table, ty: &Ty) -> Option<Value> {
    Some(match ty {
        Ty::Str | Ty::Bytes | Ty::Quantity => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::I32 | Ty::I64 | Ty::IntOrString => Value::from(0),
        Ty::F64 => Value::from(0.0),
        Ty::Raw => Value::Null,
        Ty::Array(_) => Value::Array(Vec::new()),
        Ty::Map(_) => Value::Object(Map::new()),
        Ty::Struct(i) => walk_struct(t, &t.structs[*i], &Value::Object(Map::new())).ok()?,
        Ty::Time | Ty::MicroTime | Ty::Unsupported(_) => return None,
    })
}

fn walk_struct(t: &Table, s: &Struct, v: &Value) -> Result<Value, String> {
    let Value::Object(given) = v else {
        return Err(not_an_object(&s.expecting, v));
    };
    let mut out = Map::new();
    // In the given order (sorted), as serde visits them: the first bad field is the one reported.
    for (name, value) in given {
        let Some(field) = s.field(name) else { continue };
        if let Some((api_version, kind)) = &s.resource
            && (name == "apiVersion" || name == "kind")
        {
            let given = String::deserialize(value).map_err(err)?;
            let want = if name == "kind" { kind } else { api_version };
            if &given != want {
                return Err(err(serde::de::Error::invalid_value(
                    serde::de::Unexpected::Str(&given),
                    &want.as_str(),
                )));
            }
            continue;
        }
        // A null is an absent field, except where the type has no default (a required time): k8s-openapi
        // reads such a field without `Option`, so its own type refuses the null.
        if value.is_null() && !(field.required && default(t, &field.ty).is_none()) {
            continue;
        }
        out.insert(name.clone(), walk(t, &field.ty, value)?);
    }
    for field in s.fields.iter().filter(|f| f.required) {
        let type_field = matches!(field.name.as_str(), "apiVersion" | "kind");
        if out.contains_key(&field.name) || (s.resource.is_some() && type_field) {
            continue;
        }
        let Some(d) = default(t, &field.ty) else {
            // serde's message for a missing field (its `missing_field` wants a `&'static str`).
            return Err(format!("missing field `{}`", field.name));
        };
        out.insert(field.name.clone(), d);
    }
    if let Some((api_version, kind)) = &s.resource {
        out.insert("apiVersion".to_string(), Value::String(api_version.clone()));
        out.insert("kind".to_string(), Value::String(kind.clone()));
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::resources::{self, Canonical, ResourceInfo};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use serde_json::json;

    /// The kinds whose canonical form is the schema walk.
    fn walked() -> Vec<&'static ResourceInfo> {
        resources::builtin()
            .filter(|r| matches!(r.canonical, Canonical::Schema))
            .collect()
    }

    fn pick<T: Clone>(rng: &mut StdRng, from: &[T]) -> T {
        from[rng.random_range(0..from.len())].clone()
    }

    /// Random objects of a table's types: fields present less often the deeper they are, some null,
    /// some unknown, and, at `wrong` per value, a value of another JSON type or out of range.
    struct Gen {
        rng: StdRng,
        wrong: f64,
    }

    impl Gen {
        fn value(&mut self, t: &Table, ty: &Ty, depth: usize) -> Value {
            if self.rng.random_bool(self.wrong) {
                return self.wrong_value(ty);
            }
            let rng = &mut self.rng;
            match ty {
                Ty::Str => pick(rng, &[json!(""), json!("a"), json!("name-1")]),
                Ty::Bool => json!(rng.random_bool(0.5)),
                Ty::I32 => pick(rng, &[json!(0), json!(5), json!(-3), json!(i32::MAX)]),
                Ty::I64 => pick(rng, &[json!(0), json!(7), json!(-1), json!(i64::MAX)]),
                Ty::F64 => pick(rng, &[json!(0), json!(1.5), json!(3)]),
                Ty::Bytes => pick(rng, &[json!(""), json!("aGVsbG8=")]),
                Ty::Time | Ty::MicroTime => pick(
                    rng,
                    &[
                        json!("2024-01-02T03:04:05Z"),
                        json!("2024-01-02T03:04:05.123456789+02:00"),
                        json!("2024-01-02T03:04:05.5Z"),
                    ],
                ),
                Ty::Quantity => pick(rng, &[json!("1Gi"), json!("100m"), json!(5), json!(1.5)]),
                Ty::IntOrString => pick(rng, &[json!(8080), json!("http"), json!("50%")]),
                Ty::Raw => pick(rng, &[json!({"a": 1}), json!([1, "x"]), json!("s"), json!(null)]),
                Ty::Struct(i) => self.object(t, &t.structs[*i], depth + 1),
                Ty::Array(item) => {
                    let n = if depth > 8 { 0 } else { self.rng.random_range(0..3) };
                    Value::Array((0..n).map(|_| self.item(t, item, depth + 1)).collect())
                }
                Ty::Map(value) => {
                    let n = if depth > 8 { 0 } else { self.rng.random_range(0..3) };
                    Value::Object(
                        (0..n)
                            .map(|k| (format!("k{k}"), self.item(t, value, depth + 1)))
                            .collect(),
                    )
                }
                Ty::Unsupported(what) => panic!("a walked kind reaches {what}"),
            }
        }

        /// An array item or map value: sometimes null.
        fn item(&mut self, t: &Table, ty: &Ty, depth: usize) -> Value {
            if self.rng.random_bool(self.wrong) {
                Value::Null
            } else {
                self.value(t, ty, depth)
            }
        }

        fn wrong_value(&mut self, ty: &Ty) -> Value {
            let rng = &mut self.rng;
            match ty {
                Ty::I32 => pick(rng, &[json!(2_147_483_648_i64), json!(2.0), json!("5")]),
                Ty::I64 => pick(rng, &[json!(u64::MAX), json!(2.5)]),
                Ty::Bytes => pick(rng, &[json!("!!"), json!("aGVsbG8"), json!(null)]),
                Ty::Time | Ty::MicroTime => pick(rng, &[json!("2024-01-02"), json!("yesterday"), json!(5)]),
                Ty::Quantity => pick(rng, &[json!(true), json!(-2), json!([])]),
                Ty::IntOrString => pick(rng, &[json!(4_294_967_296_i64), json!(-1), json!(1.5), json!({})]),
                _ => pick(
                    rng,
                    &[
                        json!("w"),
                        json!(7),
                        json!(2.5),
                        json!(true),
                        json!([]),
                        json!({}),
                        json!([1]),
                    ],
                ),
            }
        }

        fn object(&mut self, t: &Table, s: &Struct, depth: usize) -> Value {
            let mut out = Map::new();
            let present = 0.7 / (1.0 + depth as f64);
            for f in &s.fields {
                if s.resource.is_some() && matches!(f.name.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                if depth > 10 || !self.rng.random_bool(present) {
                    continue;
                }
                let v = if self.rng.random_bool(0.08) {
                    Value::Null
                } else {
                    self.value(t, &f.ty, depth)
                };
                out.insert(f.name.clone(), v);
            }
            if let Some((api_version, kind)) = &s.resource {
                for (name, right) in [("apiVersion", api_version), ("kind", kind)] {
                    match self.rng.random_range(0..10) {
                        0 => {}
                        1 if self.wrong > 0.0 => {
                            out.insert(name.to_string(), json!("other/v9"));
                        }
                        _ => {
                            out.insert(name.to_string(), json!(right));
                        }
                    }
                }
            }
            if self.rng.random_bool(0.15) {
                out.insert("zzUnknown".to_string(), json!({"any": ["thing"]}));
            }
            Value::Object(out)
        }
    }

    #[test]
    fn the_walk_is_the_typed_round_trip() {
        let t = table();
        let kinds = walked();
        assert!(kinds.len() > 50, "{} walked kinds", kinds.len());
        let (mut ok, mut refused) = (0, 0);
        for (k, info) in kinds.iter().enumerate() {
            let &i = t
                .kinds
                .get(&format!("{}/{}/{}", info.group, info.version, info.kind))
                .unwrap_or_else(|| panic!("no schema for {}", info.kind));
            for round in 0..300u64 {
                // Half the objects are well typed everywhere; the rest have a wrong value here and there.
                let wrong = if round % 2 == 0 { 0.0 } else { 0.03 };
                let mut g = Gen {
                    rng: StdRng::seed_from_u64(k as u64 * 1_000 + round),
                    wrong,
                };
                let obj = g.object(t, &t.structs[i], 0);
                let typed = (info.typed)(&obj);
                let walked = info.canonical_form(&obj);
                assert_eq!(
                    walked,
                    typed,
                    "{} round {round}: the walk (left) and the typed round trip (right) differ on\n{}",
                    info.kind,
                    serde_json::to_string_pretty(&obj).unwrap()
                );
                if typed.is_ok() { ok += 1 } else { refused += 1 }
            }
        }
        // Both outcomes are compared often, or the test proves little.
        eprintln!(
            "{} kinds: {ok} objects accepted and {refused} refused by both",
            kinds.len()
        );
        assert!(ok > 5_000 && refused > 2_500, "{ok} accepted, {refused} refused");
    }

    #[test]
    fn every_walked_kind_reaches_only_modelled_types() {
        let t = table();
        for info in walked() {
            let mut todo = vec![Ty::Struct(
                t.kinds[&format!("{}/{}/{}", info.group, info.version, info.kind)],
            )];
            let mut seen = std::collections::HashSet::new();
            while let Some(ty) = todo.pop() {
                match ty {
                    Ty::Struct(i) if seen.insert(i) => {
                        todo.extend(t.structs[i].fields.iter().map(|f| f.ty.clone()))
                    }
                    Ty::Array(x) | Ty::Map(x) => todo.push(*x),
                    Ty::Unsupported(what) => panic!("{} reaches {what}", info.kind),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn canonical_forms() {
        let cases: &[(&str, Value, Result<Value, &str>)] = &[
            (
                "unknown and null fields dropped, a required struct field filled, apiVersion and kind written",
                json!({"metadata": {"name": "a", "bogus": 1}, "data": null, "extra": true}),
                Ok(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})),
            ),
            (
                "bytes re-encoded, an integer quantity as a string",
                json!({"metadata": {}, "binaryData": {"k": "aGk="}}),
                Ok(
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}, "binaryData": {"k": "aGk="}}),
                ),
            ),
            (
                "a value of the wrong type refused in serde's words",
                json!({"metadata": {}, "data": {"k": 5}}),
                Err("invalid type: integer `5`, expected a string"),
            ),
            (
                "another kind refused",
                json!({"kind": "Secret", "metadata": {}}),
                Err("invalid value: string \"Secret\", expected ConfigMap"),
            ),
        ];
        for (what, given, want) in cases {
            let got = canonical("", "v1", "ConfigMap", given);
            assert_eq!(got, want.clone().map_err(str::to_string), "{what}");
        }
        // Times normalised; a required time absent is a missing field, not a default.
        let pod = json!({"metadata": {"creationTimestamp": "2024-01-02T05:04:05+02:00"},
                         "status": {"conditions": [{"type": "Ready", "status": "True",
                                                    "lastTransitionTime": "2024-01-02T03:04:05.9Z"}]},
                         "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}],
                                                  "resources": {"limits": {"cpu": 1}}}]}});
        let got = canonical("", "v1", "Pod", &pod).unwrap();
        assert_eq!(got["metadata"]["creationTimestamp"], "2024-01-02T03:04:05Z");
        assert_eq!(
            got["status"]["conditions"][0]["lastTransitionTime"],
            "2024-01-02T03:04:05Z"
        );
        assert_eq!(got["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1");
        // metav1.Condition requires lastTransitionTime (a pod's conditions do not).
        let without_time = json!({"metadata": {}, "status": {"conditions": [{"type": "A", "status": "True",
            "reason": "R", "message": "m"}]}});
        assert_eq!(
            canonical("networking.k8s.io", "v1", "ServiceCIDR", &without_time),
            Err("missing field `lastTransitionTime`".to_string())
        );
    }
}
