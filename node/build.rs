//! Builds kubeling's pause binary (`pause/pause.c`), service gateway (`pause/gateway.c`) and port-forward
//! helper (`pause/forward.c`, exec'd inside sandboxes by `src/portforward/helper.rs`) as static
//! executables in `OUT_DIR`, so the node agent can embed them with `include_bytes!` and make its own sandbox
//! and gateway images with no registry. The binary runs in a
//! `FROM scratch` image, so it must have no dynamic loader: a compiler that cannot link statically fails the
//! build here, with a message, rather than producing an image whose every pod dies with "no such file".
//!
//! Their SHA-256 go to the crate as `KUBELING_PAUSE_SHA256` and `KUBELING_GATEWAY_SHA256`; the image is labelled with it so a stale image
//! from an older kubeling is noticed and rebuilt. (No sha2 in build-dependencies, hence the small one below.)

use std::env;
use std::path::PathBuf;

const SOURCE: &str = "pause/pause.c";
const FORWARD_SOURCE: &str = "pause/forward.c";

fn main() {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed=pause/gateway.c");
    println!("cargo:rerun-if-changed=pause/route.h");
    println!("cargo:rerun-if-changed={FORWARD_SOURCE}");
    println!("cargo:rerun-if-changed=build.rs");
    let pause = build_static("pause", SOURCE);
    println!("cargo:rustc-env=KUBELING_PAUSE_SHA256={pause}");
    let gateway = build_static("gateway", "pause/gateway.c");
    println!("cargo:rustc-env=KUBELING_GATEWAY_SHA256={gateway}");
    build_static("forward", FORWARD_SOURCE);
}

/// Compiles `source` into `OUT_DIR/name` as a static executable; returns its SHA-256, hex.
fn build_static(name: &str, source: &str) -> String {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join(name);
    // cc picks the C compiler for the target (CC, CC_<target>, cross toolchains); it builds libraries, not
    // executables, so we only borrow its compiler and link the program ourselves.
    // The same flags in every cargo profile: the binary (and so the image) must not differ between a debug
    // and a release build, or each would rebuild the image the other made.
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .warnings(true)
        .debug(false)
        .opt_level_str("s")
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(["-static", "-Os", "-s", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(source);
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
        fail(&format!(
            "the compiler produced a dynamically linked binary from {source}; it must be static to run FROM scratch"
        ));
    }
    hex(&sha256(&binary))
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

/// SHA-256 of the pause binary (the image label that tells a stale pause image).
fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}
