fn main() {
    // Without this, any file in the package (tests, pack/, node_modules)
    // reruns the script and forces a full release rebuild of the crate.
    println!("cargo:rerun-if-changed=build.rs");
    napi_build::setup();
    // A macOS dylib records an install name, by default the absolute path
    // it was linked at (a folder of the build machine). The addon is
    // loaded by path, so a relative name is enough: @rpath/ and the file.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("macos") {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/syncular-native-storage.node"
        );
    }
}
