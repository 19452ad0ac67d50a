//! Gives the cdylib the soname of the library it stands in for, so that a copy installed as
//! `libnvidia-ml.so.1` (or `libcuda.so.1`) is recorded under that name by the dynamic loader.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // `-soname` is an ELF linker flag; other platforms name libraries differently.
    if os != "macos" && os != "ios" && os != "windows" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
    }
}
