//! The objects behind the local API, held as JSON, with one increasing resourceVersion for
//! every change and the recent changes kept for watches that resume from a resourceVersion.

use crate::errors::{ApiError, ApiResult};
use crate::persist::{Disk, DiskError, Loaded};
use crate::resources::Resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_runtime::Clock;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// How many changes are kept for watches resuming from an older resourceVersion: a watch that
/// falls further behind gets 410 Expired and lists again, as against the API server.
const HISTORY: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it: the object after the change (for a deletion, as it was,
/// with the deletion's resourceVersion).
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub resource: Resource,
    pub kind: ChangeKind,
    pub object: Arc<Value>,
}

type Key = (Resource, String, String);

struct Inner {
    rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    history: VecDeque<Change>,
}

/// Every object of the local API. Cheap to share; all methods take `&self`.
pub struct Store {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Change>,
    clock: Clock,
    /// Where every change is written before it is made, when the store outlives the process.
    disk: Option<Disk>,
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.resourceVersion` as a number (ours are decimal).
pub fn object_rv(obj: &Value) -> Option<u64> {
    meta_str(obj, "resourceVersion")?.parse().ok()
}

fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if !obj["metadata"].is_object() {
        obj["metadata"] = Value::Object(Default::default());
    }
    obj["metadata"][field] = value;
}

impl Store {
    /// A store in memory only.
    pub fn new(clock: Clock) -> Self {
        Self::with(clock, None, Loaded::default())
    }

    /// A store kept in the database at `path`, with what it already holds.
    pub fn open(clock: Clock, path: &Path) -> Result<Self, DiskError> {
        let (disk, loaded) = Disk::open(path)?;
        Ok(Self::with(clock, Some(disk), loaded))
    }

    fn with(clock: Clock, disk: Option<Disk>, loaded: Loaded) -> Self {
        let (changes, _) = broadcast::channel(4096);
        let objects = loaded
            .objects
            .into_iter()
            .map(|(resource, obj)| {
                let key = Self::key(
                    resource,
                    meta_str(&obj, "namespace").unwrap_or_default(),
                    meta_str(&obj, "name").unwrap_or_default(),
                );
                (key, Arc::new(obj))
            })
            .collect();
        let inner = Inner { rv: loaded.rv.max(1), objects, history: VecDeque::new() };
        Store { inner: Mutex::new(inner), changes, clock, disk }
    }

    /// Writes the object under `key` (or its removal, `None`) at resourceVersion `rv` to disk.
    fn persist(&self, rv: u64, key: &Key, obj: Option<&Value>) -> ApiResult<()> {
        let Some(disk) = &self.disk else { return Ok(()) };
        let (resource, ns, name) = key;
        match obj {
            Some(obj) => disk.put(rv, *resource, ns, name, obj),
            None => disk.remove(rv, *resource, ns, name),
        }
        .map_err(|e| ApiError::internal(e.to_string()))
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The current time as a `metav1.Time` value.
    pub fn now_value(&self) -> Value {
        serde_json::to_value(Time(self.clock.now())).unwrap_or(Value::Null)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn key(resource: Resource, ns: &str, name: &str) -> Key {
        let ns = if resource.namespaced() { ns } else { "" };
        (resource, ns.to_string(), name.to_string())
    }

    fn record(&self, inner: &mut Inner, resource: Resource, kind: ChangeKind, object: Arc<Value>) {
        let change = Change { rv: inner.rv, resource, kind, object };
        if inner.history.len() == HISTORY {
            inner.history.pop_front();
        }
        inner.history.push_back(change.clone());
        // Nobody watching is fine.
        let _ = self.changes.send(change);
    }

    /// Stores a new object: its namespace and name are set; the uid, creation time and
    /// resourceVersion are given here.
    pub fn create(&self, resource: Resource, mut obj: Value) -> ApiResult<Value> {
        let ns = meta_str(&obj, "namespace").unwrap_or_default().to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let key = Self::key(resource, &ns, &name);
        if meta_str(&obj, "uid").is_none() {
            set_meta(&mut obj, "uid", Value::String(uuid::Uuid::new_v4().to_string()));
        }
        set_meta(&mut obj, "creationTimestamp", self.now_value());
        let mut inner = self.lock();
        if inner.objects.contains_key(&key) {
            return Err(ApiError::already_exists(resource, &name));
        }
        let rv = inner.rv + 1;
        set_meta(&mut obj, "resourceVersion", Value::String(rv.to_string()));
        self.persist(rv, &key, Some(&obj))?;
        inner.rv = rv;
        let obj = Arc::new(obj);
        inner.objects.insert(key, obj.clone());
        self.record(&mut inner, resource, ChangeKind::Added, obj.clone());
        Ok((*obj).clone())
    }

    pub fn get(&self, resource: Resource, ns: &str, name: &str) -> ApiResult<Arc<Value>> {
        self.lock()
            .objects
            .get(&Self::key(resource, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, name))
    }

    /// The resourceVersion of the newest change: what was read at it is still current.
    pub fn revision(&self) -> u64 {
        self.lock().rv
    }

    /// Every object of a resource (in one namespace, or all), in key order, and the
    /// resourceVersion the list is current at.
    pub fn list(&self, resource: Resource, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let inner = self.lock();
        // Keys sort by resource first: read only this one's.
        let items = inner
            .objects
            .range((resource, String::new(), String::new())..)
            .take_while(|((r, _, _), _)| *r == resource)
            .filter(|((_, n, _), _)| ns.is_none_or(|ns| !resource.namespaced() || n == ns))
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv)
    }

    /// Changes an object: `change` gets the stored object and returns the new one, or `None`
    /// to leave it as it is. The new object keeps its identity (namespace, name, uid, creation
    /// time) and gets a new resourceVersion.
    pub fn update(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        change: impl FnOnce(&Value) -> ApiResult<Option<Value>>,
    ) -> ApiResult<Value> {
        let key = Self::key(resource, ns, name);
        let mut inner = self.lock();
        let old = inner.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(resource, name))?;
        let Some(mut new) = change(&old)? else {
            return Ok((*old).clone());
        };
        for field in ["namespace", "name", "uid", "creationTimestamp"] {
            set_meta(&mut new, field, old["metadata"][field].clone());
        }
        set_meta(&mut new, "resourceVersion", old["metadata"]["resourceVersion"].clone());
        if new == *old {
            return Ok(new);
        }
        let rv = inner.rv + 1;
        set_meta(&mut new, "resourceVersion", Value::String(rv.to_string()));
        self.persist(rv, &key, Some(&new))?;
        inner.rv = rv;
        let new = Arc::new(new);
        inner.objects.insert(key, new.clone());
        self.record(&mut inner, resource, ChangeKind::Modified, new.clone());
        Ok((*new).clone())
    }

    /// Removes an object; watchers get it as DELETED with a new resourceVersion.
    pub fn delete(&self, resource: Resource, ns: &str, name: &str) -> ApiResult<Value> {
        self.delete_if(resource, ns, name, |_| true)
    }

    /// Removes an object if `wanted` says so of the stored one (a uid check: an object of the
    /// same name may have replaced it).
    pub fn delete_if(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        wanted: impl FnOnce(&Value) -> bool,
    ) -> ApiResult<Value> {
        let key = Self::key(resource, ns, name);
        let mut inner = self.lock();
        match inner.objects.get(&key) {
            Some(old) if wanted(old) => {}
            _ => return Err(ApiError::not_found(resource, name)),
        }
        let rv = inner.rv + 1;
        self.persist(rv, &key, None)?;
        inner.rv = rv;
        let old = inner.objects.remove(&key).ok_or_else(|| ApiError::not_found(resource, name))?;
        let mut gone = (*old).clone();
        set_meta(&mut gone, "resourceVersion", Value::String(inner.rv.to_string()));
        let gone = Arc::new(gone);
        self.record(&mut inner, resource, ChangeKind::Deleted, gone.clone());
        Ok((*gone).clone())
    }

    /// Starts a watch: the changes after `from` still kept (none when `from` is `None`), and
    /// a receiver of every later change, with nothing lost in between.
    pub fn watch(&self, from: Option<u64>) -> ApiResult<(Vec<Change>, broadcast::Receiver<Change>)> {
        let inner = self.lock();
        let rx = self.changes.subscribe();
        let Some(from) = from else { return Ok((vec![], rx)) };
        if let Some(oldest) = inner.history.front()
            && from + 1 < oldest.rv
        {
            return Err(ApiError::expired(from, oldest.rv - 1));
        }
        Ok((inner.history.iter().filter(|c| c.rv > from).cloned().collect(), rx))
    }

    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}})
    }

    #[tokio::test]
    async fn every_change_has_a_new_resource_version_and_reaches_watchers() {
        let store = Store::new(Clock::new());
        let a = store.create(Resource::Pods, pod("a")).unwrap();
        let rv_a = object_rv(&a).unwrap();
        let (backlog, mut rx) = store.watch(Some(rv_a)).unwrap();
        assert!(backlog.is_empty());
        assert_eq!(store.create(Resource::Pods, pod("a")).unwrap_err().reason, "AlreadyExists");
        let b = store
            .update(Resource::Pods, "default", "a", |old| {
                let mut new = old.clone();
                new["metadata"]["labels"] = json!({"x": "y"});
                Ok(Some(new))
            })
            .unwrap();
        assert!(object_rv(&b).unwrap() > rv_a);
        assert_eq!(meta_str(&b, "uid"), meta_str(&a, "uid"));
        let seen = rx.recv().await.unwrap();
        assert_eq!(seen.kind, ChangeKind::Modified);
        store.delete(Resource::Pods, "default", "a").unwrap();
        assert_eq!(rx.recv().await.unwrap().kind, ChangeKind::Deleted);
        let (backlog, _) = store.watch(Some(rv_a)).unwrap();
        assert_eq!(backlog.iter().map(|c| c.kind).collect::<Vec<_>>(), [ChangeKind::Modified, ChangeKind::Deleted]);
        assert_eq!(store.get(Resource::Pods, "default", "a").unwrap_err().reason, "NotFound");
    }

    #[test]
    fn an_unchanged_update_keeps_the_resource_version() {
        let store = Store::new(Clock::new());
        let a = store.create(Resource::Pods, pod("a")).unwrap();
        let same = store.update(Resource::Pods, "default", "a", |old| Ok(Some(old.clone()))).unwrap();
        assert_eq!(object_rv(&same), object_rv(&a));
    }
}
