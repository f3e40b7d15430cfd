#!/usr/bin/env python3
"""Generate apiserver/src/protobuf/schema.rs: the protobuf field table used to decode
Kubernetes protobuf request bodies (Content-Type: application/vnd.kubernetes.protobuf).

Inputs (both from the local cargo registry, no network, stdlib only):
  * k8s-pb 0.9.0      -- prost code generated from upstream generated.proto files:
                         message names, tag numbers, wire kinds, nested message types.
  * k8s-openapi 0.29.0 -- serde code for the same types: the exact JSON field names
                         ("podIP" => Field::Key_pod_ip), which prost snake_cased away.

Usage:
  python3 tools/gen_protobuf_schema.py [--k8s-pb DIR] [--k8s-openapi DIR] [--out FILE]

Defaults look the crates up in ~/.cargo/registry/src/*/.  If k8s-pb isn't there, fetch it
with `cargo fetch` in any scratch crate that depends on `k8s-pb = "=0.9.0"`.
"""

import argparse
import glob
import os
import re
import sys

# Root objects a client may send, beyond every GA `impl crate::Resource` in k8s-pb:
# (apiVersion, kind, k8s-pb module, message).
EXTRA_ROOTS = [
    ("v1", "Binding", "api/core/v1", "Binding"),
    ("policy/v1", "Eviction", "api/policy/v1", "Eviction"),
    ("authentication.k8s.io/v1", "TokenRequest", "api/authentication/v1", "TokenRequest"),
    ("autoscaling/v1", "Scale", "api/autoscaling/v1", "Scale"),
    # DeleteOptions is sent with the apiVersion of the resource's group; "*" matches any.
    ("*", "DeleteOptions", "apimachinery/pkg/apis/meta/v1", "DeleteOptions"),
]

# Module prefixes whose resources are not included as roots (recursive JSON-schema types,
# aggregator types); their messages are still included if reachable from another root.
SKIP_ROOT_MODULES = ("apiextensions_apiserver/", "kube_aggregator/", "metrics/", "apimachinery/pkg/apis/testapigroup")

# Messages with a custom JSON form: (module, message) -> kind name in the Rust table.
SPECIAL = {
    ("apimachinery/pkg/apis/meta/v1", "Time"): "Time",
    ("apimachinery/pkg/apis/meta/v1", "MicroTime"): "MicroTime",
    ("apimachinery/pkg/apis/meta/v1", "Duration"): "Duration",
    ("apimachinery/pkg/apis/meta/v1", "FieldsV1"): "FieldsV1",
    ("apimachinery/pkg/api/resource", "Quantity"): "Quantity",
    ("apimachinery/pkg/util/intstr", "IntOrString"): "IntOrString",
    ("apimachinery/pkg/runtime", "RawExtension"): "RawExtension",
}
# Go named string-slice types (e.g. `type ExtraValue []string`) become a message with a
# single `repeated string items = 1`; their JSON form is the bare array.
STRING_LIST_NAMES = ("ExtraValue", "Verbs")

SCALARS = {
    "string": "Str",
    "int32": "I32",
    "int64": "I64",
    "bool": "Bool",
    "bytes": "Bytes",
    "double": "F64",
}

ATTR_RE = re.compile(r"#\[prost\((.*)\)\]")
STRUCT_RE = re.compile(r"^pub struct (\w+) \{")
FIELD_RE = re.compile(r"^\s*pub (r#)?(\w+):")
RES_IMPL_RE = re.compile(r"^impl crate::Resource for (\w+) \{")
CONST_RE = re.compile(r'const (API_VERSION|KIND): &\'static str = "([^"]*)";')


def find_crate(name):
    pats = glob.glob(os.path.expanduser(f"~/.cargo/registry/src/*/{name}/src"))
    if not pats:
        sys.exit(f"cannot find {name} in ~/.cargo/registry/src; run `cargo fetch` in a crate using it")
    return sorted(pats)[-1]


def snake(name):
    """heck-style snake_case, as prost uses (HostIp -> host_ip, CsiDriver -> csi_driver)."""
    out = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    out = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", out)
    return out.lower()


def camel(snake_name):
    parts = snake_name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def parse_pb(root):
    """-> messages {(module, name): [field dict]}, resources [(apiVersion, kind, module, name)]"""
    messages = {}
    resources = []
    for path in sorted(glob.glob(os.path.join(root, "**", "mod.rs"), recursive=True)):
        module = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "/")
        lines = open(path, encoding="utf-8").read().split("\n")
        cur = None
        attr = None
        pending = None  # field declaration split across lines
        res = None
        for line in lines:
            m = STRUCT_RE.match(line)
            if m:
                cur = (module, m.group(1))
                messages[cur] = []
                if line.rstrip().endswith("{}"):
                    cur = None
                continue
            if line == "}":
                cur = None
                continue
            m = RES_IMPL_RE.match(line)
            if m:
                res = {"name": m.group(1)}
                continue
            if res is not None:
                m = CONST_RE.search(line)
                if m:
                    res[m.group(1)] = m.group(2)
                if "API_VERSION" in res and "KIND" in res:
                    resources.append((res["API_VERSION"], res["KIND"], module, res["name"]))
                    res = None
                continue
            if cur is None:
                continue
            m = ATTR_RE.search(line)
            if m:
                attr = m.group(1)
                continue
            if attr is not None and pending is None:
                m = FIELD_RE.match(line)
                if not m:
                    continue
                pending = [m.group(2), line.split(":", 1)[1].strip()]
            elif attr is not None and pending is not None:
                pending[1] += line.strip()
            else:
                continue
            text = pending[1]
            if text.count("<") != text.count(">") or not text.endswith(","):
                continue  # the type continues on the next line
            pending[1] = re.sub(r",\s*>", ">", text[:-1])
            messages[cur].append(parse_field(module, attr, pending[0], pending[1]))
            attr = None
            pending = None
    return messages, resources


def resolve_type(module, ty):
    """Rust type path of a nested message -> (module, name)."""
    ty = ty.replace("::prost::alloc::boxed::Box<", "")
    m = re.search(r"((?:super::)*(?:\w+::)*)(\w+)>*$", ty)
    if not m:
        raise ValueError(f"cannot resolve {ty} in {module}")
    path, name = m.group(1), m.group(2)
    if path.startswith("crate::"):
        return path[len("crate::") :].rstrip(":").replace("::", "/"), name
    segs = module.split("/")
    rest = []
    for seg in [s for s in path.split("::") if s]:
        if seg == "super":
            segs = segs[:-1]
        else:
            rest.append(seg)
    return "/".join(segs + rest), name


def parse_field(module, attr, rust_name, ty):
    tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
    f = {"tag": tag, "rust": rust_name, "card": "One", "kind": None, "msg": None}
    m = re.match(r'(?:btree_map|map) = "string, (\w+)"', attr)
    if m:
        f["card"] = "Map"
        vk = m.group(1)
        if vk == "message":
            # BTreeMap<String, Type>
            inner = re.search(r"BTreeMap<::prost::alloc::string::String,\s*(.*)>$", ty).group(1)
            f["kind"] = "Msg"
            f["msg"] = resolve_type(module, inner)
        else:
            f["kind"] = SCALARS[vk]
        return f
    first = attr.split(",")[0].strip()
    first = first.split("=")[0].strip()  # bytes = "vec"
    if " repeated" in attr or attr.startswith("repeated"):
        f["card"] = "Rep"
    if first == "message":
        f["kind"] = "Msg"
        inner = re.sub(r"^::core::option::Option<|^::prost::alloc::vec::Vec<", "", ty)
        f["msg"] = resolve_type(module, inner)
    elif first in SCALARS:
        f["kind"] = SCALARS[first]
    else:
        raise ValueError(f"unsupported prost attribute {attr} in {module}")
    return f


def parse_openapi(roots):
    """Scan k8s-openapi's serde code, newest API version directory first.

    -> per_type {(module, snake(struct)): {key: json}}, global {key: {json}} where key is the
    JSON name lower-cased: the proto field names are the JSON names, and prost's snake_case
    lower-cased without underscores gives the same key (nonResourceURLs <-> non_resource_ur_ls).
    """
    per_type = {}
    glob_names = {}
    key_re = re.compile(r'^\s*"([^"]+)" => Field::Key_\w+,')
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "**", "*.rs"), recursive=True)):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            module, fname = rel.rsplit("/", 1) if "/" in rel else ("", rel)
            names = per_type.setdefault((module, fname[: -len(".rs")]), {})
            for line in open(path, encoding="utf-8"):
                m = key_re.match(line)
                if m:
                    names.setdefault(m.group(1).lower(), m.group(1))
                    glob_names.setdefault(m.group(1).lower(), set()).add(m.group(1))
    return per_type, glob_names


def pb_key(rust_name):
    return rust_name.replace("_", "").lower()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k8s-pb", default=None)
    ap.add_argument("--k8s-openapi", default=None)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "apiserver", "src", "protobuf", "schema.rs"))
    args = ap.parse_args()
    pb_root = args.k8s_pb or find_crate("k8s-pb-0.9.0")
    oa_crate = args.k8s_openapi or find_crate("k8s-openapi-0.29.0")
    # Newest Kubernetes version first: k8s-pb 0.9.0 has fields newer than v1_33.
    oa_roots = sorted(glob.glob(os.path.join(oa_crate, "v1_*")), key=lambda p: int(p.rsplit("_", 1)[1]))[::-1]

    messages, resources = parse_pb(pb_root)
    per_type, glob_names = parse_openapi(oa_roots)

    roots = []
    for api_version, kind, module, name in resources:
        version = api_version.rsplit("/", 1)[-1]
        if "alpha" in version or "beta" in version or module.startswith(SKIP_ROOT_MODULES):
            continue
        roots.append((api_version, kind, module, name))
    roots += EXTRA_ROOTS
    roots.sort()

    # Collect reachable messages (breadth first, deterministic order).
    order = []
    index = {}

    def visit(key):
        if key in index:
            return
        if key not in messages:
            sys.exit(f"unknown message {key}")
        index[key] = len(order)
        order.append(key)

    for _, _, module, name in roots:
        visit((module, name))
    i = 0
    while i < len(order):
        key = order[i]
        i += 1
        if key in SPECIAL or is_string_list(key, messages):
            continue
        for f in messages[key]:
            if f["msg"] is not None:
                visit(f["msg"])

    warnings = []
    rows = []  # one per message: (name, special, first field, field count)
    field_rows = []
    for key in order:
        module, name = key
        special = SPECIAL.get(key)
        if special is None and is_string_list(key, messages):
            special = "StringList"
        start = len(field_rows)
        if special is None:
            names = per_type.get((module, snake(name)), {})
            for f in sorted(messages[key], key=lambda f: f["tag"]):
                key = pb_key(f["rust"])
                json = names.get(key)
                embedded = f["kind"] == "Msg" and f["card"] == "One" and snake(f["msg"][1]) == f["rust"]
                if json is None and names and embedded:
                    # A Go embedded struct (`json:",inline"`): proto names the field after the
                    # type; JSON flattens its fields into the parent. Empty name = inline.
                    json = ""
                if json is None:
                    cands = glob_names.get(key, set())
                    if len(cands) == 1:
                        json = next(iter(cands))
                    else:
                        json = camel(f["rust"])
                        warnings.append(f"{module}.{name}.{f['rust']}: guessed json name {json} {sorted(cands)}")
                if f["kind"] == "Msg":
                    target = index[f["msg"]]
                    kind = f"Msg({target})"
                else:
                    kind = f["kind"]
                field_rows.append((f["tag"], json, f["card"], kind))
        rows.append((f"{module_short(module)}.{name}", special or "Message", start, len(field_rows) - start))

    out = []
    out.append("// @generated by tools/gen_protobuf_schema.py from k8s-pb 0.9.0 (message layout, tag numbers,")
    out.append("// wire kinds) and k8s-openapi 0.29.0 (JSON field names, newest v1_* first). Do not edit by hand;")
    out.append("// regenerate from the repository root with `python3 tools/gen_protobuf_schema.py`.")
    out.append("// Not rustfmt-formatted (`#[rustfmt::skip]` on the module): one row a line.")
    out.append("")
    out.append("use super::{Card::*, Field, Kind::*, Message, Shape};")
    out.append("")
    out.append("/// (apiVersion, kind, message index); apiVersion \"*\" matches any group version.")
    out.append("pub(super) static ROOTS: &[(&str, &str, u16)] = &[")
    for api_version, kind, module, name in roots:
        out.append(f'    ("{api_version}", "{kind}", {index[(module, name)]}),')
    out.append("];")
    out.append("")
    out.append("/// Messages: name, JSON shape, first field in FIELDS, field count.")
    out.append("pub(super) static MESSAGES: &[Message] = &[")
    for name, shape, start, count in rows:
        out.append(f'    Message("{name}", Shape::{shape}, {start}, {count}),')
    out.append("];")
    out.append("")
    out.append("/// Fields, sorted by tag within each message: tag, JSON name, cardinality, kind.")
    out.append("pub(super) static FIELDS: &[Field] = &[")
    for tag, json, card, kind in field_rows:
        out.append(f'    Field({tag}, "{json}", {card}, {kind}),')
    out.append("];")
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out) + "\n")
    for w in warnings:
        print("warning:", w, file=sys.stderr)
    print(f"{len(roots)} roots, {len(rows)} messages, {len(field_rows)} fields -> {args.out}", file=sys.stderr)


def module_short(module):
    return module.replace("apimachinery/pkg/apis/", "").replace("apimachinery/pkg/", "").replace("api/", "", 1).replace("/", ".")


def is_string_list(key, messages):
    fields = messages.get(key, [])
    return (
        key[1] in STRING_LIST_NAMES
        and len(fields) == 1
        and fields[0]["tag"] == 1
        and fields[0]["card"] == "Rep"
        and fields[0]["kind"] == "Str"
    )


if __name__ == "__main__":
    main()
