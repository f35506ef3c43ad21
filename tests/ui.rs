//! Every compile error `#[loom_op]` can raise, one mistake per file, with its
//! expected `.stderr` (refresh with `TRYBUILD=overwrite` and review the diff).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
