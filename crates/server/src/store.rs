//! The objects behind the local API, held as JSON, with one increasing resourceVersion for
//! every change and the recent changes kept for watches that resume from a resourceVersion;
//! on disk, changes are committed in groups by a writer of their own before they are visible,
//! and events are read from the disk rather than kept in memory (an hour of them is most of a
//! busy node's objects).

use crate::errors::{ApiError, ApiResult};
use crate::persist::{Disk, DiskError, EventRows, Loaded, Reader, event_seen_before};
use crate::resources::Resource;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use podwright_runtime::Clock;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use tokio::sync::{Notify, broadcast};

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
    /// Every object but, for a store on disk, the events.
    objects: BTreeMap<Key, Arc<Value>>,
    history: VecDeque<Change>,
}

/// One change made and not yet committed: the object after it (for a deletion, as it was).
struct Write {
    key: Key,
    change: Change,
}

/// The write side: every change is made here first, at once, against the newest objects
/// (committed or not), and queued for the writer, which commits what has queued up in one
/// transaction and only then makes it visible.
struct Pending {
    /// The objects with every queued change made (for a store on disk, but the events).
    objects: BTreeMap<Key, Arc<Value>>,
    /// For a store on disk, the events changed by a queued change (`None`: removed), with the
    /// change's resourceVersion; the others are as committed.
    events: HashMap<Key, (u64, Option<Arc<Value>>)>,
    /// The store's disk, where events are read.
    disk: Option<Reader>,
    /// The last resourceVersion given out.
    rv: u64,
    queue: Vec<Write>,
    /// Every change up to this resourceVersion is committed (visible) or has failed.
    settled: u64,
    /// The recent commits that failed: their resourceVersions and why.
    failures: VecDeque<(RangeInclusive<u64>, String)>,
    /// The store is being dropped: the writer commits what is queued and ends.
    closing: bool,
    /// Since when commits fail and why, until one succeeds: what `/healthz` reports.
    failing: Option<Failing>,
    /// The outages that have ended, oldest first, until [`Store::outage_ended`] takes them.
    ended: VecDeque<Outage>,
}

/// Commits failing, from the first failure on.
struct Failing {
    since: Timestamp,
    /// The first failure: what started it (a full disk), where the later ones may only be
    /// redb refusing until the database is opened again.
    first: String,
    /// The last failure: what `/healthz` reports.
    last: String,
    /// The changes dropped meanwhile.
    refused: u64,
}

/// A time the store could not commit, reported once commits work again (see
/// [`Store::outage_ended`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outage {
    /// The first failed commit.
    pub from: Timestamp,
    /// The first commit that worked again.
    pub to: Timestamp,
    /// The changes dropped meanwhile (their writers were told, or were the node's queued reports).
    pub refused: u64,
    /// Why the first commit failed.
    pub error: String,
}

/// Failed commits remembered for the writers waiting on them (a failure is a full disk or a
/// broken file: rare, and every waiter wakes at once).
const FAILURES_KEPT: usize = 64;
/// Ended outages kept for nobody asking (a store without [`Store::outage_ended`]'s reader).
const OUTAGES_KEPT: usize = 16;
/// How often a failing store tries an empty commit when nothing is queued, so that it finds out
/// (and `/healthz` says) that it works again once, say, space has returned.
const RETRY: std::time::Duration = std::time::Duration::from_secs(2);

struct Shared {
    /// What readers and watches see: committed changes only.
    inner: Mutex<Inner>,
    pending: Mutex<Pending>,
    /// Rung when a change is queued, and when the store is dropped.
    queued: Condvar,
    /// Rung when changes have settled.
    settled: Condvar,
    /// Rung when an outage ends.
    outage_ended: Notify,
    changes: broadcast::Sender<Change>,
    clock: Clock,
    /// The store's disk, where events are read.
    disk: Option<Reader>,
}

/// Every object of the local API. Cheap to share; all methods take `&self`.
///
/// A change is made at once and visible once it is on disk: the store's writer (a thread of
/// its own, for a store on disk) commits every change queued meanwhile in one transaction, so
/// that writers at once share one sync. The API's requests wait until their change is
/// committed (`create`, `update`, `delete_if`); the node's reports of statuses and events
/// (`*_queued`) do not, so that a pod worker never waits for the disk.
pub struct Store {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
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

/// The mutex's value, also after a holder panicked: every change under these locks is
/// whole before it is stored.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the caller waits until its change is committed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    Committed,
    Queued,
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

    /// A store over a database in memory whose writes fail as on a full disk while the switch
    /// given with it is set.
    #[cfg(test)]
    pub(crate) fn filling(clock: Clock) -> (Self, Arc<std::sync::atomic::AtomicBool>) {
        let (disk, full) = crate::persist::filling::disk();
        (Self::with(clock, Some(disk), Loaded::default()), full)
    }

    fn with(clock: Clock, disk: Option<Disk>, loaded: Loaded) -> Self {
        let (changes, _) = broadcast::channel(4096);
        let objects: BTreeMap<Key, Arc<Value>> = loaded
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
        let rv = loaded.rv.max(1);
        let reader = disk.as_ref().map(Disk::reader);
        let pending = Pending {
            objects: objects.clone(),
            events: HashMap::new(),
            disk: reader.clone(),
            rv,
            queue: vec![],
            settled: rv,
            failures: VecDeque::new(),
            closing: false,
            failing: None,
            ended: VecDeque::new(),
        };
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner { rv, objects, history: VecDeque::new() }),
            pending: Mutex::new(pending),
            queued: Condvar::new(),
            settled: Condvar::new(),
            outage_ended: Notify::new(),
            changes,
            clock,
            disk: reader,
        });
        // In memory, a change is visible as soon as it is made: there is nothing to wait for.
        let writer = disk.map(|disk| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("store-writer".into())
                .spawn(move || shared.write_until_closed(disk))
                .expect("a thread for the store's writer")
        });
        Store { shared, writer }
    }

    pub fn clock(&self) -> &Clock {
        &self.shared.clock
    }

    /// The current time as a `metav1.Time` value.
    pub fn now_value(&self) -> Value {
        serde_json::to_value(Time(self.clock().now())).unwrap_or(Value::Null)
    }

    fn key(resource: Resource, ns: &str, name: &str) -> Key {
        let ns = if resource.namespaced() { ns } else { "" };
        (resource, ns.to_string(), name.to_string())
    }

    /// Makes a change on the write side with `make`, which returns its result and the
    /// resourceVersion that result is current at; then waits, if asked, until that is
    /// committed. In memory the change is visible when this returns either way.
    fn change<T>(&self, wait: Wait, make: impl FnOnce(&mut Pending) -> ApiResult<(T, u64)>) -> ApiResult<T> {
        let mut pending = lock(&self.shared.pending);
        let (result, rv) = make(&mut pending)?;
        if self.writer.is_none() {
            // Published with the write side still held, so that changes show in their order.
            let queue = std::mem::take(&mut pending.queue);
            pending.settled = pending.rv;
            self.shared.publish(queue);
            return Ok(result);
        }
        if !pending.queue.is_empty() {
            self.shared.queued.notify_one();
        }
        if wait == Wait::Queued {
            return Ok(result);
        }
        let pending = blocking(|| {
            while pending.settled < rv {
                pending = self.shared.settled.wait(pending).unwrap_or_else(|e| e.into_inner());
            }
            pending
        });
        match pending.failures.iter().find(|(rvs, _)| rvs.contains(&rv)) {
            Some((_, why)) => Err(ApiError::internal(why.clone())),
            None => Ok(result),
        }
    }

    /// Stores a new object: its namespace and name are set; the uid, creation time and
    /// resourceVersion are given here.
    pub fn create(&self, resource: Resource, obj: Value) -> ApiResult<Value> {
        self.create_with(Wait::Committed, resource, obj)
    }

    /// [`Store::create`], waiting for the commit or not.
    pub(crate) fn create_with(&self, wait: Wait, resource: Resource, mut obj: Value) -> ApiResult<Value> {
        let ns = meta_str(&obj, "namespace").unwrap_or_default().to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let key = Self::key(resource, &ns, &name);
        if meta_str(&obj, "uid").is_none() {
            set_meta(&mut obj, "uid", Value::String(uuid::Uuid::new_v4().to_string()));
        }
        set_meta(&mut obj, "creationTimestamp", self.now_value());
        self.change(wait, |p| {
            if p.current(&key)?.is_some() {
                return Err(ApiError::already_exists(resource, &name));
            }
            let rv = p.rv + 1;
            set_meta(&mut obj, "resourceVersion", Value::String(rv.to_string()));
            let obj = Arc::new(obj);
            p.push(key, resource, ChangeKind::Added, obj.clone());
            Ok(((*obj).clone(), rv))
        })
    }

    pub fn get(&self, resource: Resource, ns: &str, name: &str) -> ApiResult<Arc<Value>> {
        let found = match self.events_on_disk(resource) {
            Some(disk) => disk.event(ns, name).map_err(internal)?.map(Arc::new),
            None => self.shared.lock_inner().objects.get(&Self::key(resource, ns, name)).cloned(),
        };
        found.ok_or_else(|| ApiError::not_found(resource, name))
    }

    /// The disk events of a store on disk are read from, when `resource` is events.
    fn events_on_disk(&self, resource: Resource) -> Option<&Reader> {
        read_on_disk(&self.shared.disk, resource)
    }

    /// The events of `ns` (or all) as they are on disk, to be read one at a time (a list of
    /// them all at once would take some 5 KiB of memory for each); `None` for a store in memory.
    pub fn event_rows(&self, ns: Option<&str>) -> Option<ApiResult<EventRows>> {
        let disk = self.events_on_disk(Resource::Events)?;
        Some(disk.events(ns).map_err(internal))
    }

    /// The names of `ns`'s events; on disk read from their keys, none parsed (a namespace's
    /// deletion removes them, whatever their number).
    pub fn event_names(&self, ns: &str) -> ApiResult<Vec<String>> {
        if let Some(disk) = self.events_on_disk(Resource::Events) {
            return disk.event_names(ns).map_err(internal);
        }
        let (events, _) = self.list(Resource::Events, Some(ns));
        Ok(events.iter().map(|e| meta_str(e, "name").unwrap_or_default().to_string()).collect())
    }

    /// The events last seen (or, not saying, written) before `before`, as (namespace, name).
    pub fn events_seen_before(&self, before: Timestamp) -> ApiResult<Vec<(String, String)>> {
        if let Some(disk) = self.events_on_disk(Resource::Events) {
            return disk.events_seen_before(before).map_err(internal);
        }
        let (events, _) = self.list(Resource::Events, None);
        Ok(events
            .iter()
            .filter(|e| event_seen_before(e, before))
            .map(|e| {
                let id = |field| meta_str(e, field).unwrap_or_default().to_string();
                (id("namespace"), id("name"))
            })
            .collect())
    }

    /// The resourceVersion of the newest change: what was read at it is still current.
    pub fn revision(&self) -> u64 {
        self.shared.lock_inner().rv
    }

    /// Every object of a resource (in one namespace, or all), in key order, and the
    /// resourceVersion the list is current at.
    /// For a store on disk, events are read from the file, all at once (see [`Store::event_rows`]),
    /// and a file that cannot be read lists none: [`Store::try_list`] says so.
    pub fn list(&self, resource: Resource, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        self.try_list(resource, ns).unwrap_or_else(|e| {
            tracing::error!(e = %e.message, "events could not be read");
            (vec![], self.revision())
        })
    }

    /// [`Store::list`], or why the file could not be read.
    pub fn try_list(&self, resource: Resource, ns: Option<&str>) -> ApiResult<(Vec<Arc<Value>>, u64)> {
        if resource == Resource::Events
            && let Some(rows) = self.event_rows(ns)
        {
            let rows = rows?;
            let rv = rows.rv;
            let items = parsed_events(rows).map(|event| event.map(Arc::new));
            return Ok((items.collect::<ApiResult<_>>()?, rv));
        }
        let inner = self.shared.lock_inner();
        // Keys sort by resource first: read only this one's.
        let items = inner
            .objects
            .range((resource, String::new(), String::new())..)
            .take_while(|((r, _, _), _)| *r == resource)
            .filter(|((_, n, _), _)| ns.is_none_or(|ns| !resource.namespaced() || n == ns))
            .map(|(_, v)| v.clone())
            .collect();
        Ok((items, inner.rv))
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
        self.update_with(Wait::Committed, resource, ns, name, change)
    }

    /// [`Store::update`], waiting for the commit or not: `change` runs before this returns
    /// either way, on the newest object.
    pub(crate) fn update_with(
        &self,
        wait: Wait,
        resource: Resource,
        ns: &str,
        name: &str,
        change: impl FnOnce(&Value) -> ApiResult<Option<Value>>,
    ) -> ApiResult<Value> {
        let key = Self::key(resource, ns, name);
        self.change(wait, |p| {
            let old = p.current(&key)?.ok_or_else(|| ApiError::not_found(resource, name))?;
            // What is answered unchanged must be committed too.
            let old_rv = object_rv(&old).unwrap_or_default();
            let Some(mut new) = change(&old)? else {
                return Ok(((*old).clone(), old_rv));
            };
            for field in ["namespace", "name", "uid", "creationTimestamp"] {
                set_meta(&mut new, field, old["metadata"][field].clone());
            }
            set_meta(&mut new, "resourceVersion", old["metadata"]["resourceVersion"].clone());
            if new == *old {
                return Ok((new, old_rv));
            }
            let rv = p.rv + 1;
            set_meta(&mut new, "resourceVersion", Value::String(rv.to_string()));
            let new = Arc::new(new);
            p.push(key, resource, ChangeKind::Modified, new.clone());
            Ok(((*new).clone(), rv))
        })
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
        self.delete_with(Wait::Committed, resource, ns, name, wanted)
    }

    /// [`Store::delete_if`], waiting for the commit or not.
    pub(crate) fn delete_with(
        &self,
        wait: Wait,
        resource: Resource,
        ns: &str,
        name: &str,
        wanted: impl FnOnce(&Value) -> bool,
    ) -> ApiResult<Value> {
        let key = Self::key(resource, ns, name);
        self.change(wait, |p| {
            let Some(old) = p.current(&key)?.filter(|old| wanted(old)) else {
                return Err(ApiError::not_found(resource, name));
            };
            let rv = p.rv + 1;
            let mut gone = (*old).clone();
            set_meta(&mut gone, "resourceVersion", Value::String(rv.to_string()));
            let gone = Arc::new(gone);
            p.push(key, resource, ChangeKind::Deleted, gone.clone());
            Ok(((*gone).clone(), rv))
        })
    }

    /// Whether the last commit succeeded; why not otherwise. A failing store tries again every
    /// [`RETRY`] while nothing is queued.
    pub fn health(&self) -> Result<(), String> {
        lock(&self.shared.pending).failing.as_ref().map_or(Ok(()), |f| Err(f.last.clone()))
    }

    /// Waits for the next time commits work again after failing, and gives how long they
    /// failed and why. Each outage is given once; it has ended, so what its reader records
    /// in the store is committed (unless commits fail again).
    pub async fn outage_ended(&self) -> Outage {
        loop {
            if let Some(outage) = lock(&self.shared.pending).ended.pop_front() {
                return outage;
            }
            // A permit is kept for an outage ended after the look above.
            self.shared.outage_ended.notified().await;
        }
    }

    /// Waits until every change made so far is committed or has failed; fails when the newest
    /// one (and so the commit that carried it) failed.
    pub fn flush(&self) -> ApiResult<()> {
        self.change(Wait::Committed, |p| Ok(((), p.rv)))
    }

    /// Starts a watch: the changes after `from` still kept (none when `from` is `None`), and
    /// a receiver of every later change, with nothing lost in between.
    pub fn watch(&self, from: Option<u64>) -> ApiResult<(Vec<Change>, broadcast::Receiver<Change>)> {
        let inner = self.shared.lock_inner();
        let rx = self.shared.changes.subscribe();
        let Some(from) = from else { return Ok((vec![], rx)) };
        if let Some(oldest) = inner.history.front()
            && from + 1 < oldest.rv
        {
            return Err(ApiError::expired(from, oldest.rv - 1));
        }
        Ok((inner.history.iter().filter(|c| c.rv > from).cloned().collect(), rx))
    }

    pub fn resource_version(&self) -> u64 {
        self.shared.lock_inner().rv
    }
}

impl Pending {
    /// The newest object under `key`, queued changes made; an event of a store on disk is
    /// read from it unless a queued change has it.
    fn current(&self, key: &Key) -> ApiResult<Option<Arc<Value>>> {
        let (resource, ns, name) = key;
        match read_on_disk(&self.disk, *resource) {
            None => Ok(self.objects.get(key).cloned()),
            Some(disk) => match self.events.get(key) {
                Some((_, queued)) => Ok(queued.clone()),
                None => Ok(disk.event(ns, name).map_err(internal)?.map(Arc::new)),
            },
        }
    }

    /// Makes a change at the next resourceVersion and queues it for the writer.
    fn push(&mut self, key: Key, resource: Resource, kind: ChangeKind, object: Arc<Value>) {
        self.rv += 1;
        let now = (kind != ChangeKind::Deleted).then(|| object.clone());
        if read_on_disk(&self.disk, resource).is_some() {
            self.events.insert(key.clone(), (self.rv, now));
        } else {
            match now {
                None => self.objects.remove(&key),
                Some(now) => self.objects.insert(key.clone(), now),
            };
        }
        self.queue.push(Write { key, change: Change { rv: self.rv, resource, kind, object } });
    }
}

impl Shared {
    /// The writer: commits what has queued up, in one transaction, until the store is dropped;
    /// while commits fail, tries an empty one every [`RETRY`] when nothing is queued.
    fn write_until_closed(&self, mut disk: Disk) {
        loop {
            let mut pending = lock(&self.pending);
            while pending.queue.is_empty() && !pending.closing {
                if pending.failing.is_none() {
                    pending = self.queued.wait(pending).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                let (p, waited) = self.queued.wait_timeout(pending, RETRY).unwrap_or_else(|e| e.into_inner());
                pending = p;
                if waited.timed_out() {
                    break;
                }
            }
            let batch = std::mem::take(&mut pending.queue);
            let (closing, rv) = (pending.closing, pending.rv);
            drop(pending);
            if !batch.is_empty() {
                self.commit(&mut disk, batch);
            } else if !closing {
                let tried = disk.commit(rv, self.clock.now(), std::iter::empty());
                self.health_after(&mut disk, tried);
            }
            if closing && lock(&self.pending).queue.is_empty() {
                return;
            }
        }
    }

    /// Writes `batch` to disk, then makes it visible; on a failure, forgets it and every
    /// change queued since (made on top of it) and tells their writers.
    fn commit(&self, disk: &mut Disk, batch: Vec<Write>) {
        let last = batch.last().map_or(0, |w| w.change.rv);
        let written = disk.commit(
            last,
            self.clock.now(),
            batch.iter().map(|w| {
                let (resource, ns, name) = &w.key;
                let obj = (w.change.kind != ChangeKind::Deleted).then_some(&*w.change.object);
                (*resource, ns.as_str(), name.as_str(), obj)
            }),
        );
        match self.health_after(disk, written) {
            None => {
                self.publish(batch);
                let mut pending = lock(&self.pending);
                pending.settled = last;
                // Committed: read from the disk from now on, unless changed again since.
                pending.events.retain(|_, (rv, _)| *rv > last);
            }
            Some(e) => {
                tracing::error!(%e, "the local API's store could not commit; its changes are dropped");
                let mut pending = lock(&self.pending);
                let inner = self.lock_inner();
                let first = batch.first().map_or(last, |w| w.change.rv);
                pending.queue.clear();
                pending.objects = inner.objects.clone();
                pending.events.clear();
                if pending.failures.len() == FAILURES_KEPT {
                    pending.failures.pop_front();
                }
                let upto = pending.rv;
                if let Some(failing) = &mut pending.failing {
                    failing.refused += upto + 1 - first;
                }
                pending.failures.push_back((first..=upto, e));
                pending.settled = upto;
            }
        }
        self.settled.notify_all();
    }

    /// Records how a commit went for [`Store::health`], and returns the failure recorded; after
    /// a failure the database is opened again, which redb needs before it takes another
    /// transaction. The first commit that works after failures ends an outage, kept for
    /// [`Store::outage_ended`].
    fn health_after(&self, disk: &mut Disk, written: Result<(), DiskError>) -> Option<String> {
        let failed = written.err().map(|e| {
            if let Err(e) = disk.reopen() {
                tracing::debug!(%e, "the local API's store cannot be opened again yet");
            }
            e.to_string()
        });
        let now = self.clock.now();
        let mut pending = lock(&self.pending);
        match (pending.failing.take(), &failed) {
            (Some(mut failing), Some(e)) => {
                failing.last.clone_from(e);
                pending.failing = Some(failing);
            }
            (None, Some(e)) => {
                pending.failing = Some(Failing { since: now, first: e.clone(), last: e.clone(), refused: 0 })
            }
            (Some(Failing { since, first, refused, .. }), None) => {
                tracing::warn!("the local API's store commits again");
                if pending.ended.len() == OUTAGES_KEPT {
                    pending.ended.pop_front();
                }
                pending.ended.push_back(Outage { from: since, to: now, refused, error: first });
                self.outage_ended.notify_one();
            }
            (None, None) => {}
        }
        failed
    }

    /// Taken after the write side when both are held.
    fn lock_inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Makes committed changes visible: to readers, to the history, to watches.
    fn publish(&self, batch: Vec<Write>) {
        let mut inner = self.lock_inner();
        for Write { key, change } in batch {
            inner.rv = change.rv;
            if read_on_disk(&self.disk, change.resource).is_none() {
                match change.kind {
                    ChangeKind::Deleted => inner.objects.remove(&key),
                    _ => inner.objects.insert(key, change.object.clone()),
                };
            }
            if inner.history.len() == HISTORY {
                inner.history.pop_front();
            }
            inner.history.push_back(change.clone());
            // Nobody watching is fine.
            let _ = self.changes.send(change);
        }
    }
}

/// The disk `resource` is read from rather than kept in memory: a store's disk, for events.
fn read_on_disk(disk: &Option<Reader>, resource: Resource) -> Option<&Reader> {
    disk.as_ref().filter(|_| resource == Resource::Events)
}

/// A disk that cannot be read, as the API answers it.
fn internal(e: DiskError) -> ApiError {
    ApiError::internal(e.to_string())
}

/// Each of `rows` parsed, or why it could not be read.
pub(crate) fn parsed_events(rows: EventRows) -> impl Iterator<Item = ApiResult<Value>> {
    rows.map(|row| {
        let bytes = row.map_err(internal)?;
        serde_json::from_slice(&bytes).map_err(|e| ApiError::internal(e.to_string()))
    })
}

/// Runs `wait`, which blocks until the writer commits, without holding up the other tasks of
/// the runtime worker it may be called on (an API request waits for its commit, as the API
/// server's waits for etcd's).
fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
        // A runtime of one thread has no other worker to hand its tasks to.
        _ => wait(),
    }
}

impl Drop for Store {
    /// What is queued is committed before the store goes.
    fn drop(&mut self) {
        lock(&self.shared.pending).closing = true;
        self.shared.queued.notify_one();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
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

    /// A full disk fails the API's writes (500, nothing of them kept) and the store's health;
    /// once space returns the writer finds out by itself, writes work again, and the outage
    /// is given once, with the changes it refused and its first failure.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_full_disk_fails_writes_and_health_until_space_returns() {
        use futures_util::FutureExt;
        let (store, full) = Store::filling(Clock::new());
        store.create(Resource::Pods, pod("a")).unwrap();
        assert_eq!(store.health(), Ok(()));
        assert_eq!(store.outage_ended().now_or_never(), None);
        full.store(true, std::sync::atomic::Ordering::Relaxed);
        let e = store.create(Resource::Pods, pod("b")).unwrap_err();
        assert_eq!((e.code, e.reason), (500, "InternalError"));
        assert!(store.health().is_err_and(|why| why.contains("the local API's store memory")));
        assert_eq!(store.get(Resource::Pods, "default", "b").unwrap_err().reason, "NotFound");
        store.create_with(Wait::Queued, Resource::ConfigMaps, pod("c")).unwrap();
        // An event's name is looked up in the file, which is not open again while it is full.
        assert_eq!(store.create_with(Wait::Queued, Resource::Events, pod("e")).unwrap_err().code, 500);
        assert_eq!(store.flush().unwrap_err().code, 500, "the queued configmap's commit failed");
        assert_eq!(store.outage_ended().now_or_never(), None);
        full.store(false, std::sync::atomic::Ordering::Relaxed);
        for _ in 0..100 {
            if store.health().is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(store.health(), Ok(()));
        let outage = store.outage_ended().now_or_never().expect("the outage, once it has ended");
        assert!(outage.from <= outage.to);
        assert_eq!(outage.refused, 2);
        assert!(outage.error.contains("the local API's store memory"), "{}", outage.error);
        store.create(Resource::Pods, pod("b")).unwrap();
        assert_eq!(store.list(Resource::Pods, None).0.len(), 2);
        assert_eq!(store.outage_ended().now_or_never(), None);
    }

    /// A store on disk in a directory of its own, removed when the test ends.
    struct OnDisk(std::path::PathBuf);

    impl OnDisk {
        fn new(test: &str) -> OnDisk {
            let dir = std::env::temp_dir().join(format!("pw-store-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            OnDisk(dir)
        }

        fn open(&self) -> Store {
            Store::open(Clock::new(), &self.0.join("store.redb")).unwrap()
        }
    }

    impl Drop for OnDisk {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The API's writes are visible (and on disk) when they return; the node's queued
    /// reports once the writer has committed them, and they survive the store too. On a
    /// runtime of many threads, as `serve`'s, a write waits off the worker's other tasks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn queued_changes_are_committed_in_order_and_kept() {
        let dir = OnDisk::new("queued");
        let rv = {
            let store = dir.open();
            let a = store.create(Resource::Pods, pod("a")).unwrap();
            assert_eq!(store.get(Resource::Pods, "default", "a").unwrap().as_ref(), &a);
            let (_, mut rx) = store.watch(Some(object_rv(&a).unwrap())).unwrap();
            for i in 0..20 {
                store
                    .update_with(Wait::Queued, Resource::Pods, "default", "a", |old| {
                        let mut new = old.clone();
                        new["status"] = json!({"n": i});
                        Ok(Some(new))
                    })
                    .unwrap();
            }
            store.create_with(Wait::Queued, Resource::Events, pod("e")).unwrap();
            // Made on the write side at once: a second create of the same name is refused.
            assert_eq!(
                store.create_with(Wait::Queued, Resource::Events, pod("e")).unwrap_err().reason,
                "AlreadyExists"
            );
            store.flush().unwrap();
            assert_eq!(store.get(Resource::Pods, "default", "a").unwrap()["status"], json!({"n": 19}));
            let mut seen = vec![];
            for _ in 0..21 {
                seen.push(rx.recv().await.unwrap().rv);
            }
            assert!(seen.windows(2).all(|w| w[1] == w[0] + 1), "{seen:?}");
            store.resource_version()
        };
        let store = dir.open();
        assert_eq!(store.resource_version(), rv);
        assert_eq!(store.get(Resource::Pods, "default", "a").unwrap()["status"], json!({"n": 19}));
        assert!(store.get(Resource::Events, "default", "e").is_ok());
    }

    /// Writers at once share commits, and each still sees its own write when it returns;
    /// watches see every change once, in resourceVersion order.
    #[tokio::test]
    async fn writers_at_once_each_see_their_write_and_watches_see_all_in_order() {
        let dir = OnDisk::new("writers");
        let store = Arc::new(dir.open());
        let (_, mut rx) = store.watch(Some(store.resource_version())).unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..25 {
                        let name = format!("p-{t}-{i}");
                        let made = store.create(Resource::Pods, pod(&name)).unwrap();
                        let visible = store.get(Resource::Pods, "default", &name).unwrap();
                        assert_eq!(object_rv(&visible), object_rv(&made));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut last = 0;
        for _ in 0..200 {
            let c = rx.recv().await.unwrap();
            assert!(c.rv > last);
            last = c.rv;
        }
        assert_eq!(last, store.resource_version());
        assert_eq!(store.list(Resource::Pods, None).0.len(), 200);
    }

    fn event(name: &str, seen: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "reason": "Started", "lastTimestamp": seen})
    }

    /// A store on disk keeps no event in memory: the write side sees a queued one at once, the
    /// API once it is committed, read from the file, and again after the store is opened again;
    /// the events last seen before a time are found by their index, also after they change.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn events_are_read_from_the_disk_and_found_by_when_they_were_last_seen() {
        let dir = OnDisk::new("events");
        {
            let store = dir.open();
            store.create_with(Wait::Queued, Resource::Events, event("a", "2026-11-28T10:00:00Z")).unwrap();
            let again = store.create_with(Wait::Queued, Resource::Events, event("a", "2026-11-28T10:00:00Z"));
            assert_eq!(again.unwrap_err().reason, "AlreadyExists");
            store.create(Resource::Events, event("b", "2026-11-28T10:05:00Z")).unwrap();
            store.create(Resource::Pods, pod("p")).unwrap();
            assert_eq!(store.get(Resource::Events, "default", "a").unwrap()["reason"], "Started");
            let objects: Vec<Resource> = store.shared.lock_inner().objects.keys().map(|k| k.0).collect();
            assert_eq!(objects, [Resource::Pods]);
            let t = |s: &str| s.parse::<Timestamp>().unwrap();
            assert_eq!(store.events_seen_before(t("2026-11-28T10:01:00Z")).unwrap(), [("default".into(), "a".into())]);
            // Seen again: out of the old place in the index, into the new.
            store
                .update(Resource::Events, "default", "a", |old| {
                    let mut new = old.clone();
                    new["lastTimestamp"] = json!("2026-11-28T10:10:00Z");
                    Ok(Some(new))
                })
                .unwrap();
            assert_eq!(store.events_seen_before(t("2026-11-28T10:06:00Z")).unwrap(), [("default".into(), "b".into())]);
            store.delete(Resource::Events, "default", "b").unwrap();
            assert_eq!(store.events_seen_before(t("2026-11-28T11:00:00Z")).unwrap(), [("default".into(), "a".into())]);
        }
        let store = dir.open();
        let (events, rv) = store.list(Resource::Events, Some("default"));
        assert_eq!(
            events.iter().map(|e| e["lastTimestamp"].clone()).collect::<Vec<_>>(),
            [json!("2026-11-28T10:10:00Z")]
        );
        assert_eq!(rv, store.resource_version());
        assert!(store.list(Resource::Events, Some("defaul")).0.is_empty());
        assert_eq!(store.list(Resource::Pods, None).0.len(), 1);
    }

    #[test]
    fn an_unchanged_update_keeps_the_resource_version() {
        let store = Store::new(Clock::new());
        let a = store.create(Resource::Pods, pod("a")).unwrap();
        let same = store.update(Resource::Pods, "default", "a", |old| Ok(Some(old.clone()))).unwrap();
        assert_eq!(object_rv(&same), object_rv(&a));
    }
}
