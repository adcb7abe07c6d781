//! What one image garbage collection does, decided without I/O from what the runtime shows:
//! the kubelet's `imagesInEvictionOrder`, `freeOldImages` and `freeSpace`
//! (`pkg/kubelet/images/image_gc_manager.go`).

use super::policy::ImageGcPolicy;
use jiff::{SignedDuration, Timestamp};
use podwright_runtime::{ImageFs, ListedImage};
use std::collections::{HashMap, HashSet};

/// What is remembered of one image between collections (the kubelet's `imageRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// When this process first saw the image.
    pub first_detected: Timestamp,
    /// When a container last used it, as far as this process saw.
    pub last_used: Option<Timestamp>,
}

/// The records of the images present, by image id.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Records(HashMap<String, Record>);

impl Records {
    /// The kubelet's `detectImages`: a new image is first detected `now`, an image in use was
    /// last used `now`, and an image no longer listed is forgotten.
    pub fn detect(&mut self, images: &[ListedImage], in_use: &InUse, now: Timestamp) {
        let present: HashSet<&str> = images.iter().map(|i| i.id.as_str()).collect();
        self.0.retain(|id, _| present.contains(id.as_str()));
        for image in images {
            let record = self.0.entry(image.id.clone()).or_insert(Record { first_detected: now, last_used: None });
            if in_use.uses(image) {
                record.last_used = Some(now);
            }
        }
    }

    pub fn get(&self, id: &str) -> Option<&Record> {
        self.0.get(id)
    }
}

/// The names and ids of the images the runtime's containers (in any state) use or the node is
/// about to use: an image any of whose names or its id is here is in use.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct InUse(HashSet<String>);

impl InUse {
    pub fn insert(&mut self, name_or_id: impl Into<String>) {
        let name = name_or_id.into();
        if !name.is_empty() {
            self.0.insert(name);
        }
    }

    pub fn uses(&self, image: &ListedImage) -> bool {
        std::iter::once(&image.id).chain(&image.repo_tags).chain(&image.repo_digests).any(|n| self.0.contains(n))
    }
}

/// Why an image is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Unused for longer than `imageMaximumGCAge`.
    Age,
    /// The image filesystem is at or over the high threshold.
    Space,
}

/// One image to remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub id: String,
    /// Its first tag, else its first digest, else its id: how events name it.
    pub name: String,
    pub size: u64,
    pub why: Why,
}

/// How much to free, when the image filesystem is at or over the high threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceNeed {
    /// Bytes to free to be down to the low threshold.
    pub needed: u64,
}

/// What one collection does.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The images to remove, in order: those past the maximum age, then least recently used
    /// first (never used before used, then first detected first) until enough is freed.
    pub remove: Vec<Removal>,
    /// Further images removable for space, in the same order: tried in turn when one of
    /// `remove` cannot be removed, as the kubelet goes on past a failed removal.
    pub spare: Vec<Removal>,
    /// `None`: usage is below the high threshold.
    pub space: Option<SpaceNeed>,
    /// The filesystem reports no capacity: nothing is removed for space (the kubelet's
    /// `InvalidDiskCapacity`).
    pub invalid_capacity: bool,
}

/// Decides one collection. `records` must have seen `images` (see [`Records::detect`]); `began`
/// is when this process started collecting: nothing goes for its age before the maximum age
/// has passed since then, since last uses before it are unknown. Without `fs` (the kubelet
/// reads the filesystem only once the old images are gone), only old images are chosen.
///
/// Never removed: an image in use, one the runtime pins, one without a record. For space, not
/// one first detected less than the minimum age ago either.
pub fn decide(
    images: &[ListedImage],
    in_use: &InUse,
    records: &Records,
    fs: Option<&ImageFs>,
    policy: &ImageGcPolicy,
    now: Timestamp,
    began: Timestamp,
) -> Decision {
    let since = |t: Timestamp| now.duration_since(t);
    let mut candidates: Vec<(&ListedImage, Record)> = images
        .iter()
        .filter(|i| !i.pinned && !in_use.uses(i))
        .filter_map(|i| Some((i, *records.get(&i.id)?)))
        .collect();
    candidates.sort_by(|(a, ra), (b, rb)| {
        (ra.last_used, ra.first_detected, &a.id).cmp(&(rb.last_used, rb.first_detected, &b.id))
    });
    let removal = |image: &ListedImage, why| Removal {
        id: image.id.clone(),
        name: image.repo_tags.first().or(image.repo_digests.first()).unwrap_or(&image.id).clone(),
        size: image.size,
        why,
    };

    let mut decision = Decision::default();
    let max_age = SignedDuration::try_from(policy.max_age).unwrap_or(SignedDuration::MAX);
    if !max_age.is_zero() && since(began) > max_age {
        candidates.retain(|(image, record)| {
            // Never used: unused since it was first seen.
            let old = since(record.last_used.unwrap_or(record.first_detected)) > max_age;
            if old {
                decision.remove.push(removal(image, Why::Age));
            }
            !old
        });
    }

    let Some(fs) = fs else { return decision };
    let capacity = u128::from(fs.capacity_bytes);
    if capacity == 0 {
        decision.invalid_capacity = true;
        return decision;
    }
    let available = u128::from(fs.available_bytes).min(capacity);
    let usage_percent = 100 - (available * 100 / capacity) as u8;
    if usage_percent < policy.high_threshold_percent {
        return decision;
    }
    let target = capacity * u128::from(100 - policy.low_threshold_percent) / 100;
    let needed = u64::try_from(target.saturating_sub(available)).unwrap_or(u64::MAX);
    let min_age = SignedDuration::try_from(policy.min_age).unwrap_or(SignedDuration::MAX);
    let mut frees = 0u64;
    for (image, record) in candidates {
        if since(record.first_detected) < min_age {
            continue;
        }
        if frees < needed {
            frees = frees.saturating_add(image.size);
            decision.remove.push(removal(image, Why::Space));
        } else {
            decision.spare.push(removal(image, Why::Space));
        }
    }
    decision.space = Some(SpaceNeed { needed });
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const MIB: u64 = 1 << 20;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn image(tag: &str, size: u64) -> ListedImage {
        ListedImage {
            id: format!("sha256:{tag}"),
            repo_tags: vec![format!("localhost/{tag}:1")],
            size,
            ..Default::default()
        }
    }

    /// 100 MiB, `available` of them free.
    fn fs(available_mib: u64) -> ImageFs {
        ImageFs { capacity_bytes: 100 * MIB, available_bytes: available_mib * MIB, ..Default::default() }
    }

    fn policy(high: u8, low: u8, min_age_secs: u64) -> ImageGcPolicy {
        ImageGcPolicy {
            high_threshold_percent: high,
            low_threshold_percent: low,
            min_age: Duration::from_secs(min_age_secs),
            max_age: Duration::ZERO,
        }
    }

    /// A world of images and their records, each given `(first detected, last used)`.
    struct World {
        images: Vec<ListedImage>,
        in_use: InUse,
        records: Records,
    }

    fn world(images: &[(ListedImage, i64, Option<i64>)]) -> World {
        let mut records = Records::default();
        for (i, first, last) in images {
            records.0.insert(i.id.clone(), Record { first_detected: t(*first), last_used: last.map(t) });
        }
        World { images: images.iter().map(|(i, ..)| i.clone()).collect(), in_use: InUse::default(), records }
    }

    impl World {
        fn decide(&self, fs: &ImageFs, policy: &ImageGcPolicy, now: Timestamp) -> Decision {
            decide(&self.images, &self.in_use, &self.records, Some(fs), policy, now, t(0))
        }
    }

    fn ids(removals: &[Removal]) -> Vec<&str> {
        removals.iter().map(|r| r.id.as_str()).collect()
    }

    #[test]
    fn below_the_high_threshold_nothing_is_removed() {
        let w = world(&[(image("a", 10 * MIB), 0, None)]);
        // 84 % used: under 85.
        let d = w.decide(&fs(16), &policy(85, 80, 0), t(1000));
        assert_eq!(d, Decision::default());
    }

    #[test]
    fn at_the_high_threshold_frees_down_to_the_low_one_least_recently_used_first() {
        let w = world(&[
            (image("used-late", 4 * MIB), 0, Some(500)),
            (image("never-used-new", 4 * MIB), 300, None),
            (image("used-early", 4 * MIB), 0, Some(100)),
            (image("never-used-old", 4 * MIB), 200, None),
        ]);
        // 85 % used, to 80 %: 5 MiB to free, so two 4 MiB images, never used ones first (the
        // earlier detected first), then the least recently used.
        let d = w.decide(&fs(15), &policy(85, 80, 0), t(1000));
        assert_eq!(d.space, Some(SpaceNeed { needed: 5 * MIB }));
        assert_eq!(ids(&d.remove), ["sha256:never-used-old", "sha256:never-used-new"]);
        assert_eq!(ids(&d.spare), ["sha256:used-early", "sha256:used-late"]);
        assert!(d.remove.iter().all(|r| r.why == Why::Space));
        assert_eq!(d.remove[0].name, "localhost/never-used-old:1");
    }

    #[test]
    fn images_in_use_or_pinned_are_kept_whatever_the_usage() {
        let mut pinned = image("pause", MIB);
        pinned.pinned = true;
        let mut by_digest = image("digest", MIB);
        by_digest.repo_digests = vec!["localhost/digest@sha256:d".into()];
        let mut w = world(&[
            (image("by-id", MIB), 0, None),
            (image("by-tag", MIB), 0, None),
            (by_digest, 0, None),
            (pinned, 0, None),
            (image("free", MIB), 0, None),
        ]);
        w.in_use.insert("sha256:by-id");
        w.in_use.insert("localhost/by-tag:1");
        w.in_use.insert("localhost/digest@sha256:d");
        let d = w.decide(&fs(0), &policy(1, 0, 0), t(1000));
        assert_eq!(ids(&d.remove), ["sha256:free"]);
        assert!(d.spare.is_empty());
    }

    #[test]
    fn images_younger_than_the_minimum_age_are_kept_for_space() {
        let w = world(&[(image("old", MIB), 0, None), (image("new", MIB), 950, None)]);
        let d = w.decide(&fs(0), &policy(1, 0, 60), t(1000));
        assert_eq!(ids(&d.remove), ["sha256:old"]);
        // Exactly the minimum age is old enough.
        let d = w.decide(&fs(0), &policy(1, 0, 50), t(1000));
        assert_eq!(ids(&d.remove), ["sha256:old", "sha256:new"]);
    }

    #[test]
    fn not_enough_to_remove_says_how_much_was_needed_and_how_much_can_go() {
        let w = world(&[(image("a", 3 * MIB), 0, None), (image("b", 2 * MIB), 0, Some(10))]);
        // 90 % used, to 80 %: 10 MiB needed, 5 MiB removable.
        let d = w.decide(&fs(10), &policy(85, 80, 0), t(1000));
        assert_eq!(d.space, Some(SpaceNeed { needed: 10 * MIB }));
        assert_eq!(ids(&d.remove), ["sha256:a", "sha256:b"]);
    }

    #[test]
    fn no_capacity_is_invalid_and_removes_nothing() {
        let w = world(&[(image("a", MIB), 0, None)]);
        let d = w.decide(&ImageFs::default(), &policy(1, 0, 0), t(1000));
        assert!(d.invalid_capacity);
        assert!(d.remove.is_empty() && d.space.is_none());
    }

    #[test]
    fn images_unused_past_the_maximum_age_go_once_it_has_passed_since_collection_began() {
        let w = world(&[(image("stale", MIB), 0, Some(100)), (image("fresh", MIB), 0, Some(900))]);
        let mut p = policy(85, 80, 0);
        p.max_age = Duration::from_secs(600);
        // Plenty of space: only age counts. Not before 600 s after collection began (at 0).
        assert!(w.decide(&fs(90), &p, t(600)).remove.is_empty());
        let d = w.decide(&fs(90), &p, t(1000));
        assert_eq!(ids(&d.remove), ["sha256:stale"]);
        assert_eq!(d.remove[0].why, Why::Age);
        assert_eq!(d.space, None);
    }

    #[test]
    fn old_images_are_chosen_before_the_filesystem_is_read() {
        let w = world(&[(image("stale", 10 * MIB), 0, Some(0)), (image("recent", MIB), 0, Some(950))]);
        let mut p = policy(1, 0, 0);
        p.max_age = Duration::from_secs(600);
        let d = decide(&w.images, &w.in_use, &w.records, None, &p, t(1000), t(0));
        assert_eq!(ids(&d.remove), ["sha256:stale"]);
        assert!(d.spare.is_empty() && d.space.is_none() && !d.invalid_capacity);
    }

    #[test]
    fn detection_records_first_sight_and_last_use_and_forgets_what_is_gone() {
        let (a, b) = (image("a", MIB), image("b", MIB));
        let mut records = Records::default();
        let mut in_use = InUse::default();
        records.detect(&[a.clone(), b.clone()], &in_use, t(10));
        in_use.insert("localhost/a:1");
        records.detect(&[a.clone(), b.clone()], &in_use, t(20));
        assert_eq!(records.get(&a.id), Some(&Record { first_detected: t(10), last_used: Some(t(20)) }));
        assert_eq!(records.get(&b.id), Some(&Record { first_detected: t(10), last_used: None }));
        records.detect(std::slice::from_ref(&a), &InUse::default(), t(30));
        assert_eq!(records.get(&a.id), Some(&Record { first_detected: t(10), last_used: Some(t(20)) }));
        assert_eq!(records.get(&b.id), None);
    }
}
