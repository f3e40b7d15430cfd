//! The container hash, stored on every container (Docker label
//! `annotation.io.kubernetes.container.hash`) and compared with the spec on every sync: a running
//! container whose hash differs from [`hash_container`] of its spec is killed and restarted with the
//! message `Container <name> definition changed, will be restarted`.
//!
//! What is hashed, exactly as upstream v1.31+ (`pkg/kubelet/container/helpers.go`, `HashContainer` and
//! `pickFieldsToHash`, PR #124220): only the container's `name` and `image`. Every other container
//! field is immutable in the API (the API server rejects the update), so only an image change can make a
//! running container differ from its spec. The bytes are Go's `json.Marshal` of the map
//! `{"image": <image>, "name": <name>}` (keys sorted, Go's string escaping), fed through
//! `hashutil.DeepHashObject`, which writes spew's `%#v` rendering of that `[]byte`
//! (`([]uint8)[123 34 ...]`) into FNV-32a. The result is printed as lower-case hex without padding
//! (`strconv.FormatUint(hash, 16)`). Reproducing the bytes exactly means kubeling computes the same hash
//! as a real kubelet for the same container (pinned by upstream's `container_hash_test.go` value
//! `0x8e45cbd0`), so containers survive a switch between the two. No Rust `Hasher` is involved: those are
//! randomly seeded or unstable across releases.

use k8s_openapi::api::core::v1::Container;

/// FNV-32a offset basis and prime (Go `hash/fnv`, `New32a`).
const FNV32_OFFSET: u32 = 0x811c_9dc5;
const FNV32_PRIME: u32 = 0x0100_0193;

/// The container hash as a hex string, the form stored in the container label.
pub fn hash_container(container: &Container) -> String {
    format!("{:x}", hash_container_u32(container))
}

/// The container hash as a number (upstream returns it as a `uint64` holding a 32-bit value).
pub fn hash_container_u32(container: &Container) -> u32 {
    let image = container.image.as_deref().unwrap_or("");
    let json = format!(
        "{{\"image\":{},\"name\":{}}}",
        go_json_string(image),
        go_json_string(&container.name)
    );
    let mut hash = Fnv32a::new();
    hash.write(b"([]uint8)[");
    for (i, byte) in json.bytes().enumerate() {
        if i > 0 {
            hash.write(b" ");
        }
        hash.write(byte.to_string().as_bytes());
    }
    hash.write(b"]");
    hash.0
}

struct Fnv32a(u32);

impl Fnv32a {
    fn new() -> Self {
        Fnv32a(FNV32_OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u32::from(b);
            self.0 = self.0.wrapping_mul(FNV32_PRIME);
        }
    }
}

/// A JSON string literal as Go's `encoding/json` writes it (Go 1.22+): HTML-safe escapes for `<`, `>`
/// and `&`, short escapes for `\b \f \n \r \t`, `\u00xx` for other control characters and
/// `\u2028`/`\u2029` escaped.
fn go_json_string(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                let b = ch as u32 as u8;
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            _ => out.push(ch),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, image: &str) -> Container {
        Container {
            name: name.into(),
            image: Some(image.into()),
            ..Default::default()
        }
    }

    #[test]
    fn hash_matches_upstream_v1_31_test_vector() {
        // pkg/kubelet/container/container_hash_test.go: sampleV131HashValue = 0x8e45cbd0
        let mut c = container("test_container", "foo/image:v1");
        c.command = Some(vec!["/bin/testcmd".into()]);
        c.args = Some(vec!["/bin/sh".into(), "-c".into(), "echo abc".into()]);
        assert_eq!(hash_container_u32(&c), 0x8e45_cbd0);
        assert_eq!(hash_container(&c), "8e45cbd0");
    }

    #[test]
    fn hash_changes_with_image_or_name_and_nothing_else() {
        let base = container("web", "nginx:1.27");
        let mut other_fields = base.clone();
        other_fields.command = Some(vec!["sleep".into(), "1".into()]);
        other_fields.working_dir = Some("/tmp".into());
        let cases = [
            ("same spec", base.clone(), true),
            ("other fields changed", other_fields, true),
            ("image changed", container("web", "nginx:1.28"), false),
            ("name changed", container("web2", "nginx:1.27"), false),
        ];
        for (what, c, same) in cases {
            assert_eq!(hash_container(&c) == hash_container(&base), same, "{what}");
        }
    }

    #[test]
    fn json_strings_are_escaped_like_go() {
        let cases = [
            ("plain", "\"plain\""),
            ("a<b>&c", "\"a\\u003cb\\u003e\\u0026c\""),
            ("q\"\\", "\"q\\\"\\\\\""),
            ("\n\t\u{1}\u{8}", "\"\\n\\t\\u0001\\b\""),
            ("\u{2028}é", "\"\\u2028é\""),
        ];
        for (input, want) in cases {
            assert_eq!(go_json_string(input), want, "{input:?}");
        }
    }
}
