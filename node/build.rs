//! Builds kubeling's pause binary (`pause/pause.c`) as a static executable in `OUT_DIR`, so the node agent
//! can embed it with `include_bytes!` and make its own sandbox image with no registry. The binary runs in a
//! `FROM scratch` image, so it must have no dynamic loader: a compiler that cannot link statically fails the
//! build here, with a message, rather than producing an image whose every pod dies with "no such file".
//!
//! Its SHA-256 goes to the crate as `KUBELING_PAUSE_SHA256`; the image is labelled with it so a stale image
//! from an older kubeling is noticed and rebuilt. (No sha2 in build-dependencies, hence the small one below.)

use std::env;
use std::path::PathBuf;

const SOURCE: &str = "pause/pause.c";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("pause");
    // cc picks the C compiler for the target (CC, CC_<target>, cross toolchains); it builds libraries, not
    // executables, so we only borrow its compiler and link the program ourselves.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .warnings(true)
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(["-static", "-Os", "-s", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(SOURCE);
    let output = cmd.output().unwrap_or_else(|err| {
        fail(&format!("cannot run the C compiler {:?}: {err}", compiler.path()));
    });
    if !output.status.success() {
        fail(&format!(
            "`{cmd:?}` failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let binary =
        std::fs::read(&out).unwrap_or_else(|err| fail(&format!("cannot read {}: {err}", out.display())));
    if has_interpreter(&binary) {
        fail(
            "the compiler produced a dynamically linked pause binary; it must be static to run FROM scratch",
        );
    }
    println!("cargo:rustc-env=KUBELING_PAUSE_SHA256={}", hex(&sha256(&binary)));
}

fn fail(reason: &str) -> ! {
    panic!(
        "\n\nkubeling-node: cannot build the static pause binary from {SOURCE}.\n{reason}\n\n\
         The pause image is built locally from this binary, so a static C toolchain is required: gcc and \
         glibc's static libc.a (Debian/Ubuntu: `apt-get install gcc libc6-dev`; Fedora: `glibc-static`), \
         or musl-gcc via CC=musl-gcc.\n"
    )
}

/// True when the ELF file asks for a dynamic loader (a `PT_INTERP` program header).
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" {
        fail("the compiler output is not an ELF file");
    }
    let little = elf[5] == 1;
    let is_64 = elf[4] == 2;
    let u16_at = |at: usize| {
        let b = [elf[at], elf[at + 1]];
        if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let u32_at = |at: usize| {
        let b = [elf[at], elf[at + 1], elf[at + 2], elf[at + 3]];
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&elf[at..at + 8]);
        if little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    };
    let (phoff, phentsize, phnum) = if is_64 {
        (
            u64_at(0x20) as usize,
            u16_at(0x36) as usize,
            u16_at(0x38) as usize,
        )
    } else {
        (
            u32_at(0x1c) as usize,
            u16_at(0x2a) as usize,
            u16_at(0x2c) as usize,
        )
    };
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        at + 4 <= elf.len() && u32_at(at) == PT_INTERP
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (FIPS 180-4). Checked against the standard "abc" vector on every build.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (slot, v) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *slot = slot.wrapping_add(v);
        }
    }
    let mut out = [0u8; 32];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    if data == b"abc" {
        return out;
    }
    assert_eq!(
        hex(&sha256(b"abc")),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "build.rs sha256 is broken"
    );
    out
}
