//! The registry this build links: every op present, valid, and exported.

use loom_core::Registry;

fn registry() -> &'static Registry {
    loom_tests::link();
    Registry::global().expect("the linked registry is valid")
}

/// Fails when an op crate is not linked (its ops would silently vanish) or an
/// op is added or removed without updating this list.
#[test]
fn the_linked_ops_are_exactly_these() {
    let names: Vec<&str> = registry().ops().iter().map(|o| o.name.as_str()).collect();
    let expected: Vec<&str> = include_str!("golden/ops.txt")
        .lines()
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        names, expected,
        "update tests/golden/ops.txt when adding or removing an op"
    );
}
