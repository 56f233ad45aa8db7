fn main() {
    // Without this, any file in the package (tests, pack/, node_modules)
    // reruns the script and forces a full release rebuild of the crate.
    println!("cargo:rerun-if-changed=build.rs");
    napi_build::setup();
}
