//! The local API's objects on disk: an embedded redb database under the root directory, written
//! in one transaction per group of changes (those queued while the previous one committed),
//! before they are visible (so before any pod worker can act on them), and read back when
//! `serve` starts again.
//!
//! Events are the exception: an hour of them (some 80,000 on a busy node) is read from the file
//! whenever they are asked for rather than held in memory (but for the store's recent changes,
//! kept for watches), with an index of when each was last seen so that expiring them reads only
//! those that have expired.
//!
//! redb rather than SQLite (measurements in the restart-safety notes): both survive a SIGKILL at
//! any instant with every acknowledged commit; redb builds in a quarter of the time on two
//! cores, adds less to the binary, and needs no C toolchain, for 0.85 ms per durable commit
//! against SQLite's 0.35, well under a CRI call either way.

use crate::resources::Resource;
use jiff::Timestamp;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// `plural/namespace/name` → the object as JSON.
const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
/// `rv` → the last resourceVersion given out.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const RV: &str = "rv";
/// Events by when they were last seen: (seconds since the epoch, `namespace/name`).
const EVENTS_SEEN: TableDefinition<(i64, &str), ()> = TableDefinition::new("events-seen");
/// `namespace/name` → the event's entry in [`EVENTS_SEEN`], to find it again when the event
/// changes or goes.
const EVENT_SEEN_AT: TableDefinition<&str, i64> = TableDefinition::new("event-seen-at");
/// Where events' keys start in [`OBJECTS`], and the first key after them.
const EVENTS_FROM: &str = "events/";
const EVENTS_UNTIL: &str = "events0";
/// redb's page cache, its reads and its write buffer. Every object but the events is read once,
/// at the start, into the store's memory; events are read through this cache, whose pages an
/// hour of them (some 100 MB of file) would not fit anyway. redb's default (1 GiB) would keep
/// the file's pages in `serve`'s memory, up to the whole file.
const CACHE_BYTES: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
#[error("the local API's store {path}: {error}")]
pub struct DiskError {
    path: String,
    error: String,
}

/// Opens the database: again after an I/O error, which redb answers every transaction after
/// with until the database is closed and opened again.
type Opener = Box<dyn Fn() -> Result<Database, redb::DatabaseError> + Send>;

/// The database file, open for the daemon's life (opened again after an I/O error); written
/// by the store's writer alone.
pub struct Disk {
    reader: Reader,
    open: Opener,
}

/// Reads what is committed, from any thread, beside the writer.
#[derive(Clone)]
pub struct Reader {
    /// None while opening it again fails. A reader holds the database only while it reads (a
    /// page of a list, not the list): opening it again fails while one does, and is retried.
    db: Arc<Mutex<Option<Arc<Database>>>>,
    path: String,
}

/// What a previous run left: every object but the events, which stay on disk.
#[derive(Debug, Default)]
pub struct Loaded {
    pub rv: u64,
    pub objects: Vec<(Resource, Value)>,
}

fn key(resource: Resource, ns: &str, name: &str) -> String {
    format!("{}/{ns}/{name}", resource.plural())
}

/// When an Event object was last seen: its `lastTimestamp`, else its `eventTime`, else its
/// `firstTimestamp`, else when it was made. Its TTL counts from then.
pub fn event_last_seen(event: &Value) -> Option<Timestamp> {
    ["lastTimestamp", "eventTime", "firstTimestamp"]
        .iter()
        .map(|f| &event[*f])
        .chain([&event["metadata"]["creationTimestamp"]])
        .find_map(|t| t.as_str().and_then(|t| t.parse::<Timestamp>().ok()))
}

/// Whether the event was last seen before `before`; one that does not say (never made by the
/// store, which stamps every object) counts as seen long ago.
pub fn event_seen_before(event: &Value, before: Timestamp) -> bool {
    event_last_seen(event).is_none_or(|t| t < before)
}

/// An event's entry in [`EVENTS_SEEN`]: when it was last seen, or else `written`.
fn seen_second(event: &Value, written: Timestamp) -> i64 {
    event_last_seen(event).unwrap_or(written).as_second()
}

/// Moves the event `id` (`namespace/name`) in the index to `seen`, or out of it (`None`).
fn index_event(
    seen_at: &mut redb::Table<&str, i64>,
    by_seen: &mut redb::Table<(i64, &str), ()>,
    id: &str,
    seen: Option<i64>,
) -> Result<(), redb::Error> {
    let old = seen_at.remove(id)?.map(|t| t.value());
    if let Some(old) = old {
        by_seen.remove((old, id))?;
    }
    if let Some(seen) = seen {
        seen_at.insert(id, seen)?;
        by_seen.insert((seen, id), ())?;
    }
    Ok(())
}

impl Disk {
    /// Opens (or creates) the database and reads every object in it. An object whose resource
    /// this version does not serve, or whose JSON does not parse, is an error: starting without
    /// it would lose it at the next write.
    pub fn open(path: &Path) -> Result<(Disk, Loaded), DiskError> {
        let file = path.to_path_buf();
        let open = move || redb::Builder::new().set_cache_size(CACHE_BYTES).create(&file);
        Disk::open_with(path.display().to_string(), Box::new(open))
    }

    /// [`Disk::open`] with what opens the database (`path` names it in errors).
    fn open_with(path: String, open: Opener) -> Result<(Disk, Loaded), DiskError> {
        let err = |e: &dyn std::fmt::Display| DiskError { path: path.clone(), error: e.to_string() };
        let db = open().map_err(|e| err(&e))?;
        // Creates the tables on first use, so that reading finds them.
        let tx = db.begin_write().map_err(|e| err(&e))?;
        tx.open_table(OBJECTS).map_err(|e| err(&e))?;
        tx.open_table(META).map_err(|e| err(&e))?;
        tx.open_table(EVENTS_SEEN).map_err(|e| err(&e))?;
        tx.open_table(EVENT_SEEN_AT).map_err(|e| err(&e))?;
        tx.commit().map_err(|e| err(&e))?;

        let mut loaded = Loaded::default();
        // Events a version before the index wrote, to index now.
        let mut unindexed = vec![];
        let tx = db.begin_read().map_err(|e| err(&e))?;
        let meta = tx.open_table(META).map_err(|e| err(&e))?;
        loaded.rv = meta.get(RV).map_err(|e| err(&e))?.map(|v| v.value()).unwrap_or(0);
        let objects = tx.open_table(OBJECTS).map_err(|e| err(&e))?;
        let seen_at = tx.open_table(EVENT_SEEN_AT).map_err(|e| err(&e))?;
        for row in objects.iter().map_err(|e| err(&e))? {
            let (k, v) = row.map_err(|e| err(&e))?;
            let k = k.value();
            if let Some(id) = k.strip_prefix(EVENTS_FROM) {
                if seen_at.get(id).map_err(|e| err(&e))?.is_none() {
                    let event: Value = serde_json::from_slice(v.value()).map_err(|e| err(&format!("{k}: {e}")))?;
                    unindexed.push((id.to_string(), seen_second(&event, Timestamp::UNIX_EPOCH)));
                }
                continue;
            }
            let plural = k.split('/').next().unwrap_or_default();
            let resource = Resource::ALL
                .into_iter()
                .find(|r| r.plural() == plural)
                .ok_or_else(|| err(&format!("{k}: no such resource \"{plural}\"")))?;
            let obj: Value = serde_json::from_slice(v.value()).map_err(|e| err(&format!("{k}: {e}")))?;
            loaded.objects.push((resource, obj));
        }
        drop((objects, seen_at, meta, tx));
        if !unindexed.is_empty() {
            let tx = db.begin_write().map_err(|e| err(&e))?;
            {
                let mut seen_at = tx.open_table(EVENT_SEEN_AT).map_err(|e| err(&e))?;
                let mut by_seen = tx.open_table(EVENTS_SEEN).map_err(|e| err(&e))?;
                for (id, seen) in &unindexed {
                    index_event(&mut seen_at, &mut by_seen, id, Some(*seen)).map_err(|e| err(&e))?;
                }
            }
            tx.commit().map_err(|e| err(&e))?;
        }
        let reader = Reader { db: Arc::new(Mutex::new(Some(Arc::new(db)))), path };
        Ok((Disk { reader, open }, loaded))
    }

    /// What reads the committed objects beside this writer.
    pub fn reader(&self) -> Reader {
        self.reader.clone()
    }

    /// Closes the database and opens it again (redb repairs what a failed commit left): after
    /// an I/O error, a full disk say, it refuses every transaction until then.
    pub fn reopen(&mut self) -> Result<(), DiskError> {
        // Closed first: the file is locked while it is open (a reader still reading keeps it
        // open, and this fails until the next try). Opened without holding the slot, which
        // readers would wait on for as long as redb repairs the file.
        *self.reader.slot() = None;
        let db = (self.open)().map_err(|e| self.err(&e))?;
        *self.reader.slot() = Some(Arc::new(db));
        Ok(())
    }

    /// Writes each change (an object under its key, or its removal: `None`), and `rv` as the
    /// last resourceVersion, durably in one transaction: one sync for them all. `now` is when
    /// an event that does not say when it was seen counts as seen.
    pub fn commit<'a>(
        &self,
        rv: u64,
        now: Timestamp,
        changes: impl IntoIterator<Item = (Resource, &'a str, &'a str, Option<&'a Value>)>,
    ) -> Result<(), DiskError> {
        let db = self.reader.db()?;
        let tx = db.begin_write().map_err(|e| self.err(&e))?;
        {
            let mut objects = tx.open_table(OBJECTS).map_err(|e| self.err(&e))?;
            let mut seen_at = tx.open_table(EVENT_SEEN_AT).map_err(|e| self.err(&e))?;
            let mut by_seen = tx.open_table(EVENTS_SEEN).map_err(|e| self.err(&e))?;
            for (resource, ns, name, obj) in changes {
                let key = key(resource, ns, name);
                if resource == Resource::Events {
                    let seen = obj.map(|obj| seen_second(obj, now));
                    index_event(&mut seen_at, &mut by_seen, &format!("{ns}/{name}"), seen).map_err(|e| self.err(&e))?;
                }
                match obj {
                    Some(obj) => {
                        let bytes = serde_json::to_vec(obj).map_err(|e| self.err(&e))?;
                        objects.insert(key.as_str(), bytes.as_slice()).map_err(|e| self.err(&e))?;
                    }
                    None => {
                        objects.remove(key.as_str()).map_err(|e| self.err(&e))?;
                    }
                }
            }
            let mut meta = tx.open_table(META).map_err(|e| self.err(&e))?;
            meta.insert(RV, rv).map_err(|e| self.err(&e))?;
        }
        tx.commit().map_err(|e| self.err(&e))
    }

    fn err(&self, e: &dyn std::fmt::Display) -> DiskError {
        self.reader.err(e)
    }
}

/// How many events one read of the file takes for a list.
const EVENTS_A_READ: usize = 256;

/// The events of a namespace (or all), as JSON, read from the file a page at a time, each page
/// in a read transaction of its own: a list that takes long (a slow client) neither holds the
/// file open, which opening it again after an I/O error needs, nor keeps redb from reusing the
/// pages freed meanwhile. An event changed between pages is listed as it is then, with a
/// resourceVersion past the list's, which a watch from the list's resourceVersion sends again.
pub struct EventRows {
    /// The resourceVersion of the first page.
    pub rv: u64,
    reader: Reader,
    /// The last key read, or where to start.
    after: std::ops::Bound<String>,
    until: String,
    page: std::collections::VecDeque<Vec<u8>>,
    /// The last page has been read.
    done: bool,
}

impl EventRows {
    /// Reads the next page; returns the resourceVersion it was read at.
    fn read_page(&mut self) -> Result<u64, DiskError> {
        let err = |e: &dyn std::fmt::Display| self.reader.err(e);
        let db = self.reader.db()?;
        let tx = db.begin_read().map_err(|e| err(&e))?;
        let rv = tx.open_table(META).map_err(|e| err(&e))?.get(RV).map_err(|e| err(&e))?;
        let rv = rv.map(|v| v.value()).unwrap_or(0);
        let objects = tx.open_table(OBJECTS).map_err(|e| err(&e))?;
        let after = self.after.as_ref().map(String::as_str);
        let rows = objects.range::<&str>((after, std::ops::Bound::Excluded(self.until.as_str())));
        let mut last = None;
        for row in rows.map_err(|e| err(&e))?.take(EVENTS_A_READ) {
            let (k, v) = row.map_err(|e| err(&e))?;
            self.page.push_back(v.value().to_vec());
            last = Some(k.value().to_string());
        }
        self.done = self.page.len() < EVENTS_A_READ;
        if let Some(last) = last {
            self.after = std::ops::Bound::Excluded(last);
        }
        Ok(rv)
    }
}

impl Iterator for EventRows {
    type Item = Result<Vec<u8>, DiskError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.page.is_empty()
            && !self.done
            && let Err(e) = self.read_page()
        {
            self.done = true;
            return Some(Err(e));
        }
        self.page.pop_front().map(Ok)
    }
}

impl Reader {
    /// The database, also after a holder of the slot panicked: it is whole either way.
    fn slot(&self) -> MutexGuard<'_, Option<Arc<Database>>> {
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn db(&self) -> Result<Arc<Database>, DiskError> {
        self.slot().clone().ok_or_else(|| self.err(&"not open again yet after an I/O error"))
    }

    fn err(&self, e: &dyn std::fmt::Display) -> DiskError {
        DiskError { path: self.path.clone(), error: e.to_string() }
    }

    /// The committed event `namespace/name`.
    pub fn event(&self, ns: &str, name: &str) -> Result<Option<Value>, DiskError> {
        let db = self.db()?;
        let tx = db.begin_read().map_err(|e| self.err(&e))?;
        let objects = tx.open_table(OBJECTS).map_err(|e| self.err(&e))?;
        let key = key(Resource::Events, ns, name);
        let Some(bytes) = objects.get(key.as_str()).map_err(|e| self.err(&e))? else { return Ok(None) };
        serde_json::from_slice(bytes.value()).map(Some).map_err(|e| self.err(&format!("{key}: {e}")))
    }

    /// The committed events of `ns` (or of all namespaces), in key order, read as they are
    /// iterated; the first page is read now.
    pub fn events(&self, ns: Option<&str>) -> Result<EventRows, DiskError> {
        let (from, until) = match ns {
            Some(ns) => namespace_events(ns),
            None => (EVENTS_FROM.to_string(), EVENTS_UNTIL.to_string()),
        };
        let after = std::ops::Bound::Included(from);
        let mut rows = EventRows { rv: 0, reader: self.clone(), after, until, page: Default::default(), done: false };
        rows.rv = rows.read_page()?;
        Ok(rows)
    }

    /// The names of the committed events of `ns`, read from their keys: none is parsed.
    pub fn event_names(&self, ns: &str) -> Result<Vec<String>, DiskError> {
        let db = self.db()?;
        let tx = db.begin_read().map_err(|e| self.err(&e))?;
        let objects = tx.open_table(OBJECTS).map_err(|e| self.err(&e))?;
        let (from, until) = namespace_events(ns);
        let mut names = vec![];
        for row in objects.range(from.as_str()..until.as_str()).map_err(|e| self.err(&e))? {
            let (k, _) = row.map_err(|e| self.err(&e))?;
            names.push(k.value()[from.len()..].to_string());
        }
        Ok(names)
    }

    /// The events last seen before `before` (or written then, for those that do not say), as
    /// (namespace, name), oldest first.
    pub fn events_seen_before(&self, before: Timestamp) -> Result<Vec<(String, String)>, DiskError> {
        let db = self.db()?;
        let tx = db.begin_read().map_err(|e| self.err(&e))?;
        let by_seen = tx.open_table(EVENTS_SEEN).map_err(|e| self.err(&e))?;
        let mut gone = vec![];
        for row in by_seen.range((i64::MIN, "")..(before.as_second(), "")).map_err(|e| self.err(&e))? {
            let (k, _) = row.map_err(|e| self.err(&e))?;
            let (_, id) = k.value();
            if let Some((ns, name)) = id.split_once('/') {
                gone.push((ns.to_string(), name.to_string()));
            }
        }
        Ok(gone)
    }
}

/// Where the keys of `ns`'s events begin, and the key just past them: `events/<ns>/` to
/// `events/<ns>0` ('0' follows '/').
fn namespace_events(ns: &str) -> (String, String) {
    (format!("{EVENTS_FROM}{ns}/"), format!("{EVENTS_FROM}{ns}0"))
}

/// One change per transaction, as the tests write them.
#[cfg(test)]
impl Disk {
    fn put(&self, rv: u64, resource: Resource, ns: &str, name: &str, obj: &Value) -> Result<(), DiskError> {
        self.commit(rv, Timestamp::UNIX_EPOCH, [(resource, ns, name, Some(obj))])
    }

    fn remove(&self, rv: u64, resource: Resource, ns: &str, name: &str) -> Result<(), DiskError> {
        self.commit(rv, Timestamp::UNIX_EPOCH, [(resource, ns, name, None)])
    }
}

/// A disk that fills up on demand, for the tests of the store's failures.
#[cfg(test)]
pub(crate) mod filling {
    use super::{Disk, Opener};
    use redb::StorageBackend;
    use redb::backends::InMemoryBackend;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A database in memory whose writes fail as on a full disk while `full` is set.
    #[derive(Debug)]
    struct Filling {
        inner: Arc<InMemoryBackend>,
        full: Arc<AtomicBool>,
    }

    impl Filling {
        fn room(&self) -> std::io::Result<()> {
            match self.full.load(Ordering::Relaxed) {
                true => Err(std::io::Error::from(std::io::ErrorKind::StorageFull)),
                false => Ok(()),
            }
        }
    }

    impl StorageBackend for Filling {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            self.room()?;
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.room()?;
            self.inner.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.room()?;
            self.inner.write(offset, data)
        }
    }

    /// The memory `backend`, never full.
    pub(crate) fn filling_backend(backend: &Arc<InMemoryBackend>) -> impl StorageBackend {
        Filling { inner: backend.clone(), full: Arc::default() }
    }

    pub(crate) fn opener(backend: &Arc<InMemoryBackend>, full: &Arc<AtomicBool>) -> Opener {
        let (backend, full) = (backend.clone(), full.clone());
        Box::new(move || {
            redb::Builder::new().create_with_backend(Filling { inner: backend.clone(), full: full.clone() })
        })
    }

    /// An empty database in memory, and the switch that makes its disk full.
    pub(crate) fn disk() -> (Disk, Arc<AtomicBool>) {
        let full = Arc::new(AtomicBool::new(false));
        let (disk, _) = Disk::open_with("memory".into(), opener(&Arc::new(InMemoryBackend::new()), &full))
            .expect("a database in memory");
        (disk, full)
    }
}

#[cfg(test)]
mod tests {
    use super::filling::{filling_backend, opener};
    use super::*;
    use redb::backends::InMemoryBackend;
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// The names of the objects a reopened `disk` reads, and its resourceVersion.
    fn stored(backend: &Arc<InMemoryBackend>) -> (u64, Vec<String>) {
        let (_, loaded) = Disk::open_with("memory".into(), opener(backend, &Arc::default())).unwrap();
        let mut names: Vec<String> = loaded.objects.iter().map(|(_, o)| o["metadata"]["name"].to_string()).collect();
        names.sort();
        (loaded.rv, names)
    }

    #[test]
    fn commits_resume_after_a_full_disk_once_the_database_is_open_again() {
        let (backend, full) = (Arc::new(InMemoryBackend::new()), Arc::new(AtomicBool::new(false)));
        let (mut disk, _) = Disk::open_with("memory".into(), opener(&backend, &full)).unwrap();
        let pod = |name: &str| json!({"metadata": {"name": name}});
        disk.put(1, Resource::Pods, "default", "a", &pod("a")).unwrap();
        full.store(true, Ordering::Relaxed);
        let e = disk.put(2, Resource::Pods, "default", "b", &pod("b")).unwrap_err();
        assert!(e.to_string().starts_with("the local API's store memory: "), "{e}");
        // Space is back, but redb refuses every transaction after an I/O error...
        full.store(false, Ordering::Relaxed);
        assert!(disk.put(3, Resource::Pods, "default", "c", &pod("c")).is_err());
        // ... until the database is opened again.
        disk.reopen().unwrap();
        disk.put(3, Resource::Pods, "default", "c", &pod("c")).unwrap();
        drop(disk);
        assert_eq!(stored(&backend), (3, vec!["\"a\"".to_string(), "\"c\"".to_string()]));
    }

    #[test]
    fn objects_and_the_resource_version_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("pw-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("store.redb");
        {
            let (disk, loaded) = Disk::open(&path).unwrap();
            assert_eq!((loaded.rv, loaded.objects.len()), (0, 0));
            disk.put(5, Resource::Pods, "default", "a", &json!({"metadata": {"name": "a"}})).unwrap();
            disk.put(6, Resource::ConfigMaps, "ns1", "c", &json!({"data": {"k": "v"}})).unwrap();
            disk.put(7, Resource::Pods, "default", "a", &json!({"metadata": {"name": "a", "labels": {"x": "y"}}}))
                .unwrap();
            disk.put(8, Resource::Namespaces, "", "ns1", &json!({"metadata": {"name": "ns1"}})).unwrap();
            disk.remove(9, Resource::ConfigMaps, "ns1", "c").unwrap();
        }
        let (_disk, loaded) = Disk::open(&path).unwrap();
        assert_eq!(loaded.rv, 9);
        let mut got: Vec<_> = loaded.objects.iter().map(|(r, o)| (r.plural(), o.to_string())).collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("namespaces", json!({"metadata": {"name": "ns1"}}).to_string()),
                ("pods", json!({"metadata": {"name": "a", "labels": {"x": "y"}}}).to_string()),
            ]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A file an earlier version wrote, with events and no index of them: indexed when opened,
    /// and its events are not read into memory.
    #[test]
    fn events_of_an_earlier_version_are_indexed_when_the_file_is_opened() {
        let backend = Arc::new(InMemoryBackend::new());
        {
            let db = redb::Builder::new().create_with_backend(filling_backend(&backend)).unwrap();
            let tx = db.begin_write().unwrap();
            {
                let mut objects = tx.open_table(OBJECTS).unwrap();
                let event = json!({"metadata": {"name": "e"}, "lastTimestamp": "2026-11-28T10:00:00Z"});
                objects.insert("events/default/e", serde_json::to_vec(&event).unwrap().as_slice()).unwrap();
                objects.insert("pods/default/p", br#"{"metadata":{"name":"p"}}"#.as_slice()).unwrap();
            }
            tx.commit().unwrap();
        }
        let (disk, loaded) = Disk::open_with("memory".into(), opener(&backend, &Arc::default())).unwrap();
        assert_eq!(loaded.objects.iter().map(|(r, _)| *r).collect::<Vec<_>>(), [Resource::Pods]);
        let reader = disk.reader();
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        assert!(reader.events_seen_before(t("2026-11-28T10:00:00Z")).unwrap().is_empty());
        assert_eq!(reader.events_seen_before(t("2026-11-28T10:00:01Z")).unwrap(), [("default".into(), "e".into())]);
        assert_eq!(reader.events(None).unwrap().count(), 1);
        assert_eq!(reader.events(Some("default")).unwrap().rv, 0);
    }

    #[test]
    fn the_page_cache_stays_small_while_the_file_grows() {
        let dir = std::env::temp_dir().join(format!("pw-disk-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("store.redb");
        let filler = "x".repeat(16 * 1024);
        {
            let (disk, _) = Disk::open(&path).unwrap();
            let names: Vec<String> = (0..4 * CACHE_BYTES / filler.len()).map(|i| format!("e{i}")).collect();
            let obj = json!({"message": filler});
            let made = names.iter().map(|n| (Resource::ConfigMaps, "default", n.as_str(), Some(&obj)));
            disk.commit(1, Timestamp::UNIX_EPOCH, made).unwrap();
        }
        // Reading the file back (four times the cache) leaves no more than the cache in
        // memory; redb's default cache would hold the whole file.
        let (disk, loaded) = Disk::open(&path).unwrap();
        assert_eq!(loaded.objects.len(), 4 * CACHE_BYTES / filler.len());
        assert!(std::fs::metadata(&path).unwrap().len() > 2 * CACHE_BYTES as u64);
        let stats = disk.reader.db().unwrap().cache_stats();
        assert!(stats.evictions() > 0 && stats.used_bytes() <= CACHE_BYTES, "{stats:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
