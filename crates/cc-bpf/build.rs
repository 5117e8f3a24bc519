//! Compiles the BPF congestion controls (src/bpf/*.bpf.c) with clang and
//! generates their libbpf-rs skeletons.
//!
//! The programs use CO-RE, so `vmlinux.h` may come from any kernel with BTF;
//! it is dumped from the build machine's `/sys/kernel/btf/vmlinux` with
//! bpftool (what `scripts/setup` installs). Without clang, bpftool or BTF the
//! crate still builds, with `cfg(mewa_no_bpf)`: the rest of mewa works and
//! `mewa cc load` says what is missing instead of the build failing.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use libbpf_cargo::SkeletonBuilder;

const PROGRAMS: &[&str] = &["mewa", "mewa_rto"];
const BTF: &str = "/sys/kernel/btf/vmlinux";

fn main() {
    println!("cargo:rustc-check-cfg=cfg(mewa_no_bpf)");
    println!("cargo:rerun-if-env-changed=MEWA_NO_BPF");
    for p in PROGRAMS {
        println!("cargo:rerun-if-changed=src/bpf/{p}.bpf.c");
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Err(why) = build(&out) {
        // One line: cargo directives end at a newline.
        let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
        println!("cargo:warning=mewa-cc-bpf: BPF programs not built: {why}");
        println!("cargo:rustc-cfg=mewa_no_bpf");
        println!("cargo:rustc-env=MEWA_NO_BPF_REASON={why}");
    }
}

fn build(out: &Path) -> Result<(), String> {
    if env::var_os("MEWA_NO_BPF").is_some() {
        return Err("MEWA_NO_BPF is set".into());
    }
    let clang = Command::new("clang").arg("--version").output();
    if !clang.is_ok_and(|o| o.status.success()) {
        return Err("clang not found (run scripts/setup, or apt-get install clang)".into());
    }
    let vmlinux = out.join("vmlinux.h");
    if !vmlinux.exists() {
        if !Path::new(BTF).exists() {
            return Err(format!(
                "{BTF} is missing: this kernel has no BTF (CONFIG_DEBUG_INFO_BTF)"
            ));
        }
        let dump = Command::new("bpftool")
            .args(["btf", "dump", "file", BTF, "format", "c"])
            .output()
            .map_err(|e| format!("bpftool: {e} (run scripts/setup, or apt-get install bpftool)"))?;
        if !dump.status.success() {
            return Err(format!(
                "bpftool btf dump failed: {}",
                String::from_utf8_lossy(&dump.stderr).trim()
            ));
        }
        std::fs::write(&vmlinux, &dump.stdout)
            .map_err(|e| format!("{}: {e}", vmlinux.display()))?;
    }
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86_64",
        Ok("aarch64") => "aarch64",
        Ok(other) => return Err(format!("no BPF build set up for {other}")),
        Err(_) => "x86_64",
    };
    for p in PROGRAMS {
        let skel = out.join(format!("{p}.skel.rs"));
        SkeletonBuilder::new()
            .source(format!("src/bpf/{p}.bpf.c"))
            .clang_args([
                format!("-I{}", out.display()),
                // asm/types.h lives here on Debian.
                format!("-I/usr/include/{arch}-linux-gnu"),
            ])
            .build_and_generate(&skel)
            .map_err(|e| format!("compiling src/bpf/{p}.bpf.c: {e:#}"))?;
    }
    Ok(())
}
