//! The pool filter of seed 001. The seed reports "12 unit tests" for its filter but does not
//! list them; the twelve `seed001_*` cases below cover every row of its table in both
//! directions plus its word-boundary story. Further tests cover the API.

use toolrail_tools::pool::{
    PoolDecision, PoolEntry, PoolRule, PoolRules, Reason, filter_pool, find_marker, kept_names,
};

const CANONICAL: [&str; 3] = ["get_now", "find_files", "send_messages"];

fn pool(extra: &[&str]) -> Vec<PoolEntry> {
    let names: Vec<&str> = CANONICAL.iter().chain(extra).copied().collect();
    PoolRules::seed001().entries(&names)
}

fn kept(extra: &[&str], query: &str) -> Vec<String> {
    kept_names(&filter_pool(&pool(extra), query))
        .into_iter()
        .map(str::to_owned)
        .collect()
}

fn decision<'a>(decisions: &'a [PoolDecision], name: &str) -> &'a PoolDecision {
    decisions
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no decision for {name}"))
}

// ---- the twelve seed cases ------------------------------------------------------------------

#[test]
fn seed001_01_canonical_tools_always_kept() {
    assert_eq!(kept(&[], "anything at all"), CANONICAL);
}

#[test]
fn seed001_02_new_executor_dropped_with_three_canonical_tools() {
    let decisions = filter_pool(&pool(&["request_new_executor"]), "create folder /tmp/x");
    let d = decision(&decisions, "request_new_executor");
    assert!(!d.kept);
    assert_eq!(
        d.reason,
        Reason::EnoughCanonical {
            canonical: 3,
            threshold: 3
        }
    );
}

#[test]
fn seed001_03_new_executor_kept_with_two_canonical_tools() {
    let entries = PoolRules::seed001().entries(&["get_now", "find_files", "request_new_executor"]);
    let decisions = filter_pool(&entries, "translate this poem into Klingon");
    let d = decision(&decisions, "request_new_executor");
    assert!(d.kept);
    assert_eq!(
        d.reason,
        Reason::FewCanonical {
            canonical: 2,
            threshold: 3
        }
    );
}

#[test]
fn seed001_04_location_dropped_without_proximity_marker() {
    // The seed's own example: no GPS location needed to create a folder.
    assert_eq!(
        kept(&["request_location_from_user"], "create folder /tmp/x"),
        CANONICAL
    );
}

#[test]
fn seed001_05_location_kept_for_near_me() {
    let decisions = filter_pool(
        &pool(&["request_location_from_user"]),
        "pharmacies near me please",
    );
    let d = decision(&decisions, "request_location_from_user");
    assert!(d.kept);
    assert_eq!(
        d.reason,
        Reason::MarkerFound {
            marker: "near me".to_owned(),
            span: 11..18
        }
    );
}

#[test]
fn seed001_06_location_markers_case_insensitive() {
    assert!(
        kept(&["request_location_from_user"], "Any good cafés NEARBY?")
            .contains(&"request_location_from_user".to_owned())
    );
    assert!(
        kept(&["request_location_from_user"], "Is it raining Here?")
            .contains(&"request_location_from_user".to_owned())
    );
}

#[test]
fn seed001_07_qua_does_not_match_inside_qualcosa() {
    assert_eq!(
        kept(
            &["request_location_from_user"],
            "dimmi qualcosa di interessante"
        ),
        CANONICAL
    );
    // Nor `here` inside `where` or `there`.
    assert_eq!(
        kept(&["request_location_from_user"], "where is there a list?"),
        CANONICAL
    );
}

#[test]
fn seed001_08_qua_as_a_word_matches() {
    assert!(
        kept(&["request_location_from_user"], "ristoranti qua vicino")
            .contains(&"request_location_from_user".to_owned())
    );
}

#[test]
fn seed001_09_undo_dropped_without_undo_marker() {
    assert_eq!(
        kept(&["undo_last_turn"], "send the report to Silvia"),
        CANONICAL
    );
}

#[test]
fn seed001_10_undo_kept_for_annulla_and_rollback() {
    assert!(
        kept(&["undo_last_turn"], "annulla l'ultima operazione")
            .contains(&"undo_last_turn".to_owned())
    );
    assert!(
        kept(&["undo_last_turn"], "please Rollback that").contains(&"undo_last_turn".to_owned())
    );
    // `annullare` is another word.
    assert_eq!(kept(&["undo_last_turn"], "vorrei annullare"), CANONICAL);
}

#[test]
fn seed001_11_google_workspace_dropped_without_google_marker() {
    assert_eq!(
        kept(&["send_email_google_workspace"], "email me the choice"),
        CANONICAL
    );
}

#[test]
fn seed001_12_google_workspace_kept_when_mentioned() {
    for query in [
        "check my Gmail",
        "upload it to drive",
        "search Google for it",
    ] {
        assert!(
            kept(&["send_email_google_workspace"], query)
                .contains(&"send_email_google_workspace".to_owned()),
            "{query}"
        );
    }
    // `drives` is a different word.
    assert_eq!(
        kept(&["send_email_google_workspace"], "he drives home"),
        CANONICAL
    );
}

// ---- API ------------------------------------------------------------------------------------

#[test]
fn new_provider_costs_one_line() {
    let rules = PoolRules::seed001().with_suffix("_notion", &["notion", "notion.so", "page"]);
    let entries = rules.entries(&["get_now", "create_page_notion"]);
    assert_eq!(
        entries[1].rule,
        PoolRule::RequiresMarker {
            markers: vec!["notion".into(), "notion.so".into(), "page".into()]
        }
    );
    let decisions = filter_pool(&entries, "open notion.so/abc");
    assert!(decisions[1].kept);
    assert!(!filter_pool(&entries, "what time is it")[1].kept);
}

#[test]
fn multi_word_markers_accept_any_whitespace() {
    assert_eq!(find_marker("shops near\n  me", "near me"), Some(6..15));
    assert_eq!(find_marker("shops nearme", "near me"), None);
    assert_eq!(find_marker("anything", ""), None);
    assert_eq!(find_marker("learn c++ now", "c++"), Some(6..9));
}

#[test]
fn decisions_keep_order_and_explain() {
    let entries = vec![
        PoolEntry::new(
            "undo_last_turn",
            PoolRule::RequiresMarker {
                markers: vec!["undo".into()],
            },
        ),
        PoolEntry::canonical("get_now"),
    ];
    let decisions = filter_pool(&entries, "what time is it");
    assert_eq!(decisions[0].name, "undo_last_turn");
    assert!(!decisions[0].kept);
    assert_eq!(
        decisions[0].reason.to_string(),
        "query mentions none of: undo"
    );
    assert_eq!(decisions[1].reason.to_string(), "canonical tool");
    assert_eq!(kept_names(&decisions), ["get_now"]);
}

#[test]
fn decisions_serialize_for_the_ui() {
    let decisions = filter_pool(&pool(&["undo_last_turn"]), "undo it");
    let json = serde_json::to_value(&decisions[3]).unwrap_or_default();
    assert_eq!(
        json,
        serde_json::json!({
            "name": "undo_last_turn",
            "kept": true,
            "reason": {"kind": "marker_found", "marker": "undo", "span": {"start": 0, "end": 4}}
        })
    );
}
