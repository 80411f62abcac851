//! Links libdqlite. The library is looked for only to turn a link error
//! into advice; the linker has the last word.

use std::path::Path;

fn main() {
    println!("cargo:rustc-link-lib=dylib=dqlite");
    println!("cargo:rerun-if-changed=build.rs");
    let dirs = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
        "/usr/local/lib",
    ];
    if !dirs
        .iter()
        .any(|d| Path::new(d).join("libdqlite.so").exists())
    {
        println!(
            "cargo:warning=libdqlite.so not found; install the development package \
             (Debian/Ubuntu: apt-get install libdqlite-dev)"
        );
    }
}
