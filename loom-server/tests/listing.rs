//! The MCP listing of every roster: its shape per profile and revision, and
//! its size in tokens, counted with a real tokenizer. The listing is paid on
//! every turn of every session; these ceilings keep descriptions tight.

use loom_core::{Listing, Profile, Registry};
use loom_server::transport::mcp::listing::Listings;
use loom_server::transport::mcp::protocol::Revision;
use serde_json::Value;

/// Ceilings in o200k tokens for each roster's `tools/list` (standard profile).
/// Raise one only with a reason in the commit that does.
const CEILINGS: &[(&str, usize)] = &[
    ("core", 4_000),
    ("coding", 3_500),
    ("tracker", 1_500),
    ("tasks", 1_500),
    ("atomic", 3_000),
    ("assistant", 6_000),
    ("readonly", 9_000),
    ("all", 14_000),
];

fn listings() -> Listings {
    loom_ops::link();
    Listings::new(Registry::global().expect("valid registry"))
}

fn tools(v: &Value) -> &Vec<Value> {
    v["tools"].as_array().expect("tools array")
}

#[test]
fn every_roster_stays_under_its_token_ceiling() {
    let bpe = tiktoken_rs::o200k_base().expect("tokenizer");
    let l = listings();
    for (roster, ceiling) in CEILINGS {
        let listing = Listing::parse(roster).unwrap();
        let list = l.tools_list(&listing, Profile::Standard, Revision::V2025_11_25);
        let text = serde_json::to_string(&list["tools"]).unwrap();
        let tokens = bpe.encode_with_special_tokens(&text).len();
        println!(
            "{roster}: {} tools, {tokens} tokens (ceiling {ceiling})",
            tools(&list).len()
        );
        assert!(tokens <= *ceiling, "{roster}: {tokens} tokens > {ceiling}");
    }
}

#[test]
fn synthetic_tools_are_on_every_roster_but_assistant() {
    let l = listings();
    for roster in [
        "core",
        "coding+tracker",
        "all",
        "readonly",
        "atomic",
        "assistant",
    ] {
        let listing = Listing::parse(roster).unwrap();
        let list = l.tools_list(&listing, Profile::Standard, Revision::V2025_11_25);
        let names: Vec<&str> = tools(&list)
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        let has = |n: &str| names.contains(&n);
        let want = roster != "assistant";
        assert_eq!(
            (has("loom_search"), has("loom_activate"), has("loom_op")),
            (want, want, want),
            "{roster}"
        );
        assert!(
            !has("loom_search_query"),
            "{roster}: search.query is only loom_search"
        );
        for t in tools(&list) {
            assert!(
                t["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{t}"
            );
            assert_eq!(t["inputSchema"]["type"], "object", "{t}");
            let name = t["name"].as_str().unwrap();
            assert!(
                name.len() <= 128
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
            );
        }
    }
}

#[test]
fn fields_follow_the_profile_and_the_revision() {
    let l = listings();
    let all = Listing::All;
    let find = |list: &Value, name: &str| {
        tools(list)
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap()
    };
    let full = l.tools_list(&all, Profile::Full, Revision::V2025_11_25);
    let caps = find(&full, "loom_ops_capabilities");
    assert_eq!(caps["outputSchema"]["type"], "object");
    assert_eq!(caps["annotations"]["readOnlyHint"], true);
    assert_eq!(caps["title"], "ops.capabilities");
    let standard = l.tools_list(&all, Profile::Standard, Revision::V2025_11_25);
    assert!(
        find(&standard, "loom_ops_capabilities")
            .get("outputSchema")
            .is_none()
    );
    let old = l.tools_list(&all, Profile::Full, Revision::V2024_11_05);
    let caps_old = find(&old, "loom_ops_capabilities");
    assert!(
        caps_old.get("annotations").is_none()
            && caps_old.get("outputSchema").is_none()
            && caps_old.get("title").is_none()
    );
    let compact = l.tools_list(&all, Profile::Compact, Revision::V2025_11_25);
    let d = find(&compact, "loom_op")["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!d.contains("\n\n"));
    assert_eq!(standard["ttlMs"], 600_000);
    assert_eq!(standard["cacheScope"], "public");
}

#[test]
fn listings_are_built_once() {
    let l = listings();
    let a = l.tools_list(&Listing::core(), Profile::Standard, Revision::V2025_11_25);
    let b = l.tools_list(&Listing::core(), Profile::Standard, Revision::V2025_11_25);
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

/// `tools/list` answers the text written when the listing was built: it
/// reads back as the listing, for every roster, profile and revision.
#[test]
fn the_cached_text_is_the_listing() {
    let l = listings();
    for (roster, _) in CEILINGS {
        let listing = Listing::parse(roster).unwrap();
        for profile in [Profile::Standard, Profile::Full] {
            for revision in [Revision::V2024_11_05, Revision::V2025_11_25] {
                let text = l.tools_list_text(&listing, profile, revision);
                let read: Value = serde_json::from_str(&text).unwrap();
                let value = l.tools_list(&listing, profile, revision);
                assert_eq!(read, *value, "{roster} {profile:?} {revision:?}");
                assert!(!tools(&value).is_empty(), "{roster}");
            }
        }
    }
}
