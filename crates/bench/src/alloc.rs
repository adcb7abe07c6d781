//! A global allocator that can count live heap bytes and their peak, switched on at run time
//! (`fake --heap`). Off, it costs one relaxed load per allocation.

#[cfg(feature = "mimalloc")]
use mimalloc::MiMalloc as System;
#[cfg(not(feature = "mimalloc"))]
use std::alloc::System;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};

pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to System unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract, which we pass on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for alloc.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for alloc.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for alloc.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrank(layout.size());
            grew(new_size);
        }
        p
    }
}

fn grew(n: usize) {
    if ON.load(Ordering::Relaxed) {
        let n = n as isize;
        let now = LIVE.fetch_add(n, Ordering::Relaxed) + n;
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

fn shrank(n: usize) {
    if ON.load(Ordering::Relaxed) {
        LIVE.fetch_sub(n as isize, Ordering::Relaxed);
    }
}

/// Starts counting from zero: live bytes are those allocated from now on and not yet freed,
/// less what was freed of older blocks.
pub fn start() {
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
}

/// Net bytes allocated since `start`.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The highest `live` since `start`.
pub fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}
