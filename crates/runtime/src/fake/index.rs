//! Label index for the fake's list calls. Pod workers list by pod UID label; with a thousand pods
//! a scan of every container per list would make simulations quadratic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

#[derive(Default)]
pub(super) struct LabelIndex {
    /// label key → label value → ids carrying that pair.
    postings: HashMap<String, HashMap<String, HashSet<Arc<str>>>>,
}

impl LabelIndex {
    pub(super) fn insert(&mut self, id: &Arc<str>, labels: &HashMap<String, String>) {
        for (key, value) in labels {
            let values = match self.postings.get_mut(key.as_str()) {
                Some(values) => values,
                None => self.postings.entry(key.clone()).or_default(),
            };
            let ids = match values.get_mut(value.as_str()) {
                Some(ids) => ids,
                None => values.entry(value.clone()).or_default(),
            };
            ids.insert(id.clone());
        }
    }

    /// Forgets `id`, dropping emptied entries so that removed pods give their memory back.
    pub(super) fn remove(&mut self, id: &str, labels: &HashMap<String, String>) {
        for (key, value) in labels {
            let Some(values) = self.postings.get_mut(key.as_str()) else {
                continue;
            };
            if let Some(ids) = values.get_mut(value.as_str()) {
                ids.remove(id);
                if ids.is_empty() {
                    values.remove(value.as_str());
                }
            }
            if values.is_empty() {
                self.postings.remove(key.as_str());
            }
        }
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.postings.is_empty()
    }

    /// The ids whose labels include every pair of `selector`; `None` for an empty selector
    /// (everything matches, the caller walks its own map).
    pub(super) fn select(&self, selector: &BTreeMap<String, String>) -> Option<Vec<Arc<str>>> {
        if selector.is_empty() {
            return None;
        }
        let mut sets = Vec::with_capacity(selector.len());
        for (key, value) in selector {
            match self.postings.get(key.as_str()).and_then(|values| values.get(value.as_str())) {
                Some(ids) => sets.push(ids),
                None => return Some(Vec::new()),
            }
        }
        sets.sort_unstable_by_key(|ids| ids.len());
        let (smallest, rest) = sets.split_first()?;
        Some(smallest.iter().filter(|id| rest.iter().all(|ids| ids.contains(*id))).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn selector(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn selects_and_forgets() {
        let mut index = LabelIndex::default();
        let a: Arc<str> = "a".into();
        let b: Arc<str> = "b".into();
        let la = labels(&[("pod", "1"), ("kind", "app")]);
        let lb = labels(&[("pod", "2"), ("kind", "app")]);
        index.insert(&a, &la);
        index.insert(&b, &lb);
        assert_eq!(index.select(&selector(&[])), None);
        let mut apps = index.select(&selector(&[("kind", "app")])).unwrap();
        apps.sort();
        assert_eq!(apps, vec![a.clone(), b.clone()]);
        assert_eq!(index.select(&selector(&[("kind", "app"), ("pod", "2")])).unwrap(), vec![b.clone()]);
        assert!(index.select(&selector(&[("pod", "3")])).unwrap().is_empty());
        index.remove("a", &la);
        index.remove("b", &lb);
        assert!(index.postings.is_empty());
    }
}
