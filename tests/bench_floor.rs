//! The floor bench target (benches/floor.rs) is only compiled when someone
//! runs the bench; this includes it so `cargo test` keeps it building and
//! checks that it runs the push sequence.

/// A scratch directory of this test process, made anew.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("syncular-{name}-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[path = "../benches/floor.rs"]
#[allow(dead_code)] // its `main` is the bench binary's
mod floor;

#[test]
fn the_bench_floor_runs_the_push_sequence() {
    let dir = scratch("floor");
    for sync in ["full", "normal", "off"] {
        let s = syncular_native_storage::sqlite::Synchronous::parse(Some(sync)).unwrap();
        let file = dir.join(format!("floor-{sync}.db"));
        let per = floor::direct_push(file.to_str().unwrap(), 5, 3, s).unwrap();
        assert!(per > 0.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "../benches/request.rs"]
#[allow(dead_code)] // its `main` is the bench binary's
mod request;

#[test]
fn the_request_floor_runs_each_variant_and_shape() {
    let dir = scratch("request");
    let normal = syncular_native_storage::sqlite::Synchronous::parse(Some("normal")).unwrap();
    for variant in ["host", "fold-touch", "one-tx"] {
        let v = request::Variant::parse(variant).unwrap();
        let sub = dir.join(variant);
        std::fs::create_dir_all(&sub).unwrap();
        let rounds =
            request::measure(&sub, request::Shape::Warm(1), 3, normal, v, |_, _| {}).unwrap();
        assert_eq!(rounds.len(), 1);
        assert!(rounds[0].wall_us > 0.0);
    }
    let fresh = request::measure(
        &dir,
        request::Shape::Fresh(1),
        1,
        normal,
        request::Variant::Host,
        |_, _| {},
    )
    .unwrap();
    assert_eq!(fresh.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
