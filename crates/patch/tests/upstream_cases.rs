//! Cases ported from apimachinery `pkg/util/strategicpatch/patch_test.go`: each applies an
//! upstream patch (a TwoWay patch to Original, or a ThreeWay patch to Current) and expects
//! upstream's result (Modified or TwoWayResult, or Result) or error.

use podwright_patch::{ListStrategy, PatchSchema, PatchType, apply};
use serde_json::Value;

/// The test type of patch_test.go, `MergeItem`, which nests itself: its lists merge by the same
/// rules at any depth.
struct MergeItemSchema;

impl PatchSchema for MergeItemSchema {
    fn strategy(&self, path: &[&str]) -> ListStrategy {
        match path.last().copied() {
            Some("mergingList" | "retainKeysMergingList" | "mergeItemPtr") => ListStrategy::MergeByKey("name"),
            Some("mergingIntList") => ListStrategy::MergePrimitives,
            _ => ListStrategy::Replace,
        }
    }
}

fn sort_merged_lists(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                sort_merged_lists(item);
                if let Value::Array(list) = item {
                    match key.as_str() {
                        "mergingList" | "retainKeysMergingList" | "mergeItemPtr" => {
                            list.sort_by_key(|v| v["name"].to_string())
                        }
                        "mergingIntList" => list.sort_by_key(|v| v.as_i64()),
                        _ => {}
                    }
                }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(sort_merged_lists),
        _ => {}
    }
}

#[test]
fn upstream_cases() {
    let cases: Vec<Value> = podwright_api::yaml::from_str(include_str!("fixtures/upstream_cases.yaml")).unwrap();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for case in &cases {
        let description = &case["upstream"];
        let body = serde_json::to_vec(&case["patch"]).unwrap();
        let got = apply(&case["original"], &body, PatchType::StrategicMerge, &MergeItemSchema);
        match (case.get("result"), case["error"].as_str(), got) {
            (Some(expected), _, Ok(mut got)) => {
                let mut expected = expected.clone();
                // Upstream compares these after sorting merged lists: their order is not the point.
                if case["sorted"] == true {
                    sort_merged_lists(&mut got);
                    sort_merged_lists(&mut expected);
                }
                if got != expected {
                    failures.push(format!("{description}:\n  expected {expected}\n  got      {got}"));
                }
            }
            (None, Some(expected), Err(err)) if err.to_string().contains(expected) => {}
            (result, error, got) => {
                failures.push(format!("{description}: expected {result:?} / {error:?}, got {got:?}"))
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
