//! The floor bench target (benches/floor.rs) is only compiled when someone
//! runs the bench; this includes it so `cargo test` keeps it building and
//! checks that it runs the push sequence.

#[path = "../benches/floor.rs"]
#[allow(dead_code)] // its `main` is the bench binary's
mod floor;

#[test]
fn the_bench_floor_runs_the_push_sequence() {
    let dir = std::env::temp_dir().join(format!("syncular-floor-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("floor.db");
    for sync in ["full", "normal", "off"] {
        let s = syncular_native_storage::sqlite::Synchronous::parse(Some(sync)).unwrap();
        let file = dir.join(format!("floor-{sync}.db"));
        let per = floor::direct_push(file.to_str().unwrap(), 5, 3, s).unwrap();
        assert!(per > 0.0);
    }
    let _ = path;
    let _ = std::fs::remove_dir_all(&dir);
}
