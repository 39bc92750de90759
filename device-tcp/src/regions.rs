//! The table of registered regions: key -> (base, len).
//!
//! Key 0 is the heap given to the constructor and is looked up without hashing; other keys
//! come from a monotonic counter, so a key is not reused until the 32-bit counter wraps, and
//! a stale key arriving from the wire is rejected instead of hitting newer memory.
//! Regions may overlap (also the heap): each registration is its own key, and removing one
//! leaves the others, and the writes arriving into them, alone.

use rdma_api::{DeviceError, RegionKey, Result};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A registered byte range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    base: *mut u8,
    len: usize,
}

/// A multiplicative hash for u32 keys (keys are sequential, so no DoS concern).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, k: u32) {
        self.0 = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The region table of one device.
pub(crate) struct Regions {
    heap: Option<Region>,
    others: HashMap<u32, Region, BuildHasherDefault<KeyHasher>>,
    next: u32,
}

/// The key of the heap (the first region) on every rank.
pub(crate) const HEAP_KEY: u32 = 0;

impl Regions {
    /// A table holding only the heap, under [`HEAP_KEY`].
    pub fn new(heap_base: *mut u8, heap_len: usize) -> Regions {
        Regions {
            heap: Some(Region {
                base: heap_base,
                len: heap_len,
            }),
            others: HashMap::default(),
            next: HEAP_KEY + 1,
        }
    }

    /// Adds a region under a fresh key.
    pub fn insert(&mut self, base: *mut u8, len: usize) -> Result<RegionKey> {
        if base.is_null() && len > 0 {
            return Err(DeviceError::InvalidArgument(
                "register: null base with nonzero length".into(),
            ));
        }
        if (base as usize).checked_add(len).is_none() {
            return Err(DeviceError::InvalidArgument(
                "register: region wraps around the address space".into(),
            ));
        }
        // After 2^32 registrations the counter wraps: skip keys still in use (and the heap's).
        for _ in 0..=self.others.len() + 1 {
            let key = self.next;
            self.next = self.next.wrapping_add(1);
            if key != HEAP_KEY && !self.others.contains_key(&key) {
                self.others.insert(key, Region { base, len });
                return Ok(RegionKey(key));
            }
        }
        Err(DeviceError::InvalidArgument(
            "register: out of region keys".into(),
        ))
    }

    /// Removes a region and returns it; `None` if the key is not registered.
    pub fn remove(&mut self, key: u32) -> Option<Region> {
        if key == HEAP_KEY {
            self.heap.take()
        } else {
            self.others.remove(&key)
        }
    }

    /// The address of `len` bytes at `offset` in region `key`, or `None` unless the whole
    /// range lies inside a registered region (overflow-checked; safe on untrusted input).
    #[inline]
    pub fn range(&self, key: u32, offset: u64, len: u64) -> Option<*mut u8> {
        let r = if key == HEAP_KEY {
            self.heap?
        } else {
            *self.others.get(&key)?
        };
        let end = offset.checked_add(len)?;
        if end > r.len as u64 {
            return None;
        }
        // offset <= r.len, so the result stays inside (or one past) the region: no wrap.
        Some(r.base.wrapping_add(offset as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_keys() {
        let mut buf = vec![0u8; 100];
        let mut t = Regions::new(buf.as_mut_ptr(), 100);
        assert!(t.range(0, 0, 100).is_some());
        assert!(t.range(0, 100, 0).is_some());
        assert!(t.range(0, 1, 100).is_none());
        assert!(t.range(0, u64::MAX, 2).is_none());
        assert!(t.range(1, 0, 0).is_none());
        let mut b2 = vec![0u8; 10];
        let k1 = t.insert(b2.as_mut_ptr(), 10).unwrap();
        assert_eq!(k1, RegionKey(1));
        assert_eq!(t.range(1, 2, 8), Some(b2.as_mut_ptr().wrapping_add(2)));
        let r = t.remove(1).unwrap();
        assert_eq!((r.base, r.len), (b2.as_mut_ptr(), 10));
        assert!(t.remove(1).is_none());
        assert!(t.range(1, 0, 1).is_none());
        let k2 = t.insert(b2.as_mut_ptr(), 10).unwrap();
        assert_ne!(k1, k2, "keys are not reused");
    }

    #[test]
    fn overlapping_regions_are_independent() {
        let mut heap = vec![0u8; 100];
        let mut t = Regions::new(heap.as_mut_ptr(), 100);
        let p = heap.as_mut_ptr();
        let a = t.insert(p, 100).unwrap();
        let b = t.insert(p, 100).unwrap();
        let c = t.insert(p.wrapping_add(50), 10).unwrap();
        assert_ne!(a, b);
        assert!(t.remove(a.0).is_some());
        assert_eq!(t.range(b.0, 0, 100), Some(p));
        assert_eq!(t.range(c.0, 5, 5), Some(p.wrapping_add(55)));
        assert_eq!(t.range(HEAP_KEY, 0, 100), Some(p));
        assert!(t.range(a.0, 0, 1).is_none());
    }
}
