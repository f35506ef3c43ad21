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

/// The README's table of errors lists every code once, in declaration
/// order, with the status, category and retryable flag the code carries:
/// the errors reference cannot fall behind the codes.
#[test]
fn the_readme_lists_every_error_code_as_it_is() {
    let readme = include_str!("../README.md");
    let start = readme
        .find("### Errors")
        .expect("the README has an Errors section");
    let rows: Vec<Vec<&str>> = readme[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| code |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    let listed: Vec<(String, String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r[1].trim_matches('`').to_owned(),
                r[2].to_owned(),
                r[3].to_owned(),
                r[4].to_owned(),
            )
        })
        .collect();
    let codes: Vec<(String, String, String, String)> = loom_core::ErrorCode::ALL
        .iter()
        .map(|c| {
            (
                c.as_str().to_owned(),
                c.status().to_string(),
                c.category().as_str().to_owned(),
                if c.retryable() { "yes" } else { "no" }.to_owned(),
            )
        })
        .collect();
    assert_eq!(listed, codes);
}

/// Every description in every op's input and output schema is written for
/// a model: a paragraph a line (no doc comment's source line breaks, which
/// cost tokens on every turn) and no rustdoc link syntax.
#[test]
fn schema_descriptions_are_reflowed_prose() {
    fn walk(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(d)) = map.get("description") {
                    let wrapped = d
                        .split('\n')
                        .skip(1)
                        .any(|l| !l.is_empty() && !l.starts_with("- ") && !l.starts_with("* "));
                    if wrapped || d.contains("[`") {
                        out.push(format!("{at}: {d:?}"));
                    }
                }
                for (k, v) in map {
                    walk(v, &format!("{at}/{k}"), out);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for op in registry().ops() {
        walk(&op.input_schema, &format!("{} input", op.name), &mut found);
        walk(
            &op.output_schema,
            &format!("{} output", op.name),
            &mut found,
        );
    }
    assert!(found.is_empty(), "{found:#?}");
}
