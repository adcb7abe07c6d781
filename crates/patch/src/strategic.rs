//! Strategic merge patch, applied the way the API server applies it (apimachinery
//! `pkg/util/strategicpatch/patch.go`, `StrategicMergeMapPatch`: parallel lists merged, nulls
//! for absent fields ignored).
//!
//! Maps merge recursively and `null` deletes a key. A list merges by its schema strategy: maps
//! matched on a merge key, primitives as a set, or replaced whole. Directives:
//! - `$patch: replace | delete` on a map or on an element of a merged list (upstream refuses
//!   `merge`, and so does this);
//! - `$setElementOrder/<list>`: the order of the merged list;
//! - `$deleteFromPrimitiveList/<list>`: primitives to take out of a list;
//! - `$retainKeys`: the only keys the map keeps.
//!
//! Values taken from the patch as they are (new fields, replaced lists, new list elements) lose
//! their directive keys and null fields, which is what decoding the result into the Go type does
//! upstream; directive keys never reach the result.

use serde_json::{Map, Value};

use crate::PatchSchema;
use crate::error::PatchError;
use crate::go_format::{self, GoType};
use crate::schema::ListStrategy;

const DIRECTIVE: &str = "$patch";
const DELETE: &str = "delete";
const REPLACE: &str = "replace";
const MERGE: &str = "merge";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Applies `patch` to `original`.
pub(crate) fn apply(
    original: &Value,
    patch: Map<String, Value>,
    schema: &dyn PatchSchema,
) -> Result<Value, PatchError> {
    let Value::Object(original) = original else {
        return Err(PatchError::InvalidDocument);
    };
    let merger = Merger { schema };
    merger.merge_map(original.clone(), patch, &[]).map(Value::Object)
}

struct Merger<'a> {
    schema: &'a dyn PatchSchema,
}

impl Merger<'_> {
    fn strategy(&self, path: &[&str], field: &str) -> ListStrategy {
        self.schema.strategy(&child_path(path, field))
    }

    /// `mergeMap`: the map at `path` (the field names leading to it).
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        path: &[&str],
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return match directive.as_str() {
                Some(REPLACE) => {
                    patch.remove(DIRECTIVE);
                    Ok(as_decoded_map(patch))
                }
                Some(DELETE) => Ok(Map::new()),
                _ => Err(unknown_directive(directive, &patch)),
            };
        }
        retain_keys(&mut original, &mut patch)?;
        self.merge_element_order_lists(&mut original, &mut patch, path)?;

        for (key, patch_value) in patch {
            let (key, is_delete_list) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
                Some(rest) => (field_after_prefix(rest, PatchError::BadPrimitiveListFormat)?.to_string(), true),
                None => (key, false),
            };
            if patch_value.is_null() {
                original.remove(&key);
                continue;
            }
            let Some(current) = original.get_mut(&key) else {
                if !is_delete_list && let Some(value) = without_directives(patch_value) {
                    original.insert(key, value);
                }
                continue;
            };
            let merged = if GoType::of(current) != GoType::of(&patch_value) {
                if is_delete_list {
                    continue;
                }
                without_directives(patch_value)
            } else {
                Some(match (std::mem::take(current), patch_value) {
                    (Value::Object(o), Value::Object(p)) => {
                        Value::Object(self.merge_map(o, p, &child_path(path, &key))?)
                    }
                    (Value::Array(o), Value::Array(p)) => {
                        let strategy = self.strategy(path, &key);
                        Value::Array(self.merge_list(o, p, &child_path(path, &key), strategy, is_delete_list)?)
                    }
                    (_, scalar) => scalar,
                })
            };
            match merged {
                Some(value) => original.insert(key, value),
                None => original.remove(&key),
            };
        }
        Ok(original)
    }

    /// `mergePatchIntoOriginal`: each `$setElementOrder/<list>` with its list, merged and then
    /// put in order. Both keys leave the patch.
    fn merge_element_order_lists(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        path: &[&str],
    ) -> Result<(), PatchError> {
        let keys: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ELEMENT_ORDER)).cloned().collect();
        for key in keys {
            let order = match patch.remove(&key) {
                Some(Value::Array(order)) => order,
                other => return Err(wrong_type(GoType::Slice, other.as_ref())),
            };
            let field = field_after_prefix(&key[SET_ELEMENT_ORDER.len()..], PatchError::BadSetElementOrderFormat)?;
            let original_list = list_field(original, field)?;
            let patch_list = list_field(patch, field)?;
            let strategy = self.strategy(path, field);
            let merge_key = strategy.merge_key();
            validate_against_order(patch_list.as_deref().unwrap_or_default(), &order, merge_key)?;

            let merged = match (&original_list, &patch_list) {
                (Some(o), None) => o.clone(),
                (None, Some(p)) => p.iter().cloned().filter_map(without_directives).collect(),
                (Some(o), Some(p)) => {
                    self.merge_list(o.clone(), p.clone(), &child_path(path, field), strategy, false)?
                }
                (None, None) => continue,
            };
            let (in_order, server_only) = partition(merged, &order, merge_key)?;
            let patch_list = patch_list.unwrap_or_default();
            let mut server_order = original_list.unwrap_or_default();
            let kind = element_type(&[&server_order, &patch_list])?;
            if let (true, GoType::Map, Some(key)) = (strategy.merges(), kind, merge_key) {
                server_order = as_read_after_merge_in_place(&server_order, &patch_list, key);
            }
            let ordered = normalize_order(in_order, server_only, &order, &server_order, merge_key, kind)?;
            original.insert(field.to_string(), Value::Array(ordered));
            patch.remove(field);
        }
        Ok(())
    }

    /// `mergeSliceHandler`: merged lists (and `$deleteFromPrimitiveList`s whatever the strategy)
    /// merge; the others take the patch's list.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: Vec<Value>,
        path: &[&str],
        strategy: ListStrategy,
        is_delete_list: bool,
    ) -> Result<Vec<Value>, PatchError> {
        if !(strategy.merges() || is_delete_list) {
            return Ok(patch.into_iter().map(as_decoded).collect());
        }
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = element_type(&[&original, &patch])?;
        let merge_key = strategy.merge_key();
        let (server_order, merged, patch) = if kind != GoType::Map {
            if is_delete_list {
                return Ok(original.into_iter().filter(|v| !patch.contains(v)).collect());
            }
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for value in original.iter().chain(&patch) {
                if !merged.contains(value) {
                    merged.push(value.clone());
                }
            }
            (original, merged, patch)
        } else {
            // Upstream names the Go kind of the declared element type: a primitive-merge list is a
            // list of strings in core/v1, any other list of maps a list of structs.
            let element = if strategy == ListStrategy::MergePrimitives { "string" } else { "struct" };
            let key = merge_key.ok_or(PatchError::MergeWithoutKey(element))?;
            let (original, patch) = apply_element_directives(original, patch, key)?;
            let merged = self.merge_elements(original.clone(), &patch, key, path)?;
            (original, merged, patch)
        };
        let (in_patch, server_only) = partition(merged, &patch, merge_key)?;
        normalize_order(in_patch, server_only, &patch, &server_order, merge_key, kind)
    }

    /// `mergeSliceWithoutSpecialElements`: each patch element merges into the object's element
    /// with its key, or is appended.
    fn merge_elements(
        &self,
        mut original: Vec<Value>,
        patch: &[Value],
        key: &str,
        path: &[&str],
    ) -> Result<Vec<Value>, PatchError> {
        for element in patch {
            let element = element.as_object().expect("element_type checked every element is a map");
            let value = element.get(key).ok_or_else(|| missing_merge_key(element, key))?;
            match find_by_key(&original, key, value)? {
                Some(index) => {
                    let Value::Object(found) = std::mem::take(&mut original[index]) else {
                        unreachable!("find_by_key only finds maps")
                    };
                    original[index] = Value::Object(self.merge_map(found, element.clone(), path)?);
                }
                None => original.push(as_decoded(Value::Object(element.clone()))),
            }
        }
        Ok(original)
    }
}

fn child_path<'p>(path: &[&'p str], field: &'p str) -> Vec<&'p str> {
    let mut child = path.to_vec();
    child.push(field);
    child
}

/// The `<field>` of `<prefix>/<field>`, given what follows the prefix.
fn field_after_prefix(rest: &str, bad_format: PatchError) -> Result<&str, PatchError> {
    rest.strip_prefix('/').ok_or(bad_format)
}

/// The list at `field`, if the map has the field; anything but a list there is an error.
fn list_field(map: &Map<String, Value>, field: &str) -> Result<Option<Vec<Value>>, PatchError> {
    match map.get(field) {
        None => Ok(None),
        Some(Value::Array(list)) => Ok(Some(list.clone())),
        Some(other) => Err(wrong_type(GoType::Slice, Some(other))),
    }
}

/// The object's list of maps as upstream reads it after merging `patch` into it: the merge works
/// in place on the list's array, and `$setElementOrder` then orders by the list as that array
/// reads at the list's old length. Deletions shifted the later elements left (leaving the old
/// last one twice), and appended elements took the freed places. Where server-only elements land
/// among the patch's depends on this, so it is reproduced.
fn as_read_after_merge_in_place(original: &[Value], patch: &[Value], key: &str) -> Vec<Value> {
    let mut list = original.to_vec();
    let mut len = list.len();
    for element in patch.iter().filter(|v| directive_of(v) == Some(DELETE)) {
        let target = element.get(key);
        while let Some(index) = list[..len].iter().position(|v| v.get(key) == target) {
            for i in index..len - 1 {
                list[i] = list[i + 1].clone();
            }
            len -= 1;
        }
    }
    // `$patch: replace` makes the patch's elements a new list: nothing is appended in place.
    if patch.iter().any(|v| directive_of(v) == Some(REPLACE)) {
        return list;
    }
    for element in patch.iter().filter(|v| directive_of(v).is_none()) {
        if list[..len].iter().any(|v| v.get(key) == element.get(key)) {
            continue;
        }
        if len < list.len() {
            list[len] = element.clone();
        } else {
            list.push(element.clone());
        }
        len += 1;
    }
    list.truncate(original.len());
    list
}

/// `applyRetainKeysDirective`: keeps only the keys `$retainKeys` names, after checking the patch
/// sets no other.
fn retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::BadRetainKeysFormat);
    };
    let retained = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    let sets_other = patch.iter().any(|(k, v)| {
        !v.is_null() && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST) && !k.starts_with(SET_ELEMENT_ORDER) && !retained(k)
    });
    if sets_other {
        return Err(PatchError::BadRetainKeysFormat);
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch list's elements (deletions aside) appear in the
/// order list, in its order.
fn validate_against_order(patch: &[Value], order: &[Value], merge_key: Option<&str>) -> Result<(), PatchError> {
    if order.is_empty() || patch.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = match merge_key {
        Some(_) => split_deletions(patch.iter())?.0,
        None => patch.iter().collect(),
    };
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        if same_merge_key(kept[p], &order[o], merge_key)? {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() {
        return Err(PatchError::OrderMismatch {
            patch: go_format::v(&Value::Array(patch.to_vec())),
            order: go_format::v(&Value::Array(order.to_vec())),
        });
    }
    Ok(())
}

/// `mergeKeyValueEqual`.
fn same_merge_key(left: &Value, right: &Value, merge_key: Option<&str>) -> Result<bool, PatchError> {
    let Some(key) = merge_key else {
        return Ok(left == right);
    };
    let left = as_map(left)?;
    let right = as_map(right)?;
    let l = left.get(key).ok_or_else(|| missing_merge_key(left, key))?;
    let r = right.get(key).ok_or_else(|| missing_merge_key(right, key))?;
    Ok(l == r)
}

/// `extractToDeleteItems`: the elements kept and those with `$patch: delete`.
fn split_deletions<'v>(list: impl Iterator<Item = &'v Value>) -> Result<(Vec<&'v Value>, Vec<&'v Value>), PatchError> {
    let (mut kept, mut deleted) = (Vec::new(), Vec::new());
    for value in list {
        as_map(value)?;
        if directive_of(value) == Some(DELETE) {
            deleted.push(value);
        } else {
            kept.push(value);
        }
    }
    Ok((kept, deleted))
}

/// `mergeSliceWithSpecialElements`: applies the patch elements carrying `$patch` (deletions
/// from the object's list, or `replace`, which makes the rest of the patch the whole list) and
/// returns the object's list and the remaining patch elements.
fn apply_element_directives(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let mut rest = Vec::with_capacity(patch.len());
    let mut replace = false;
    for value in patch {
        let element = value.as_object().expect("element_type checked every element is a map");
        let Some(directive) = element.get(DIRECTIVE) else {
            rest.push(value);
            continue;
        };
        match directive.as_str() {
            Some(DELETE) => {
                let target = element.get(key).ok_or_else(|| missing_merge_key(element, key))?;
                // Every matching element goes, duplicates included.
                original.retain(|o| o.get(key) != Some(target));
            }
            Some(REPLACE) => replace = true,
            Some(MERGE) => return Err(PatchError::MergeDirectiveInList),
            _ => return Err(unknown_directive(directive, element)),
        }
    }
    if replace { Ok((rest, Vec::new())) } else { Ok((original, rest)) }
}

/// `findMapInSliceBasedOnKeyValue`: the index of the first map whose `key` is `value`.
fn find_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>, PatchError> {
    for (index, element) in list.iter().enumerate() {
        let Value::Object(map) = element else {
            return Err(PatchError::NotAMap(index));
        };
        if map.get(key) == Some(value) {
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// Splits `merged` into the elements `by` names (by merge key, or by value for primitives) and
/// the others, each in `merged`'s order.
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: Option<&str>,
) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
    let (mut named, mut others) = (Vec::new(), Vec::new());
    for value in merged {
        let is_named = match merge_key {
            None => by.contains(&value),
            Some(key) => {
                let map = as_map(&value)?;
                let key_value = map.get(key).ok_or_else(|| missing_merge_key(map, key))?;
                find_by_key(by, key, key_value)?.is_some()
            }
        };
        if is_named { named.push(value) } else { others.push(value) }
    }
    Ok((named, others))
}

/// `sliceElementType`: the one Go type of all elements of the lists; lists of lists are refused.
fn element_type(lists: &[&[Value]]) -> Result<GoType, PatchError> {
    let mut found = None;
    for value in lists.iter().flat_map(|l| l.iter()) {
        let kind = GoType::of(value);
        match found {
            None if kind == GoType::Slice => return Err(PatchError::ListOfLists),
            None => found = Some(kind),
            Some(seen) if seen != kind => return Err(PatchError::MixedElementTypes(go_format::v_lists(lists))),
            Some(_) => {}
        }
    }
    found.ok_or(PatchError::NoElements)
}

/// `normalizeElementOrder`: the patch's elements in `patch_order`, the object's other elements
/// in `server_order`, then the two interleaved so that each keeps its order and server-only
/// elements stay before the patch elements that follow them in the object.
fn normalize_order(
    patch_items: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
    kind: GoType,
) -> Result<Vec<Value>, PatchError> {
    let patch_items = sort_by_order(patch_items, patch_order, merge_key, kind)?;
    let server_only = sort_by_order(server_only, server_order, merge_key, kind)?;

    let position = |value: &Value| index_in(server_order, value, merge_key, kind);
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!((position(l), position(r)), (Some(li), Some(ri)) if li < ri),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// `normalizeSliceOrder`: a stable sort by position in `order`; for maps, every element needs the
/// merge key and `$patch: delete` elements go last.
fn sort_by_order(
    mut items: Vec<Value>,
    order: &[Value],
    merge_key: Option<&str>,
    kind: GoType,
) -> Result<Vec<Value>, PatchError> {
    let mut deletions = Vec::new();
    if kind == GoType::Map {
        let key = merge_key.unwrap_or_default();
        for value in items.iter().chain(order) {
            let map = as_map(value)?;
            if !map.contains_key(key) {
                return Err(missing_merge_key(map, key));
            }
        }
        let (kept, deleted): (Vec<Value>, Vec<Value>) =
            items.into_iter().partition(|v| directive_of(v) != Some(DELETE));
        items = kept;
        deletions = deleted;
    }
    // Elements absent from `order` (which upstream never sorts, every element being found)
    // keep their relative order after the others.
    items.sort_by_key(|v| index_in(order, v, merge_key, kind).unwrap_or(usize::MAX));
    items.extend(deletions);
    Ok(items)
}

/// `index`: where `value` is in `list`, by merge key for maps and by value otherwise.
fn index_in(list: &[Value], value: &Value, merge_key: Option<&str>, kind: GoType) -> Option<usize> {
    if kind == GoType::Map {
        let key = merge_key.unwrap_or_default();
        let wanted = value.get(key);
        list.iter().position(|item| item.get(key) == wanted)
    } else {
        list.iter().position(|item| item == value)
    }
}

/// `removeDirectives` (after `discardNullValuesFromPatch`) for a value the patch adds as is: a
/// map with `$patch` is dropped, wherever it is.
fn without_directives(value: Value) -> Option<Value> {
    clean(value, true)
}

/// A value the patch puts in place as is, as decoding it into its Go type would leave it: no
/// null fields, no directive keys.
fn as_decoded(value: Value) -> Value {
    clean(value, false).expect("maps are only dropped when asked to")
}

fn as_decoded_map(map: Map<String, Value>) -> Map<String, Value> {
    match as_decoded(Value::Object(map)) {
        Value::Object(map) => map,
        _ => unreachable!("cleaning keeps a map a map"),
    }
}

fn clean(value: Value, drop_directive_maps: bool) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if drop_directive_maps && map.contains_key(DIRECTIVE) {
                return None;
            }
            let cleaned = map
                .into_iter()
                .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
                .filter_map(|(k, v)| clean(v, drop_directive_maps).map(|v| (k, v)))
                .collect();
            Some(Value::Object(cleaned))
        }
        Value::Array(items) => {
            Some(Value::Array(items.into_iter().filter_map(|v| clean(v, drop_directive_maps)).collect()))
        }
        scalar => Some(scalar),
    }
}

/// The `$patch` directive of a map.
fn directive_of(value: &Value) -> Option<&str> {
    value.get(DIRECTIVE).and_then(Value::as_str)
}

fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

fn as_map(value: &Value) -> Result<&Map<String, Value>, PatchError> {
    value.as_object().ok_or_else(|| wrong_type(GoType::Map, Some(value)))
}

fn wrong_type(expected: GoType, actual: Option<&Value>) -> PatchError {
    PatchError::WrongType { expected: expected.name(), actual: actual.map_or(GoType::Nil, GoType::of).name() }
}

fn missing_merge_key(map: &Map<String, Value>, key: &str) -> PatchError {
    PatchError::MissingMergeKey { map: go_format::v(&Value::Object(map.clone())), key: key.to_string() }
}

fn unknown_directive(directive: &Value, map: &Map<String, Value>) -> PatchError {
    PatchError::UnknownDirective { directive: go_format::s(directive), map: go_format::v(&Value::Object(map.clone())) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoreV1Schema;
    use serde_json::json;

    fn patch(original: Value, patch: Value) -> Result<Value, PatchError> {
        let Value::Object(patch) = patch else { panic!("patches are maps") };
        apply(&original, patch, &CoreV1Schema)
    }

    #[test]
    fn directive_keys_never_reach_the_result() {
        let original = json!({"spec": {"containers": [{"name": "app", "image": "a"}]}});
        let body = json!({"spec": {
            "containers": [{
                "name": "new",
                "image": "b",
                "$setElementOrder/env": [{"name": "A"}],
                "env": [{"name": "A", "value": null}],
                "volumeMounts": [{"$patch": "delete", "mountPath": "/x"}],
                "securityContext": {"$retainKeys": ["privileged"], "privileged": true}
            }],
            "volumes": [{"name": "v", "$retainKeys": ["name", "emptyDir"], "emptyDir": {}}],
            "overhead": {"$patch": "delete"}
        }});
        let patched = patch(original, body).unwrap();
        assert_eq!(
            patched,
            json!({"spec": {
                "containers": [
                    {
                        "name": "new",
                        "image": "b",
                        "env": [{"name": "A"}],
                        // A new element is taken as it is, as decoding it upstream would leave
                        // it: the directive goes, the map stays.
                        "volumeMounts": [{"mountPath": "/x"}],
                        "securityContext": {"privileged": true}
                    },
                    {"name": "app", "image": "a"}
                ],
                "volumes": [{"name": "v", "emptyDir": {}}]
            }})
        );
    }

    #[test]
    fn set_element_order_must_be_a_list() {
        let err = patch(json!({}), json!({"$setElementOrder/finalizers": "a"})).unwrap_err();
        assert_eq!(err.to_string(), "expected a []interface {}, but received a string");
        let err =
            patch(json!({"metadata": {"finalizers": []}}), json!({"metadata": {"$setElementOrder/finalizers": []}}))
                .unwrap_err();
        assert_eq!(err.to_string(), "no elements in any of the given slices");
    }

    #[test]
    fn merged_lists_hold_one_element_type() {
        let original = json!({"metadata": {"finalizers": ["a"]}});
        let err = patch(original.clone(), json!({"metadata": {"finalizers": [1]}})).unwrap_err();
        assert_eq!(err.to_string(), "list element types are not identical: [[a] [1]]");
        let err = patch(original.clone(), json!({"metadata": {"finalizers": [{"a": 1}]}})).unwrap_err();
        assert_eq!(err.to_string(), "list element types are not identical: [[a] [map[a:1]]]");
        let err = patch(json!({"metadata": {"finalizers": [["a"]]}}), json!({"metadata": {"finalizers": [["b"]]}}))
            .unwrap_err();
        assert_eq!((err.code(), err.reason()), (422, "Invalid"));
        let err = patch(json!({}), json!({"metadata": {"finalizers": [{"a": 1}]}}));
        assert!(err.is_ok(), "a new list is taken as it is: {err:?}");
        let err = patch(json!({"metadata": {"finalizers": []}}), json!({"metadata": {"finalizers": [{"a": 1}]}}))
            .unwrap_err();
        assert_eq!(err.to_string(), "cannot merge lists without merge key for string");
    }

    #[test]
    fn element_of_the_object_without_merge_key() {
        let original = json!({"spec": {"containers": [{"image": "a"}]}});
        let err = patch(original, json!({"spec": {"containers": [{"name": "app"}]}})).unwrap_err();
        assert_eq!(err.to_string(), "map: map[image:a] does not contain declared merge key: name");
    }

    #[test]
    fn delete_list_of_a_missing_or_other_typed_field_changes_nothing() {
        let original = json!({"metadata": {"finalizers": "x"}});
        let body = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"], "$deleteFromPrimitiveList/other": ["y"]}});
        assert_eq!(patch(original.clone(), body).unwrap(), original);
    }
}
