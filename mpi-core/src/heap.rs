//! The per-rank heap: one contiguous mapping, registered with the device, that holds the
//! protocol areas and the MPI_Alloc_mem arena (see `DESIGN.md`, "The contiguous heap").
//!
//! ## Where the memory comes from
//! * With shared memory (`MPI_DEVICE=auto` or `shm`, see `crate::select`) the heap is the
//!   heap area of this rank's `device_shm::Segment`, a POSIX shared-memory object that every
//!   rank of the host maps: a peer's remote write into our heap is its `memcpy`. The heap
//!   holds an `Arc` of the segment ([`Heap::in_segment`]); so does the device.
//! * Otherwise (`MPI_DEVICE=tcp`, or a caller-given device) an anonymous private mapping
//!   ([`Heap::new`]).
//!
//! ## Layout (byte offsets from the heap base; every rank computes every rank's layout from
//! (number of ranks, slots, slot size), so remote offsets need no exchange)
//! ```text
//! [credit_in : n × u64]   word s = cumulative count of CTRL slots rank s consumed from us
//! [credit_out: n × u64]   local source of our outgoing CREDIT writes (inline)
//! [rings     : n × slots × slot_size]  ring for sender s at rings + s·slots·slot_size
//! [staging   : n × slots × slot_size]  local source of CTRL writes to destination d
//! [arena     : ..malloc]  MPI_Alloc_mem (linked_list_allocator)
//! [malloc    : rest]      the malloc arena (empty unless MPI_HEAP_MALLOC=1)
//! ```
//!
//! ## The malloc arena
//! With `MPI_HEAP_MALLOC=1` ([`HeapLayout::with_malloc_arena`]) the heap ends with an
//! arena that the C layer's interposed allocator (`mpi-capi/src/malloc.rs`) manages: the
//! heap only reserves the range ([`Heap::malloc_arena`]). Because it is inside the heap, a
//! receive buffer there is announced as heap key + offset and written with one `memcpy`.
//! The arena is never mlocked and never touched here, so it costs address space only until
//! the program uses it (the shared-memory file is sparse). A heap with a malloc arena is
//! never unmapped (see `Drop`): the program may use and free its blocks after MPI_Finalize.
//!
//! ## Start-up cost
//! The heap is neither mlocked nor pre-faulted: its pages (zero-filled, from the sparse
//! shared-memory file or the anonymous mapping) are faulted in when first touched. Locking the
//! 64 MiB heap (as earlier versions did) committed and zeroed all of it in MPI_Init: ~45 ms
//! per rank with 2 ranks on the 2-core test machine, plus ~10 ms to free it at exit, the
//! bulk of a 2-rank hello world's 70 ms; a short job touches a few pages of it. No device
//! needs pinned heap pages (shared memory and TCP copy with the CPU, a verbs registration
//! pins by itself).
//!
//! Each area starts on a 64-byte boundary; `slot_size` = header (64 B) + eager limit,
//! rounded up to 64.

use crate::protocol::HDR_RESERVED;
use crate::{Error, ErrorClass, Result};
use std::alloc::Layout as AllocLayout;
use std::collections::HashMap;
use std::ptr::NonNull;

/// Alignment (bytes) of MPI_Alloc_mem results and of every heap area.
pub const ALIGN: usize = 64;
/// Smallest arena (bytes) kept when the heap has to grow for the CTRL rings.
pub const MIN_ARENA: usize = 16 << 20;

fn round_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// The deterministic heap layout shared by all ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapLayout {
    /// Number of ranks.
    pub n: usize,
    /// CTRL slots per sender.
    pub slots: usize,
    /// Bytes per slot (header + eager payload, multiple of 64).
    pub slot_size: usize,
    /// Offset of the incoming credit words.
    pub credit_in: usize,
    /// Offset of the outgoing credit words.
    pub credit_out: usize,
    /// Offset of the CTRL rings.
    pub rings: usize,
    /// Offset of the staging slots.
    pub staging: usize,
    /// Offset of the MPI_Alloc_mem arena.
    pub arena: usize,
    /// Offset of the malloc arena (= `total` when there is none).
    pub malloc: usize,
    /// Total heap bytes (≥ the requested size; grown if the rings need more).
    pub total: usize,
}

impl HeapLayout {
    /// Computes the layout for `n` ranks, `slots` slots per sender, an eager limit of
    /// `eager` bytes and a requested heap of `heap_size` bytes. Errors: MPI_ERR_ARG when the
    /// sizes overflow.
    pub fn new(n: usize, slots: usize, eager: usize, heap_size: usize) -> Result<HeapLayout> {
        let ovf = || Error::new(ErrorClass::Arg, "heap layout overflows the address space");
        let slots = slots.max(1);
        let slot_size = round_up(HDR_RESERVED.checked_add(eager).ok_or_else(ovf)?, ALIGN);
        let words = round_up(n.checked_mul(8).ok_or_else(ovf)?, ALIGN);
        let credit_in = 0;
        let credit_out = words;
        let rings = credit_out + words;
        let ring_bytes = n
            .checked_mul(slots)
            .and_then(|x| x.checked_mul(slot_size))
            .ok_or_else(ovf)?;
        let staging = rings.checked_add(ring_bytes).ok_or_else(ovf)?;
        let arena = staging.checked_add(ring_bytes).ok_or_else(ovf)?;
        let min_total = arena.checked_add(MIN_ARENA).ok_or_else(ovf)?;
        let total = round_up(heap_size.max(min_total), 4096);
        Ok(HeapLayout {
            n,
            slots,
            slot_size,
            credit_in,
            credit_out,
            rings,
            staging,
            arena,
            malloc: total,
            total,
        })
    }

    /// The layout with a malloc arena of `bytes` (rounded up to pages) appended; `bytes` =
    /// 0 leaves it unchanged. Errors: MPI_ERR_ARG when the size overflows.
    pub fn with_malloc_arena(mut self, bytes: usize) -> Result<HeapLayout> {
        let add = bytes
            .checked_next_multiple_of(4096)
            .and_then(|b| b.checked_add(self.malloc))
            .ok_or_else(|| Error::new(ErrorClass::Arg, "malloc arena overflows"))?;
        self.total = add;
        Ok(self)
    }

    /// Bytes of the malloc arena (0: none).
    #[inline]
    pub fn malloc_len(&self) -> usize {
        self.total - self.malloc
    }

    /// Offset of slot `slot` of the ring that receives from `sender`.
    #[inline]
    pub fn ring_slot(&self, sender: usize, slot: usize) -> usize {
        self.rings + (sender * self.slots + slot) * self.slot_size
    }

    /// Offset of staging slot `slot` for destination `dest`.
    #[inline]
    pub fn staging_slot(&self, dest: usize, slot: usize) -> usize {
        self.staging + (dest * self.slots + slot) * self.slot_size
    }

    /// Payload bytes a slot can carry.
    #[inline]
    pub fn payload_max(&self) -> usize {
        self.slot_size - HDR_RESERVED
    }
}

/// The mapped heap plus the MPI_Alloc_mem allocator.
pub struct Heap {
    base: *mut u8,
    /// The shared-memory segment holding the heap (None: our own anonymous mapping).
    segment: Option<std::sync::Arc<device_shm::Segment>>,
    /// The layout of this (and every) rank's heap.
    pub layout: HeapLayout,
    arena: linked_list_allocator::Heap,
    /// ptr → (layout, from the arena?) of every live MPI_Alloc_mem block.
    blocks: HashMap<usize, (AllocLayout, bool)>,
}

impl Heap {
    /// Maps the heap (anonymous, private, zeroed) and sets up the arena. Nothing is locked
    /// or pre-faulted (see "Start-up cost" in the module documentation). Errors:
    /// MPI_ERR_NO_MEM when the mapping fails.
    pub fn new(layout: HeapLayout) -> Result<Heap> {
        Heap::map_anonymous(layout)
    }

    /// The heap in the heap area of a shared-memory segment (at least `layout.total` bytes;
    /// freshly created, so zeroed). Errors: MPI_ERR_NO_MEM if the area is too small.
    pub fn in_segment(
        layout: HeapLayout,
        seg: std::sync::Arc<device_shm::Segment>,
    ) -> Result<Heap> {
        let (base, len) = seg.heap();
        if len < layout.total {
            return Err(Error::new(
                ErrorClass::NoMem,
                format!("shared heap of {len} bytes, {} needed", layout.total),
            ));
        }
        // SAFETY: the arena range lies inside the mapping, which lives as long as `Heap`.
        let arena = unsafe {
            linked_list_allocator::Heap::new(base.add(layout.arena), layout.malloc - layout.arena)
        };
        Ok(Heap {
            base,
            segment: Some(seg),
            layout,
            arena,
            blocks: HashMap::new(),
        })
    }

    fn map_anonymous(layout: HeapLayout) -> Result<Heap> {
        // SAFETY: anonymous private mapping of a fresh range; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::new(
                ErrorClass::NoMem,
                format!(
                    "cannot map a heap of {} bytes: {}",
                    layout.total,
                    std::io::Error::last_os_error()
                ),
            ));
        }
        let base = p as *mut u8;
        // SAFETY: the arena range lies inside the mapping, which lives as long as `Heap`.
        let arena = unsafe {
            linked_list_allocator::Heap::new(base.add(layout.arena), layout.malloc - layout.arena)
        };
        Ok(Heap {
            base,
            segment: None,
            layout,
            arena,
            blocks: HashMap::new(),
        })
    }

    /// The malloc arena (base, length in bytes), if the layout has one. The heap never
    /// touches it; its mapping lives until the process exits.
    pub fn malloc_arena(&self) -> Option<(*mut u8, usize)> {
        (self.layout.malloc_len() > 0).then(|| {
            (
                self.base.wrapping_add(self.layout.malloc),
                self.layout.malloc_len(),
            )
        })
    }

    /// Base address of the heap.
    #[inline]
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Total length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.layout.total
    }

    /// Always false (a heap is never empty); for clippy.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// If `ptr .. ptr+len` lies inside the heap, its offset.
    #[inline]
    pub fn offset_of(&self, ptr: *const u8, len: usize) -> Option<usize> {
        let p = ptr as usize;
        let b = self.base as usize;
        if p >= b && p.checked_add(len)? <= b + self.layout.total {
            Some(p - b)
        } else {
            None
        }
    }

    /// Pointer to heap offset `off`.
    ///
    /// # Safety
    /// `off` must be ≤ the heap length.
    #[inline]
    pub unsafe fn at(&self, off: usize) -> *mut u8 {
        // SAFETY: the caller keeps `off` inside the mapping.
        unsafe { self.base.add(off) }
    }

    /// Reads the u64 at heap offset `off` (a word a peer may write through the device).
    #[inline]
    pub fn read_u64(&self, off: usize) -> u64 {
        assert!(off + 8 <= self.layout.total && off.is_multiple_of(8));
        // SAFETY: in range and aligned (checked above); volatile because a device writes it
        // outside of Rust's knowledge.
        unsafe { std::ptr::read_volatile(self.base.add(off) as *const u64) }
    }

    /// Writes the u64 at heap offset `off`.
    #[inline]
    pub fn write_u64(&self, off: usize, v: u64) {
        assert!(off + 8 <= self.layout.total && off.is_multiple_of(8));
        // SAFETY: in range and aligned (checked above).
        unsafe { std::ptr::write_volatile(self.base.add(off) as *mut u64, v) }
    }

    /// MPI_Alloc_mem: `size` bytes (64-byte aligned) from the arena, else from the system
    /// allocator. Errors: MPI_ERR_NO_MEM.
    pub fn alloc(&mut self, size: usize) -> Result<*mut u8> {
        let lay = AllocLayout::from_size_align(size.max(1), ALIGN)
            .map_err(|_| Error::new(ErrorClass::NoMem, format!("cannot allocate {size} bytes")))?;
        if let Ok(p) = self.arena.allocate_first_fit(lay) {
            self.blocks.insert(p.as_ptr() as usize, (lay, true));
            return Ok(p.as_ptr());
        }
        // SAFETY: `lay` has a non-zero size.
        let p = unsafe { std::alloc::alloc(lay) };
        if p.is_null() {
            return Err(Error::new(
                ErrorClass::NoMem,
                format!("MPI_Alloc_mem: cannot allocate {size} bytes"),
            ));
        }
        self.blocks.insert(p as usize, (lay, false));
        Ok(p)
    }

    /// MPI_Free_mem. Errors: MPI_ERR_ARG for a pointer not returned by [`Heap::alloc`].
    ///
    /// # Safety
    /// If `ptr` is a live block, nothing may use it afterwards.
    pub unsafe fn free(&mut self, ptr: *mut u8) -> Result<()> {
        let Some((lay, in_arena)) = self.blocks.remove(&(ptr as usize)) else {
            return Err(Error::new(
                ErrorClass::Arg,
                format!("MPI_Free_mem: {ptr:p} was not returned by MPI_Alloc_mem"),
            ));
        };
        if in_arena {
            // SAFETY: `ptr` came from allocate_first_fit with `lay` and was not freed since
            // (it was still in the side table).
            unsafe { self.arena.deallocate(NonNull::new_unchecked(ptr), lay) };
        } else {
            // SAFETY: `ptr` came from std::alloc::alloc with `lay` (side table).
            unsafe { std::alloc::dealloc(ptr, lay) };
        }
        Ok(())
    }
}

impl Drop for Heap {
    fn drop(&mut self) {
        for (&p, &(lay, in_arena)) in self.blocks.iter() {
            if !in_arena {
                // SAFETY: system blocks still owned by the side table.
                unsafe { std::alloc::dealloc(p as *mut u8, lay) };
            }
        }
        if self.layout.malloc_len() > 0 {
            // Blocks of the malloc arena belong to the program, which may use and free them
            // after MPI_Finalize: keep the mapping until exit (the segment's name is
            // already unlinked, so nothing outlives the process).
            std::mem::forget(self.segment.take());
            return;
        }
        if self.segment.is_none() {
            // SAFETY: the mapping was created in `new` with this length; the device that
            // registered it is dropped before the heap (field order in `Mpi`).
            unsafe {
                libc::munmap(self.base as *mut libc::c_void, self.layout.total);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_disjoint_and_grows() {
        let l = HeapLayout::new(4, 8, 1000, 1 << 20).unwrap();
        assert_eq!(l.slot_size, 1088);
        assert_eq!(l.credit_out, 64);
        assert_eq!(l.rings, 128);
        assert_eq!(l.staging, l.rings + 4 * 8 * 1088);
        assert_eq!(l.arena, l.staging + 4 * 8 * 1088);
        assert!(l.total >= l.arena + MIN_ARENA);
        assert_eq!(l.ring_slot(3, 7) + l.slot_size, l.staging);
        assert_eq!(l.staging_slot(3, 7) + l.slot_size, l.arena);
        let big = HeapLayout::new(1024, 64, 65536, 64 << 20).unwrap();
        assert!(big.total > 64 << 20);
        assert!(HeapLayout::new(usize::MAX / 2, 64, 1 << 20, 0).is_err());
        assert_eq!(l.malloc, l.total);
        assert_eq!(l.malloc_len(), 0);
        let m = l.with_malloc_arena(5000).unwrap();
        assert_eq!((m.malloc, m.malloc_len()), (l.total, 8192));
        assert_eq!(l.with_malloc_arena(0).unwrap(), l);
        assert!(l.with_malloc_arena(usize::MAX - 100).is_err());
    }

    #[test]
    fn malloc_arena_is_reserved_and_outside_alloc_mem() {
        let lay = HeapLayout::new(2, 4, 256, 1 << 20)
            .unwrap()
            .with_malloc_arena(64 << 20)
            .unwrap();
        let mut h = Heap::new(lay).unwrap();
        let (mb, ml) = h.malloc_arena().unwrap();
        assert_eq!(ml, 64 << 20);
        assert_eq!(h.offset_of(mb, ml), Some(lay.malloc));
        // MPI_Alloc_mem never hands out malloc-arena memory: an allocation larger than the
        // Alloc_mem arena falls back to the system allocator.
        let a = h.alloc(32 << 20).unwrap();
        assert!(h.offset_of(a, 1).is_none());
        // SAFETY: the arena is mapped and owned by nobody else in this test.
        unsafe { mb.add(ml - 1).write(7) };
        // SAFETY: not used afterwards.
        unsafe { h.free(a).unwrap() };
        assert!(Heap::new(HeapLayout::new(2, 4, 256, 1 << 20).unwrap())
            .unwrap()
            .malloc_arena()
            .is_none());
    }

    #[test]
    fn alloc_free() {
        let mut h = Heap::new(HeapLayout::new(2, 4, 256, 1 << 20).unwrap()).unwrap();
        let a = h.alloc(100).unwrap();
        assert_eq!(a as usize % ALIGN, 0);
        assert!(h.offset_of(a, 100).is_some());
        let big = h.alloc(64 << 20).unwrap(); // falls back to the system allocator
        assert!(h.offset_of(big, 1).is_none());
        let z = h.alloc(0).unwrap();
        // SAFETY: the blocks are not used afterwards.
        unsafe {
            h.free(a).unwrap();
            h.free(big).unwrap();
            h.free(z).unwrap();
            assert_eq!(h.free(a).unwrap_err().class, ErrorClass::Arg);
            let mut x = 0u8;
            assert_eq!(h.free(&mut x).unwrap_err().class, ErrorClass::Arg);
        }
    }
}
