//! Hashes and name suffixes (`controller.ComputeHash`, `history.HashControllerRevision`,
//! `rand.SafeEncodeString`). Upstream hashes a Go struct dump that Rust cannot reproduce byte for byte, so
//! the input here is the object's JSON (serde_json writes maps in key order, so it is stable); the hash
//! function, the collision-count suffix and the alphabet are upstream's, so names have the same form
//! (`web-66b6c48dd5`) and are deterministic.

use serde::Serialize;

/// `rand.SafeEncodeString`'s alphabet: no vowels, no 0/1/3, so no words and no look-alikes.
pub const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn fnv32a(data: &[u8], mut h: u32) -> u32 {
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn fnv32(data: &[u8], mut h: u32) -> u32 {
    for b in data {
        h = h.wrapping_mul(0x0100_0193);
        h ^= u32::from(*b);
    }
    h
}

const FNV_OFFSET: u32 = 0x811c_9dc5;

/// Each character of `s` replaced by `ALPHABET[byte % 27]`.
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// `controller.ComputeHash(template, collisionCount)`: FNV-32a of the template, then the collision count
/// as 4 little-endian bytes, printed in decimal and safe-encoded (digits map to `4-9,b,c,d,f`).
pub fn compute_hash<T: Serialize>(template: &T, collision_count: Option<i32>) -> String {
    let data = serde_json::to_vec(template).unwrap_or_default();
    let mut h = fnv32a(&data, FNV_OFFSET);
    if let Some(c) = collision_count {
        h = fnv32a(&(c as u32).to_le_bytes(), h);
    }
    safe_encode(&h.to_string())
}

/// `history.HashControllerRevision`: FNV-32 (not 32a) of the revision's data, then the collision count in
/// decimal, safe-encoded.
pub fn revision_hash(data: &[u8], collision_count: Option<i32>) -> String {
    let mut h = fnv32(data, FNV_OFFSET);
    if let Some(c) = collision_count {
        h = fnv32(c.to_string().as_bytes(), h);
    }
    safe_encode(&h.to_string())
}

/// 5 random characters from the alphabet (`names.SimpleNameGenerator`).
pub fn random_suffix() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv_matches_the_reference_vectors() {
        // FNV-1a and FNV-1 32-bit of "a" (from the FNV reference test suite).
        assert_eq!(fnv32a(b"a", FNV_OFFSET), 0xe40c_292c);
        assert_eq!(fnv32(b"a", FNV_OFFSET), 0x050c_5d7e);
        assert_eq!(fnv32a(b"", FNV_OFFSET), FNV_OFFSET);
    }

    #[test]
    fn hashes_use_only_the_encoded_digits_and_change_with_the_collision_count() {
        let t = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c"}]}});
        let h = compute_hash(&t, None);
        assert!(!h.is_empty() && h.len() <= 10);
        assert!(h.chars().all(|c| "456789bcdf".contains(c)), "{h}");
        assert_eq!(h, compute_hash(&t, None), "deterministic");
        assert_ne!(h, compute_hash(&t, Some(1)));
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
        let r = revision_hash(b"{}", None);
        assert!(r.chars().all(|c| "456789bcdf".contains(c)));
        assert_ne!(r, revision_hash(b"{}", Some(1)));
    }

    #[test]
    fn random_suffixes_are_five_alphabet_characters() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.bytes().all(|b| ALPHABET.contains(&b)));
    }
}
