//! Label and field selectors: the `labelSelector` and `fieldSelector` query parameters of list, watch and
//! deletecollection.
//!
//! `http` parses the parameters once per request (a parse error is a 400 with the message returned
//! here), checks the field names against the resource with [`FieldSelector::check_supported`], and the
//! list and watch paths call `matches` on every stored object. Everything here is pure: no I/O, no
//! storage types: objects are read through [`Fields`], which a wire-shape `serde_json` object implements and
//! so does the storage's compact [`Selectable`] view (labels and the selectable fields only). The grammar and the error wording
//! follow upstream `apimachinery/pkg/labels/selector.go` and `apimachinery/pkg/fields/selector.go`;
//! the selectable fields follow each kind's `ToSelectableFields` / field-label conversion.

use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------------------------------

/// A parsed label selector: an AND of requirements. The empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    /// Sorted and de-duplicated, as upstream's `sets.String`.
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    DoesNotExist,
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    GreaterThan,
    LessThan,
}

impl LabelSelector {
    /// Parses upstream's grammar: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
    /// `k>1`, `k<1`, joined by `,` (AND). Keys may carry a DNS prefix (`app.kubernetes.io/name`);
    /// values must be valid label values. Errors carry upstream's wording, e.g.
    /// `unable to parse requirement: found '', expected: identifier`.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut parser = Parser {
            items: lex(s),
            position: 0,
        };
        let mut requirements = parser.parse()?;
        // upstream: sort.Sort(ByKey(items)), a stable order for String() and for us, for equality.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object with these `metadata.labels` (absent -> `None`) is selected.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let present = labels.and_then(|l| l.get(&self.key));
        // Label values are strings on the wire; anything else cannot equal a selector value.
        let value = present.and_then(Value::as_str);
        match self.op {
            Op::Exists => present.is_some(),
            Op::DoesNotExist => present.is_none(),
            Op::Equals | Op::DoubleEquals | Op::In => value.is_some_and(|v| self.has(v)),
            // `!=` and `notin` select objects without the label too.
            Op::NotEquals | Op::NotIn => !value.is_some_and(|v| self.has(v)),
            Op::GreaterThan | Op::LessThan => {
                let (Some(have), Some(want)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.op == Op::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }

    fn has(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn symbol(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Upstream's lexer. Every delimiter is ASCII, so byte offsets always fall on `char` boundaries.
fn lex(s: &str) -> Vec<(Tok, String)> {
    let bytes = s.as_bytes();
    let mut items = Vec::new();
    let mut pos = 0;
    loop {
        while pos < bytes.len() && is_whitespace(bytes[pos]) {
            pos += 1;
        }
        if pos == bytes.len() {
            items.push((Tok::End, String::new()));
            return items;
        }
        let start = pos;
        if is_special(bytes[pos]) {
            // The longest run of symbols that is still a token: `!=` over `!`, `==` over `=`. Every single
            // symbol is a token, so upstream's "error expected: keyword" branch cannot happen.
            let mut token = (Tok::End, start);
            let mut end = start;
            while end < bytes.len() && is_special(bytes[end]) {
                end += 1;
                match symbol(&s[start..end]) {
                    Some(t) => token = (t, end),
                    None => break,
                }
            }
            items.push((token.0, s[start..token.1].to_string()));
            pos = token.1;
        } else {
            while pos < bytes.len() && !is_special(bytes[pos]) && !is_whitespace(bytes[pos]) {
                pos += 1;
            }
            let word = &s[start..pos];
            let tok = match word {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Identifier,
            };
            items.push((tok, word.to_string()));
        }
    }
}

/// Where the parser is: `in`/`notin` are operators after a key but plain identifiers where a key or a
/// value is expected (`in in (in)` is a valid selector upstream).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Tok, String)>,
    position: usize,
}

impl Parser {
    fn lookahead(&self, ctx: Context) -> (Tok, String) {
        let (tok, lit) = self.items[self.position.min(self.items.len() - 1)].clone();
        (Self::in_context(tok, ctx), lit)
    }

    fn consume(&mut self, ctx: Context) -> (Tok, String) {
        let item = self.lookahead(ctx);
        self.position += 1;
        item
    }

    fn in_context(tok: Tok, ctx: Context) -> Tok {
        match (ctx, tok) {
            (Context::Values, Tok::In | Tok::NotIn) => Tok::Identifier,
            _ => tok,
        }
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Tok::End => return Ok(requirements),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!("found '{l2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, inferred) = self.parse_key_and_infer_operator()?;
        if let Some(op) = inferred {
            return new_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Op::In | Op::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Op>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Tok::DoesNotExist {
            op = Some(Op::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = label_key_errors(&lit);
        if !errs.is_empty() {
            // upstream validates with a nil field path, which prints as `<nil>`
            return Err(format!("<nil>: Invalid value: {lit:?}: {}", errs.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if op.is_none() && matches!(next, Tok::End | Tok::Comma) {
            op = Some(Op::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Op, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Tok::In => Op::In,
            Tok::Equals => Op::Equals,
            Tok::DoubleEquals => Op::DoubleEquals,
            Tok::GreaterThan => Op::GreaterThan,
            Tok::LessThan => Op::LessThan,
            Tok::NotIn => Op::NotIn,
            Tok::NotEquals => Op::NotEquals,
            _ => {
                return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt"));
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Tok::OpenPar {
            // sic: upstream has no comma before "expected" here
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let values = self.parse_identifiers_list()?;
                let (closing, _) = self.consume(Context::Values);
                if closing != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(values)
            }
            Tok::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A comma-separated list of possibly empty identifiers: `(a,,b)` holds `""` too.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut values: Vec<String> = Vec::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Tok::Identifier => {
                    values.push(lit);
                    let (next, next_lit) = self.lookahead(Context::Values);
                    match next {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{next_lit}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if values.is_empty() {
                        values.push(String::new()); // "(,"
                    }
                    let (next, _) = self.lookahead(Context::Values);
                    if next == Tok::ClosedPar {
                        values.push(String::new()); // ",)"
                        return Ok(values);
                    }
                    if next == Tok::Comma {
                        values.push(String::new()); // ",,"
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if matches!(tok, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Tok::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// Upstream `NewRequirement`: validates the values (the key was checked while parsing) and aggregates
/// the errors as `utilerrors.NewAggregate` prints them.
fn new_requirement(key: String, op: Op, mut values: Vec<String>) -> Result<Requirement, String> {
    values.sort();
    values.dedup();
    let mut errs: Vec<String> = Vec::new();
    if matches!(op, Op::GreaterThan | Op::LessThan) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errs.push(format!(
                    "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let problems = label_value_errors(v);
        if !problems.is_empty() {
            errs.push(format!(
                "values[{i}][{key}]: Invalid value: {v:?}: {}",
                problems.join("; ")
            ));
        }
    }
    errs.dedup();
    match errs.len() {
        0 => Ok(Requirement { key, op, values }),
        1 => Err(errs.remove(0)),
        _ => Err(format!("[{}]", errs.join(", "))),
    }
}

// Upstream validation wording (k8s 1.32 `apimachinery/pkg/util/validation`).
// Label keys and values follow the same rules as on objects (upstream IsQualifiedName, IsValidLabelValue).
use crate::registry::validation::{label_value_errors, qualified_name_errors as label_key_errors};

// ---------------------------------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------------------------------

/// A parsed field selector: an AND of `field=value` / `field!=value` terms. The empty selector matches
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    value: String,
    negated: bool,
}

impl FieldSelector {
    /// Parses `f=v`, `f==v`, `f!=v` joined by `,`. In values, `\,`, `\=` and `\\` stand for the
    /// characters themselves; an unescaped `,` or `=` in a value, or any other escape, is an error.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, op, rhs)) = split_term(part) else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            terms.push(FieldTerm {
                field: field.to_string(),
                value: unescape_value(rhs)?,
                negated: op == "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Checks that every field is selectable on this resource (`group` "" is core, `resource` is the
    /// plural). The error is the 400 message.
    pub fn check_supported(&self, group: &str, resource: &str) -> Result<(), String> {
        match self
            .terms
            .iter()
            .find(|t| field_value(group, resource, &Value::Null, &t.field).is_none())
        {
            // Deliberately one wording for every kind: upstream's default conversion says
            // `"f" is not a known field selector: only "metadata.name", "metadata.namespace"` and Job says
            // `field label "f" not supported for batchv1.Job`; no client reads the text.
            Some(t) => Err(format!("field label not supported: {}", t.field)),
            None => Ok(()),
        }
    }

    /// Whether the object (in the wire shape of `group`'s version) is selected. A field that is not
    /// selectable for the resource reads as `""`, as upstream's `fields.Set.Get` does.
    pub fn matches(&self, group: &str, resource: &str, obj: &(impl Fields + ?Sized)) -> bool {
        self.terms.iter().all(|t| {
            let have = field_value(group, resource, obj, &t.field).unwrap_or_default();
            (have == t.value) != t.negated
        })
    }

    /// `Some(name)` when the selector requires `metadata.name=<name>` (kubectl's `get NAME -w`,
    /// `wait` and `delete`), so a watch can be narrowed to one object.
    pub fn exact_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| !t.negated && t.field == "metadata.name")
            .map(|t| t.value.as_str())
    }
}

/// Splits on commas that are not escaped; the backslashes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, b) in s.bytes().enumerate() {
        if in_slash {
            in_slash = false;
        } else if b == b'\\' {
            in_slash = true;
        } else if b == b',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// The first operator occurrence splits the term; `!=` and `==` win over `=` at the same position.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    (0..term.len())
        .filter(|&i| term.is_char_boundary(i))
        .find_map(|i| {
            ["!=", "==", "="]
                .into_iter()
                .find(|op| term[i..].starts_with(op))
                .map(|op| (&term[..i], op, &term[i + op.len()..]))
        })
}

fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!("invalid field selector: invalid escape sequence: \\{c}"));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // sic: upstream prints the rune with %v, i.e. as its code point (44 for ',')
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// What selectors read
// ---------------------------------------------------------------------------------------------------

/// An object as selectors read it: its labels, the scalar at a path, and (for custom resources, whose
/// selectable fields are any path their CRD names) the whole object.
pub trait Fields {
    /// `metadata.labels`.
    fn labels(&self) -> Option<&Map<String, Value>>;
    /// The scalar at `path` (object keys; a number steps into an array), if present.
    fn at(&self, path: &[&str]) -> Option<Scalar<'_>>;
    /// The whole object in its wire shape.
    fn whole(&self) -> std::borrow::Cow<'_, Value>;
}

impl Fields for Value {
    fn labels(&self) -> Option<&Map<String, Value>> {
        self.get("metadata")?.get("labels")?.as_object()
    }

    fn at(&self, path: &[&str]) -> Option<Scalar<'_>> {
        let v = path.iter().try_fold(self, |v, key| match v {
            Value::Array(items) => items.get(key.parse::<usize>().ok()?),
            _ => v.get(key),
        })?;
        Some(match v {
            Value::String(s) => Scalar::Str(s),
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Number(n) => n.as_i64().map_or(Scalar::Other, Scalar::Int),
            _ => Scalar::Other,
        })
    }

    fn whole(&self) -> std::borrow::Cow<'_, Value> {
        std::borrow::Cow::Borrowed(self)
    }
}

/// A value as field selectors read it: a string, a bool, an integer, or anything else (which reads as
/// absent: `""`, `false`, `0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar<'a> {
    /// A string.
    Str(&'a str),
    /// A bool.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// Null, a fraction, an object or an array.
    Other,
}

impl<'a> Scalar<'a> {
    /// The string, if it is one.
    pub fn as_str(self) -> Option<&'a str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bool, if it is one.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if it is one.
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(i),
            _ => None,
        }
    }
}

/// Every path [`field_value`] reads for a built-in kind, and `apiVersion`: what [`Selectable`] keeps.
const SELECTABLE_PATHS: &[&[&str]] = &[
    // Not a field selector: what `registry::view` reads of every object (a custom resource's version).
    &["apiVersion"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["spec", "nodeName"],
    &["spec", "restartPolicy"],
    &["spec", "schedulerName"],
    &["spec", "serviceAccountName"],
    &["spec", "hostNetwork"],
    &["spec", "unschedulable"],
    &["spec", "clusterIP"],
    &["spec", "type"],
    &["spec", "signerName"],
    &["status", "phase"],
    &["status", "podIPs", "0", "ip"],
    &["status", "podIP"],
    &["status", "nominatedNodeName"],
    &["status", "replicas"],
    &["status", "succeeded"],
    &["type"],
    &["reason"],
    &["reportingComponent"],
    &["reportingController"],
    &["source", "component"],
    &["deprecatedSource", "component"],
    &["involvedObject", "kind"],
    &["involvedObject", "namespace"],
    &["involvedObject", "name"],
    &["involvedObject", "uid"],
    &["involvedObject", "apiVersion"],
    &["involvedObject", "resourceVersion"],
    &["involvedObject", "fieldPath"],
    &["regarding", "kind"],
    &["regarding", "namespace"],
    &["regarding", "name"],
    &["regarding", "uid"],
    &["regarding", "apiVersion"],
    &["regarding", "resourceVersion"],
    &["regarding", "fieldPath"],
];

/// The part of an object that label and field selectors of built-in kinds read, kept beside its stored
/// bytes: a stored object is not kept parsed (a parsed pod takes about nine times its JSON), yet every watch
/// event is matched against each watcher's selector. The scalars are packed into one string (an Event has a
/// dozen of them; one allocation each cost more than the text).
#[derive(Debug, Default)]
pub struct Selectable {
    labels: Option<Map<String, Value>>,
    /// Every kept scalar's text, one after another (a bool as `t`/`f`, an integer in decimal).
    text: Box<str>,
    /// (index into [`SELECTABLE_PATHS`], kind: `s`tring, `b`ool or `i`nteger, end of its text), in path order.
    fields: Box<[(u8, u8, u32)]>,
}

impl Selectable {
    /// Extract the labels and the selectable fields of `obj`.
    pub fn of(obj: &Value) -> Selectable {
        let mut text = String::new();
        let mut fields = Vec::new();
        for (i, path) in SELECTABLE_PATHS.iter().enumerate() {
            // Anything but a string, a bool or an integer reads as absent, so it is not kept.
            let kind = match obj.at(path) {
                Some(Scalar::Str(s)) => {
                    text.push_str(s);
                    b's'
                }
                Some(Scalar::Bool(b)) => {
                    text.push(if b { 't' } else { 'f' });
                    b'b'
                }
                Some(Scalar::Int(n)) => {
                    text.push_str(&n.to_string());
                    b'i'
                }
                Some(Scalar::Other) | None => continue,
            };
            let Ok(end) = u32::try_from(text.len()) else {
                break;
            };
            fields.push((i as u8, kind, end));
        }
        Selectable {
            labels: obj.labels().filter(|l| !l.is_empty()).cloned(),
            text: text.into_boxed_str(),
            fields: fields.into_boxed_slice(),
        }
    }

    /// `metadata.labels` (`None` when there are none).
    pub fn labels(&self) -> Option<&Map<String, Value>> {
        self.labels.as_ref()
    }

    /// The scalar at `path`, which must be one of the selectable paths.
    pub fn at(&self, path: &[&str]) -> Option<Scalar<'_>> {
        let i = SELECTABLE_PATHS.iter().position(|p| *p == path)?;
        let k = self.fields.iter().position(|(j, _, _)| usize::from(*j) == i)?;
        let start = k.checked_sub(1).map_or(0, |p| self.fields[p].2 as usize);
        let (_, kind, end) = self.fields[k];
        let t = self.text.get(start..end as usize)?;
        Some(match kind {
            b's' => Scalar::Str(t),
            b'b' => Scalar::Bool(t == "t"),
            _ => t.parse().map_or(Scalar::Other, Scalar::Int),
        })
    }
}

/// A string field; absent (or not a string) reads as `""`.
fn text(obj: &(impl Fields + ?Sized), path: &[&str]) -> String {
    obj.at(path)
        .and_then(Scalar::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A bool field as Go's `strconv.FormatBool`; absent is `false`.
fn flag(obj: &(impl Fields + ?Sized), path: &[&str]) -> String {
    obj.at(path)
        .and_then(Scalar::as_bool)
        .unwrap_or(false)
        .to_string()
}

/// An integer field as Go's `strconv.Itoa`; absent is `0`, as upstream's zero value.
fn count(obj: &(impl Fields + ?Sized), path: &[&str]) -> String {
    obj.at(path).and_then(Scalar::as_i64).unwrap_or(0).to_string()
}

/// The first non-empty of two string fields.
fn either(obj: &(impl Fields + ?Sized), first: &[&str], second: &[&str]) -> String {
    let v = text(obj, first);
    if v.is_empty() { text(obj, second) } else { v }
}

/// The value of a selectable field of an object (upstream `ToSelectableFields`), or `None` when the field
/// cannot be selected on this resource. Missing strings are `""`, missing numbers `"0"`, missing bools
/// `"false"`, exactly as upstream's typed zero values print.
pub fn field_value(group: &str, resource: &str, obj: &(impl Fields + ?Sized), field: &str) -> Option<String> {
    let value = match (group, resource, field) {
        (_, _, "metadata.name") => text(obj, &["metadata", "name"]),
        // These kinds have their own upstream conversion, which leaves out metadata.namespace; every other
        // kind gets DefaultMetaV1FieldSelectorConversion, which accepts it even when cluster-scoped.
        ("", "nodes" | "namespaces", "metadata.namespace")
        | ("certificates.k8s.io", "certificatesigningrequests", "metadata.namespace") => {
            return None;
        }
        (_, _, "metadata.namespace") => text(obj, &["metadata", "namespace"]),

        // pkg/registry/core/pod/strategy.go ToSelectableFields; "spec.host" is the v1 conversion's
        // backwards-compatible alias of spec.nodeName.
        ("", "pods", "spec.nodeName" | "spec.host") => text(obj, &["spec", "nodeName"]),
        ("", "pods", "spec.restartPolicy") => text(obj, &["spec", "restartPolicy"]),
        ("", "pods", "spec.schedulerName") => text(obj, &["spec", "schedulerName"]),
        ("", "pods", "spec.serviceAccountName") => text(obj, &["spec", "serviceAccountName"]),
        ("", "pods", "spec.hostNetwork") => flag(obj, &["spec", "hostNetwork"]),
        ("", "pods", "status.phase") => text(obj, &["status", "phase"]),
        // upstream reads status.podIPs[0].ip; v1 conversion fills podIPs from a lone podIP
        ("", "pods", "status.podIP") => match obj.at(&["status", "podIPs", "0", "ip"]) {
            Some(first) => first.as_str().unwrap_or_default().to_string(),
            None => text(obj, &["status", "podIP"]),
        },
        ("", "pods", "status.nominatedNodeName") => text(obj, &["status", "nominatedNodeName"]),

        ("", "nodes", "spec.unschedulable") => flag(obj, &["spec", "unschedulable"]),
        ("", "namespaces", "status.phase") => text(obj, &["status", "phase"]),
        ("", "secrets", "type") => text(obj, &["type"]),
        ("", "services", "spec.clusterIP") => text(obj, &["spec", "clusterIP"]),
        ("", "services", "spec.type") => text(obj, &["spec", "type"]),
        ("", "replicationcontrollers", "status.replicas") => count(obj, &["status", "replicas"]),

        // pkg/registry/core/event/strategy.go ToSelectableFields
        ("", "events", f) => match f {
            "involvedObject.kind" => text(obj, &["involvedObject", "kind"]),
            "involvedObject.namespace" => text(obj, &["involvedObject", "namespace"]),
            "involvedObject.name" => text(obj, &["involvedObject", "name"]),
            "involvedObject.uid" => text(obj, &["involvedObject", "uid"]),
            "involvedObject.apiVersion" => text(obj, &["involvedObject", "apiVersion"]),
            "involvedObject.resourceVersion" => text(obj, &["involvedObject", "resourceVersion"]),
            "involvedObject.fieldPath" => text(obj, &["involvedObject", "fieldPath"]),
            "reason" => text(obj, &["reason"]),
            "reportingComponent" => text(obj, &["reportingComponent"]),
            "source" => either(obj, &["source", "component"], &["reportingComponent"]),
            "type" => text(obj, &["type"]),
            _ => return None,
        },
        // pkg/apis/events/v1 AddFieldLabelConversionsForEvent: the events.k8s.io names of the same fields
        ("events.k8s.io", "events", f) => match f {
            "regarding.kind" => text(obj, &["regarding", "kind"]),
            "regarding.namespace" => text(obj, &["regarding", "namespace"]),
            "regarding.name" => text(obj, &["regarding", "name"]),
            "regarding.uid" => text(obj, &["regarding", "uid"]),
            "regarding.apiVersion" => text(obj, &["regarding", "apiVersion"]),
            "regarding.resourceVersion" => text(obj, &["regarding", "resourceVersion"]),
            "regarding.fieldPath" => text(obj, &["regarding", "fieldPath"]),
            "reason" => text(obj, &["reason"]),
            "reportingController" => text(obj, &["reportingController"]),
            "source" => either(obj, &["deprecatedSource", "component"], &["reportingController"]),
            "type" => text(obj, &["type"]),
            _ => return None,
        },

        // Upstream computes status.replicas in ReplicaSetToSelectableFields but apps/v1 registers no
        // field-label conversion, so the API rejects it; we accept it (a superset no client notices).
        ("apps", "replicasets", "status.replicas") => count(obj, &["status", "replicas"]),
        // batch/v1: status.successful is the count of succeeded pods
        ("batch", "jobs", "status.successful") => count(obj, &["status", "succeeded"]),
        ("certificates.k8s.io", "certificatesigningrequests", "spec.signerName") => {
            text(obj, &["spec", "signerName"])
        }
        // configmaps, endpoints, serviceaccounts, persistentvolumeclaims, leases, deployments,
        // statefulsets, daemonsets and everything else: metadata fields only; custom resources add
        // their CRD's selectableFields.
        _ => return crate::crd::field_value(group, resource, &obj.whole(), field),
    };
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_packed_selectable_view_reads_as_the_object_does() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
                   "spec": {"nodeName": "n1", "hostNetwork": true, "restartPolicy": "Always"},
                   "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}], "podIP": "10.0.0.7",
                              "replicas": 3.5, "succeeded": null}}),
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e", "namespace": "ns"},
                   "involvedObject": {"kind": "Pod", "name": "web-1", "uid": "u-1", "fieldPath": ""},
                   "reason": "Started", "type": "Normal", "source": {"component": "kubelet"}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r", "labels": {}},
                   "spec": {"unschedulable": false}, "status": {"replicas": 2}}),
            json!({"metadata": {"name": "üñí", "namespace": ""}, "spec": {"type": {"nested": 1}}}),
        ];
        for obj in &objects {
            let sel = Selectable::of(obj);
            for path in SELECTABLE_PATHS {
                let want = obj.at(path).filter(|v| *v != Scalar::Other);
                assert_eq!(sel.at(path), want, "{path:?} of {obj}");
            }
            assert_eq!(sel.labels(), obj.labels().filter(|l| !l.is_empty()), "{obj}");
        }
        // Field values read the same through either view.
        let pod = &objects[0];
        let sel = Selectable::of(pod);
        assert_eq!(
            sel.at(&["status", "podIPs", "0", "ip"]),
            Some(Scalar::Str("10.0.0.7"))
        );
        assert_eq!(sel.at(&["spec", "hostNetwork"]), Some(Scalar::Bool(true)));
        assert_eq!(
            sel.at(&["status", "replicas"]),
            None,
            "a fraction reads as absent"
        );
        assert_eq!(
            Selectable::of(&objects[2]).at(&["status", "replicas"]),
            Some(Scalar::Int(2))
        );
        // Paths that are not selectable are never answered.
        assert_eq!(sel.at(&["spec", "containers"]), None);
    }

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    fn selects(selector: &str, l: Value) -> bool {
        LabelSelector::parse(selector).unwrap().matches(Some(&labels(l)))
    }

    #[test]
    fn label_equality_forms_select_matching_labels() {
        for s in ["app=web", "app==web", "app = web", " app==web "] {
            assert!(selects(s, json!({"app": "web"})), "{s}");
            assert!(!selects(s, json!({"app": "db"})), "{s}");
            assert!(!selects(s, json!({})), "{s}");
        }
    }

    #[test]
    fn not_equals_and_notin_match_objects_without_the_label() {
        let ne = LabelSelector::parse("app!=web").unwrap();
        assert!(ne.matches(None));
        assert!(ne.matches(Some(&labels(json!({"app": "db"})))));
        assert!(!ne.matches(Some(&labels(json!({"app": "web"})))));

        let notin = LabelSelector::parse("env notin (prod, staging)").unwrap();
        assert!(notin.matches(None));
        assert!(notin.matches(Some(&labels(json!({"env": "dev"})))));
        assert!(!notin.matches(Some(&labels(json!({"env": "prod"})))));
    }

    #[test]
    fn in_requires_the_label_with_one_of_the_values() {
        let s = LabelSelector::parse("env in (prod,staging)").unwrap();
        assert!(s.matches(Some(&labels(json!({"env": "staging"})))));
        assert!(!s.matches(Some(&labels(json!({"env": "dev"})))));
        assert!(!s.matches(None));
    }

    #[test]
    fn exists_and_does_not_exist() {
        assert!(selects("app", json!({"app": ""})));
        assert!(!selects("app", json!({"other": "x"})));
        assert!(selects("!app", json!({"other": "x"})));
        assert!(!selects("!app", json!({"app": "x"})));
        assert!(LabelSelector::parse("!app").unwrap().matches(None));
    }

    #[test]
    fn comma_is_and() {
        let s = "app=web,tier!=db,!legacy,env in (a,b)";
        assert!(selects(s, json!({"app": "web", "tier": "fe", "env": "a"})));
        assert!(!selects(s, json!({"app": "web", "tier": "db", "env": "a"})));
        assert!(!selects(s, json!({"app": "web", "legacy": "1", "env": "a"})));
        assert!(!selects(s, json!({"app": "web"})));
    }

    #[test]
    fn prefixed_keys_are_accepted() {
        assert!(selects(
            "app.kubernetes.io/name=nginx",
            json!({"app.kubernetes.io/name": "nginx"})
        ));
    }

    #[test]
    fn greater_and_less_than_compare_integers() {
        assert!(selects("gen>2", json!({"gen": "3"})));
        assert!(!selects("gen>2", json!({"gen": "2"})));
        assert!(selects("gen<2", json!({"gen": "1"})));
        assert!(!selects("gen<2", json!({"gen": "x"})));
        assert!(!selects("gen<2", json!({})));
    }

    #[test]
    fn empty_values_are_allowed() {
        assert!(selects("app=", json!({"app": ""})));
        assert!(selects("app in ()", json!({"app": ""})));
        assert!(selects("app in (a,)", json!({"app": ""})));
        assert!(selects("app=,b", json!({"app": "", "b": "1"})));
    }

    #[test]
    fn in_and_notin_are_identifiers_where_a_key_or_value_is_expected() {
        assert!(selects("in in (in)", json!({"in": "in"})));
        assert!(selects("notin=notin", json!({"notin": "notin"})));
    }

    #[test]
    fn empty_selector_is_empty_and_matches_everything() {
        for s in ["", "   "] {
            let sel = LabelSelector::parse(s).unwrap();
            assert!(sel.is_empty());
            assert!(sel.matches(None));
        }
        assert!(!LabelSelector::parse("a").unwrap().is_empty());
    }

    #[test]
    fn non_string_label_values_never_equal() {
        assert!(!selects("a=1", json!({"a": 1})));
        assert!(selects("a", json!({"a": 1})));
    }

    #[test]
    fn syntax_errors_carry_upstream_wording() {
        let cases = [
            ("!", "unable to parse requirement: found '', expected: identifier"),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            ("a,", "found '', expected: identifier after ','"),
            ("a,=b", "found '=', expected: identifier after ','"),
            ("=b", "found '=', expected: !, identifier, or 'end of string'"),
            ("a in", "unable to parse requirement: found '' expected: '('"),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "a in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a=(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "a in (b c)",
                "unable to parse requirement: found 'c', expected: ',' or ')'",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(LabelSelector::parse(input).unwrap_err(), want, "{input}");
        }
    }

    #[test]
    fn invalid_keys_and_values_are_rejected() {
        let err = LabelSelector::parse("a@b=c").unwrap_err();
        assert!(
            err.starts_with(
                "unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist of"
            ),
            "{err}"
        );

        let err = LabelSelector::parse("/a").unwrap_err();
        assert!(err.contains("prefix part must be non-empty"), "{err}");

        let err = LabelSelector::parse("Example.com/a").unwrap_err();
        assert!(
            err.contains("prefix part a lowercase RFC 1123 subdomain"),
            "{err}"
        );

        let err = LabelSelector::parse("a/b/c").unwrap_err();
        assert!(err.contains("a qualified name must consist of"), "{err}");

        let err = LabelSelector::parse("app=-web").unwrap_err();
        assert!(
            err.starts_with(
                "unable to parse requirement: values[0][app]: Invalid value: \"-web\": a valid label must be"
            ),
            "{err}"
        );

        let long = "x".repeat(64);
        let err = LabelSelector::parse(&format!("app={long}")).unwrap_err();
        assert!(err.contains("must be no more than 63 characters"), "{err}");

        let err = LabelSelector::parse("gen>x").unwrap_err();
        assert_eq!(
            err,
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );

        let err = LabelSelector::parse("a in (-x,-y)").unwrap_err();
        assert!(
            err.starts_with("unable to parse requirement: [values[0][a]: Invalid value: \"-x\""),
            "{err}"
        );
    }

    #[test]
    fn label_selectors_compare_equal_regardless_of_order() {
        assert_eq!(
            LabelSelector::parse("b=1,a=2").unwrap(),
            LabelSelector::parse("a=2, b=1").unwrap()
        );
        assert_eq!(
            LabelSelector::parse("a in (y,x,x)").unwrap(),
            LabelSelector::parse("a in (x,y)").unwrap()
        );
    }

    fn pod(node: Option<&str>) -> Value {
        let mut p = json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"restartPolicy": "Always", "schedulerName": "default-scheduler"},
            "status": {"phase": "Pending"}
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    #[test]
    fn empty_node_name_matches_unscheduled_pods() {
        let s = FieldSelector::parse("spec.nodeName=").unwrap();
        assert!(s.matches("", "pods", &pod(None)));
        assert!(!s.matches("", "pods", &pod(Some("node1"))));
        let s = FieldSelector::parse("spec.nodeName=node1").unwrap();
        assert!(s.matches("", "pods", &pod(Some("node1"))));
        assert!(!s.matches("", "pods", &pod(None)));
    }

    #[test]
    fn field_operators_and_conjunction() {
        let p = pod(Some("n1"));
        assert!(
            FieldSelector::parse("status.phase==Pending")
                .unwrap()
                .matches("", "pods", &p)
        );
        assert!(
            FieldSelector::parse("status.phase!=Running")
                .unwrap()
                .matches("", "pods", &p)
        );
        assert!(
            !FieldSelector::parse("status.phase!=Pending")
                .unwrap()
                .matches("", "pods", &p)
        );
        let both = FieldSelector::parse("metadata.name=web,metadata.namespace=default").unwrap();
        assert!(both.matches("", "pods", &p));
        let one_off = FieldSelector::parse("metadata.name=web,metadata.namespace=kube-system").unwrap();
        assert!(!one_off.matches("", "pods", &p));
    }

    #[test]
    fn escaped_commas_equals_and_backslashes_are_data() {
        let s = FieldSelector::parse(r"metadata.name=a\,b\=c\\d,metadata.namespace=x").unwrap();
        assert_eq!(s.exact_name(), Some(r"a,b=c\d"));
        assert!(s.matches(
            "",
            "configmaps",
            &json!({"metadata": {"name": r"a,b=c\d", "namespace": "x"}})
        ));
    }

    #[test]
    fn field_syntax_errors_carry_upstream_wording() {
        assert_eq!(
            FieldSelector::parse("metadata.name").unwrap_err(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            FieldSelector::parse(r"metadata.name=a\b").unwrap_err(),
            r"invalid field selector: invalid escape sequence: \b"
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=a\\").unwrap_err(),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            FieldSelector::parse("metadata.name=a=b").unwrap_err(),
            "invalid field selector: unescaped character in value: 61"
        );
    }

    #[test]
    fn double_equals_is_not_left_in_the_value() {
        let s = FieldSelector::parse("metadata.name==web").unwrap();
        assert_eq!(s.exact_name(), Some("web"));
    }

    #[test]
    fn empty_field_selector_is_empty() {
        for s in ["", ",", ",,"] {
            let sel = FieldSelector::parse(s).unwrap();
            assert!(sel.is_empty(), "{s:?}");
            assert!(sel.matches("", "pods", &pod(None)));
        }
    }

    #[test]
    fn unsupported_field_is_rejected_per_resource() {
        let s = FieldSelector::parse("spec.nodeName=n1").unwrap();
        assert_eq!(s.check_supported("", "pods"), Ok(()));
        assert_eq!(
            s.check_supported("", "configmaps"),
            Err("field label not supported: spec.nodeName".into())
        );
        let s = FieldSelector::parse("metadata.namespace=x").unwrap();
        assert_eq!(s.check_supported("", "configmaps"), Ok(()));
        assert_eq!(
            s.check_supported("", "nodes"),
            Err("field label not supported: metadata.namespace".into())
        );
        assert_eq!(
            s.check_supported("", "namespaces").unwrap_err(),
            "field label not supported: metadata.namespace"
        );
        let s = FieldSelector::parse("metadata.name=a,bogus=1").unwrap();
        assert_eq!(
            s.check_supported("apps", "deployments"),
            Err("field label not supported: bogus".into())
        );
    }

    #[test]
    fn exact_name_ignores_negated_terms() {
        assert_eq!(
            FieldSelector::parse("metadata.name!=a").unwrap().exact_name(),
            None
        );
        assert_eq!(
            FieldSelector::parse("spec.nodeName=a").unwrap().exact_name(),
            None
        );
        assert_eq!(
            FieldSelector::parse("spec.nodeName=a,metadata.name=b")
                .unwrap()
                .exact_name(),
            Some("b")
        );
    }

    #[test]
    fn pod_fields_follow_upstream_selectable_fields() {
        let p = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "serviceAccountName": "sa", "hostNetwork": true},
            "status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}], "nominatedNodeName": "n2"}
        });
        let v = |f: &str| field_value("", "pods", &p, f);
        assert_eq!(v("spec.host").as_deref(), Some("n1"));
        assert_eq!(v("spec.hostNetwork").as_deref(), Some("true"));
        assert_eq!(v("spec.restartPolicy").as_deref(), Some(""));
        assert_eq!(v("spec.serviceAccountName").as_deref(), Some("sa"));
        assert_eq!(v("status.podIP").as_deref(), Some("10.0.0.2"));
        assert_eq!(v("status.nominatedNodeName").as_deref(), Some("n2"));
        assert_eq!(v("status.hostIP"), None);
        let bare = json!({"metadata": {"name": "p"}, "status": {"podIP": "10.0.0.9"}});
        assert_eq!(
            field_value("", "pods", &bare, "status.podIP").as_deref(),
            Some("10.0.0.9")
        );
        assert_eq!(
            field_value("", "pods", &bare, "spec.hostNetwork").as_deref(),
            Some("false")
        );
    }

    #[test]
    fn event_fields_cover_kubectl_describe() {
        let e = json!({
            "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "u1"},
            "reason": "Pulled", "type": "Normal", "reportingComponent": "kubelet"
        });
        let s = FieldSelector::parse(
            "involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid=u1",
        )
        .unwrap();
        assert_eq!(s.check_supported("", "events"), Ok(()));
        assert!(s.matches("", "events", &e));
        assert_eq!(
            field_value("", "events", &e, "source").as_deref(),
            Some("kubelet")
        );
        let with_source = json!({"source": {"component": "scheduler"}, "reportingComponent": "kubelet"});
        assert_eq!(
            field_value("", "events", &with_source, "source").as_deref(),
            Some("scheduler")
        );
        assert_eq!(field_value("", "events", &e, "regarding.name"), None);
    }

    #[test]
    fn events_k8s_io_fields_use_their_own_names() {
        let e = json!({"regarding": {"name": "web"}, "reportingController": "kubelet", "type": "Warning"});
        assert_eq!(
            field_value("events.k8s.io", "events", &e, "regarding.name").as_deref(),
            Some("web")
        );
        assert_eq!(
            field_value("events.k8s.io", "events", &e, "source").as_deref(),
            Some("kubelet")
        );
        assert_eq!(
            field_value("events.k8s.io", "events", &e, "involvedObject.name"),
            None
        );
    }

    #[test]
    fn other_kinds_select_their_upstream_fields() {
        let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}});
        assert_eq!(
            field_value("", "nodes", &node, "spec.unschedulable").as_deref(),
            Some("true")
        );
        assert_eq!(
            field_value("", "nodes", &json!({}), "spec.unschedulable").as_deref(),
            Some("false")
        );
        let ns = json!({"status": {"phase": "Terminating"}});
        assert_eq!(
            field_value("", "namespaces", &ns, "status.phase").as_deref(),
            Some("Terminating")
        );
        let secret = json!({"type": "kubernetes.io/tls"});
        assert_eq!(
            field_value("", "secrets", &secret, "type").as_deref(),
            Some("kubernetes.io/tls")
        );
        let svc = json!({"spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1"}});
        assert_eq!(
            field_value("", "services", &svc, "spec.clusterIP").as_deref(),
            Some("10.96.0.1")
        );
        assert_eq!(
            field_value("apps", "replicasets", &json!({}), "status.replicas").as_deref(),
            Some("0")
        );
        let job = json!({"status": {"succeeded": 2}});
        assert_eq!(
            field_value("batch", "jobs", &job, "status.successful").as_deref(),
            Some("2")
        );
        for (group, resource) in [
            ("", "configmaps"),
            ("", "endpoints"),
            ("", "serviceaccounts"),
            ("", "persistentvolumeclaims"),
            ("coordination.k8s.io", "leases"),
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("apps", "daemonsets"),
        ] {
            assert_eq!(
                field_value(group, resource, &json!({}), "status.replicas"),
                None,
                "{resource}"
            );
            assert_eq!(
                field_value(group, resource, &json!({}), "metadata.name").as_deref(),
                Some("")
            );
        }
    }

    // --- properties: no input makes parsing or matching panic (the fault suite) -------------------------

    mod properties {
        use proptest::collection::{btree_map, vec};
        use proptest::prelude::*;
        use proptest::sample::select;

        use super::*;

        /// Tokens of both grammars and their neighbours.
        const PIECES: &[&str] = &[
            "app",
            "web",
            "a.io/b",
            "x",
            "=",
            "==",
            "!=",
            "in",
            "notin",
            "(",
            ")",
            ",",
            "!",
            ">",
            "<",
            "1",
            "-2",
            "9223372036854775808",
            " ",
            "\t",
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
            "status.podIP",
            "spec.hostNetwork",
            "involvedObject.kind",
            "\\",
            "\\,",
            "\\=",
            "é",
            "日本",
            "\u{0}",
            "-",
            "_",
            ".",
            "/",
            "a/b/c",
        ];

        fn near_valid() -> impl Strategy<Value = String> {
            vec(select(PIECES), 0..12).prop_map(|p| p.concat())
        }

        fn input() -> impl Strategy<Value = String> {
            prop_oneof![near_valid(), any::<String>()]
        }

        /// Objects with labels and fields of any JSON type where selectors look.
        fn object() -> impl Strategy<Value = Value> {
            let scalar = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| serde_json::json!(n)),
                any::<f64>().prop_map(|f| serde_json::json!(f)),
                near_valid().prop_map(Value::String),
            ];
            (
                btree_map(near_valid(), scalar.clone(), 0..4),
                scalar.clone(),
                scalar.clone(),
                scalar,
            )
                .prop_map(|(labels, name, node, phase)| {
                    serde_json::json!({"metadata": {"name": name, "labels": labels},
                        "spec": {"nodeName": node, "hostNetwork": phase.clone()},
                        "status": {"phase": phase, "podIPs": [{"ip": node}]}})
                })
        }

        const RESOURCES: &[(&str, &str)] = &[
            ("", "pods"),
            ("", "nodes"),
            ("", "events"),
            ("", "configmaps"),
            ("events.k8s.io", "events"),
            ("batch", "jobs"),
            ("apps", "replicasets"),
        ];

        proptest! {
            #[test]
            fn label_selectors_parse_or_fail_and_match_without_panicking(s in input(), obj in object()) {
                if let Ok(sel) = LabelSelector::parse(&s) {
                    let _ = sel.matches(obj.labels());
                    let _ = sel.matches(Selectable::of(&obj).labels());
                    // Parsing is deterministic.
                    prop_assert_eq!(LabelSelector::parse(&s), Ok(sel));
                }
            }

            #[test]
            fn field_selectors_parse_or_fail_and_match_without_panicking(
                s in input(),
                obj in object(),
                (group, resource) in select(RESOURCES),
            ) {
                if let Ok(sel) = FieldSelector::parse(&s) {
                    let _ = sel.exact_name();
                    if sel.check_supported(group, resource).is_ok() {
                        // The stored view and the object agree.
                        prop_assert_eq!(
                            sel.matches(group, resource, &obj),
                            sel.matches(group, resource, &crate::storage::Stored::new(1, obj.clone()))
                        );
                    }
                }
            }
        }
    }
}
