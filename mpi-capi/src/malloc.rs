//! Interposition of the C allocator (`MPI_HEAP_MALLOC=1`): an unmodified program's large
//! buffers live in the heap, so every large message into them is one copy at a heap offset
//! ("virtual address = base + offset", made transparent; see `DESIGN.md`, "The contiguous
//! heap", and `mpi_core::heap`).
//!
//! ## How
//! `libmpi.so` exports `malloc`, `free`, `calloc`, `realloc`, `reallocarray`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, `valloc`, `pvalloc` and
//! `malloc_usable_size`. A program linked with `mpicc` has `libmpi.so` before `libc.so` in
//! its dependencies, so by ELF symbol interposition these definitions serve the whole
//! program, glibc's own internal calls (`strdup`, `fopen`, …) and the Rust code of the
//! library included — always, whatever the setting. What they do:
//! * **malloc family**: a request of at least `MPI_HEAP_MALLOC_MIN` bytes, made while the
//!   arena is attached (between MPI_Init and MPI_Finalize, with `MPI_HEAP_MALLOC=1`), comes
//!   from the malloc arena at the end of the heap ([`mpi_core::Mpi::malloc_arena`]); every
//!   other request goes to glibc's `__libc_malloc`, `__libc_calloc`, `__libc_memalign`,
//!   `__libc_valloc`, `__libc_pvalloc`. The test is one relaxed atomic load
//!   ([`MIN`], `usize::MAX` while detached) and a branch, so with the setting off the cost
//!   is that plus the extra call. An exhausted arena falls back to glibc.
//! * **free / realloc / malloc_usable_size** route by address: inside the arena → ours,
//!   else glibc (`__libc_free`, `__libc_realloc`, glibc's `malloc_usable_size` found with
//!   `dlsym(RTLD_NEXT)`). Without an arena the test is one load of [`LEN`] (0) and a branch.
//!   `realloc` across the boundary (a glibc block grown to `MPI_HEAP_MALLOC_MIN` or more, an
//!   arena block shrunk below half its size or grown) allocates on the other side, copies
//!   and frees.
//! * **The arena allocator** is a `linked_list_allocator::Heap` (first fit; it never
//!   allocates) behind a `std::sync::Mutex` (futex based, no allocation). Blocks are
//!   64-byte aligned (or more when asked) and carry a 32-byte tag just before the returned
//!   pointer (magic, start, size, alignment); a `free` whose tag is wrong (double free,
//!   foreign pointer into the arena) aborts with a message. Lock order: the engine's lock,
//!   then this one (the engine allocates under its lock); nothing here takes the engine's
//!   lock, so there is no deadlock. Any thread may call any function at any time.
//!
//! ## Life cycle
//! * Before MPI_Init everything goes to glibc: blocks allocated then stay glibc's (they are
//!   not in the heap, so large messages into them take the non-heap path). Allocate
//!   message buffers after MPI_Init to get the single copy.
//! * MPI_Init ([`attach`]) sets up the arena when the setting is on.
//! * MPI_Finalize ([`detach`]) stops new arena allocations; the arena stays mapped until
//!   the process exits (the heap is never unmapped when it has a malloc arena), so blocks
//!   allocated before may still be used, reallocated and freed.
//! * In a child after `fork` the arena is shared with the parent (`MAP_SHARED`): the child
//!   never allocates from it and ignores frees of arena blocks (a `pthread_atfork` handler
//!   marks the child), so the parent's allocator state stays intact. Writes by the child
//!   into inherited arena blocks are seen by the parent.
//!
//! ## Caveats (documented in the README's settings table and in `settings.rs`)
//! * The exports interpose even with `MPI_HEAP_MALLOC=0` (then they only forward to
//!   glibc). A program that links another allocator (jemalloc, tcmalloc) *after* `-lmpi`
//!   gets glibc instead of it; link such an allocator before `-lmpi` or `LD_PRELOAD` it
//!   (then it wins, and `MPI_HEAP_MALLOC` has no effect). The same holds for programs built
//!   with MPICH that run against this library as `libmpich.so.12`.
//! * When `libmpi.so` is loaded with `dlopen` (mpi4py, other language bindings) glibc's
//!   allocator is already bound: the exports serve nobody and the setting has no effect.
//! * `calloc` from the arena zeroes the whole block (glibc can skip that for fresh pages).
//! * Freed arena memory is kept (not returned to the system) for reuse; the arena's
//!   touched pages count as shared memory (/dev/shm) of the job until it ends.

use std::alloc::Layout;
use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

extern "C" {
    fn __libc_malloc(size: usize) -> *mut c_void;
    fn __libc_free(p: *mut c_void);
    fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
    fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void;
    fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    fn __libc_valloc(size: usize) -> *mut c_void;
    fn __libc_pvalloc(size: usize) -> *mut c_void;
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> i32;
}

/// Smallest request served from the arena; `usize::MAX` while no arena is attached (setting
/// off, before MPI_Init, after MPI_Finalize, in a forked child).
static MIN: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Arena base address (valid once [`LEN`] is non-zero; set once per process).
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Arena length in bytes; 0: no arena was ever attached.
static LEN: AtomicUsize = AtomicUsize::new(0);
/// Set in a child process after `fork`: the arena belongs to the parent.
static FORKED: AtomicBool = AtomicBool::new(false);
/// glibc's `malloc_usable_size` (0: not resolved yet).
static GLIBC_USABLE: AtomicUsize = AtomicUsize::new(0);
/// The arena allocator.
static ARENA: Mutex<linked_list_allocator::Heap> = Mutex::new(linked_list_allocator::Heap::empty());

/// Minimum alignment of arena blocks and minimum header room before them.
const HDR: usize = 64;
/// Tag magic of a live arena block.
const MAGIC: usize = 0x6d70_6972_735f_6d61;
/// Tag magic of a freed arena block.
const FREED: usize = 0x6672_6565_645f_6d61;
const PAGE: usize = 4096;

/// The tag stored in the 32 bytes before every arena block.
#[repr(C)]
struct Tag {
    magic: usize,
    /// Start of the underlying allocation (header room included).
    start: usize,
    /// Size of the underlying allocation.
    size: usize,
    /// Its alignment (= the header room in front of the user pointer).
    align: usize,
}

/// Sets up the arena `base .. base+len` (inside the heap, mapped until the process exits)
/// and starts serving requests of at least `min` bytes from it. Called once, by MPI_Init,
/// when `MPI_HEAP_MALLOC=1`; later calls are ignored.
///
/// # Safety
/// The range must be mapped, writable, unused by anything else and stay mapped until the
/// process exits.
pub unsafe fn attach(base: *mut u8, len: usize, min: usize) {
    if LEN.load(Ordering::Acquire) != 0 || len < 2 * PAGE {
        return;
    }
    resolve_glibc_usable();
    {
        let mut a = ARENA.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the caller hands over the range for good.
        unsafe { a.init(base, len) };
    }
    BASE.store(base as usize, Ordering::Relaxed);
    LEN.store(len, Ordering::Release);
    // SAFETY: registers a handler that only stores to atomics.
    unsafe { pthread_atfork(None, None, Some(child_after_fork)) };
    MIN.store(min.max(1), Ordering::Release);
}

/// Stops serving new requests from the arena (MPI_Finalize). Arena blocks stay valid.
pub fn detach() {
    MIN.store(usize::MAX, Ordering::Release);
}

/// The attached arena (base, length), if any (for diagnostics and tests).
pub fn arena() -> Option<(usize, usize)> {
    let len = LEN.load(Ordering::Acquire);
    (len != 0).then(|| (BASE.load(Ordering::Relaxed), len))
}

extern "C" fn child_after_fork() {
    FORKED.store(true, Ordering::Relaxed);
    MIN.store(usize::MAX, Ordering::Relaxed);
}

/// Whether `p` lies inside the arena.
#[inline(always)]
fn in_arena(p: *mut c_void) -> bool {
    let len = LEN.load(Ordering::Acquire);
    len != 0 && (p as usize).wrapping_sub(BASE.load(Ordering::Relaxed)) < len
}

fn resolve_glibc_usable() {
    if GLIBC_USABLE.load(Ordering::Acquire) == 0 {
        // SAFETY: valid C string; RTLD_NEXT finds the definition after ours (glibc's).
        let f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"malloc_usable_size".as_ptr()) };
        GLIBC_USABLE.store(f as usize, Ordering::Release);
    }
}

/// glibc's `malloc_usable_size(p)` for a non-arena block; `None` if it cannot be found.
fn glibc_usable(p: *mut c_void) -> Option<usize> {
    resolve_glibc_usable();
    let f = GLIBC_USABLE.load(Ordering::Acquire);
    if f == 0 {
        return None;
    }
    // SAFETY: `f` is glibc's malloc_usable_size (resolved by dlsym), `p` a glibc block.
    let f: unsafe extern "C" fn(*mut c_void) -> usize = unsafe { std::mem::transmute(f) };
    // SAFETY: as above.
    Some(unsafe { f(p) })
}

/// Prints `msg` without allocating and aborts.
fn die(msg: &str) -> ! {
    // SAFETY: writes a valid buffer to stderr; abort never returns.
    unsafe {
        libc::write(2, msg.as_ptr() as *const c_void, msg.len());
        libc::abort()
    }
}

/// Reads the tag of arena block `p`, aborting on a bad one.
///
/// # Safety
/// `p` must lie inside the arena.
unsafe fn tag(p: *mut c_void, what: &str) -> *mut Tag {
    let t = (p as usize).wrapping_sub(std::mem::size_of::<Tag>()) as *mut Tag;
    // SAFETY: arena blocks are HDR-aligned with the tag in front; a pointer at the very
    // start of the arena fails the range check below instead of reading before it.
    let ok = (t as usize) >= BASE.load(Ordering::Relaxed)
        && (p as usize).is_multiple_of(HDR)
        && unsafe { (*t).magic } == MAGIC;
    if !ok {
        die(what);
    }
    t
}

/// `size` bytes aligned to `align` (a power of two) from the arena; null if it is full.
fn arena_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(HDR);
    let Some(total) = size.checked_add(align) else {
        return ptr::null_mut();
    };
    let Ok(lay) = Layout::from_size_align(total, align) else {
        return ptr::null_mut();
    };
    let r = ARENA
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .allocate_first_fit(lay);
    let Ok(start) = r else {
        return ptr::null_mut();
    };
    // SAFETY: the block has `align` ≥ HDR ≥ 32 bytes of room before `user`, and `user` is
    // aligned to `align`, so the tag is aligned and inside the block.
    unsafe {
        let user = start.as_ptr().add(align);
        let t = user.sub(std::mem::size_of::<Tag>()) as *mut Tag;
        t.write(Tag {
            magic: MAGIC,
            start: start.as_ptr() as usize,
            size: total,
            align,
        });
        user as *mut c_void
    }
}

/// Usable bytes of arena block `p`.
///
/// # Safety
/// `p` must lie inside the arena.
unsafe fn arena_usable(p: *mut c_void) -> usize {
    // SAFETY: forwarded contract.
    let t = unsafe { &*tag(p, "mpi: malloc_usable_size/realloc: bad heap block\n") };
    t.size - t.align
}

/// Frees arena block `p` (ignored in a forked child).
///
/// # Safety
/// `p` must lie inside the arena and be a live block.
unsafe fn arena_free(p: *mut c_void) {
    if FORKED.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: forwarded contract.
    let t = unsafe {
        &mut *tag(
            p,
            "mpi: free(): invalid pointer or double free in the heap\n",
        )
    };
    t.magic = FREED;
    let (start, size, align) = (t.start, t.size, t.align);
    // SAFETY: the tag records the layout the block was allocated with.
    unsafe {
        let lay = Layout::from_size_align_unchecked(size, align);
        ARENA
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .deallocate(NonNull::new_unchecked(start as *mut u8), lay);
    }
}

/// C `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
    if size < MIN.load(Ordering::Relaxed) {
        // SAFETY: glibc's malloc.
        return unsafe { __libc_malloc(size) };
    }
    let p = arena_alloc(size, HDR);
    if p.is_null() {
        // SAFETY: glibc's malloc.
        return unsafe { __libc_malloc(size) };
    }
    p
}

/// C `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if in_arena(p) {
        // SAFETY: an arena pointer passed to free is a live block (C contract).
        unsafe { arena_free(p) }
    } else {
        // SAFETY: glibc's block (or null).
        unsafe { __libc_free(p) }
    }
}

/// C `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        Some(total) if total >= MIN.load(Ordering::Relaxed) => {
            let p = arena_alloc(total, HDR);
            if !p.is_null() {
                // SAFETY: the block holds `total` bytes.
                unsafe { ptr::write_bytes(p as *mut u8, 0, total) };
                return p;
            }
            // SAFETY: glibc's calloc.
            unsafe { __libc_calloc(n, size) }
        }
        // SAFETY: glibc's calloc (it also reports the overflow).
        _ => unsafe { __libc_calloc(n, size) },
    }
}

/// C `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        // SAFETY: plain allocation.
        return unsafe { malloc(size) };
    }
    if in_arena(p) {
        // SAFETY: a live arena block (C contract).
        let old = unsafe { arena_usable(p) };
        if size == 0 {
            // glibc's realloc(p, 0) frees and returns null.
            // SAFETY: as above.
            unsafe { arena_free(p) };
            return ptr::null_mut();
        }
        if size <= old && size >= old / 2 && !FORKED.load(Ordering::Relaxed) {
            return p;
        }
        // SAFETY: plain allocation (arena or glibc by size).
        let q = unsafe { malloc(size) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least min(old, size) bytes and are distinct.
            unsafe {
                ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old.min(size));
                arena_free(p);
            }
        }
        return q;
    }
    if size >= MIN.load(Ordering::Relaxed) {
        if let Some(old) = glibc_usable(p) {
            if size > old {
                let q = arena_alloc(size, HDR);
                if !q.is_null() {
                    // SAFETY: `p` holds `old` < `size` bytes, `q` holds `size`; distinct.
                    unsafe {
                        ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, old);
                        __libc_free(p);
                    }
                    return q;
                }
            }
        }
    }
    // SAFETY: glibc's block.
    unsafe { __libc_realloc(p, size) }
}

/// C `reallocarray` (glibc's would call glibc's realloc on arena blocks).
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: forwarded contract.
        Some(total) => unsafe { realloc(p, total) },
        None => {
            // SAFETY: errno is thread-local.
            unsafe { *libc::__errno_location() = libc::ENOMEM };
            ptr::null_mut()
        }
    }
}

/// memalign/aligned_alloc: arena for large requests with a power-of-two alignment, else
/// glibc (which also handles odd alignments its own way).
unsafe fn aligned(align: usize, size: usize) -> *mut c_void {
    if size >= MIN.load(Ordering::Relaxed) && align.is_power_of_two() {
        let p = arena_alloc(size, align);
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: glibc's memalign.
    unsafe { __libc_memalign(align, size) }
}

/// C `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<*mut c_void>()) {
        return libc::EINVAL;
    }
    // SAFETY: valid alignment.
    let p = unsafe { aligned(align, size) };
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller passes a valid out pointer (C contract).
    unsafe { *out = p };
    0
}

/// C `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { aligned(align, size) }
}

/// C `memalign` (obsolete, glibc).
#[no_mangle]
pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { aligned(align, size) }
}

/// C `valloc` (obsolete, glibc).
#[no_mangle]
pub unsafe extern "C" fn valloc(size: usize) -> *mut c_void {
    if size >= MIN.load(Ordering::Relaxed) {
        let p = arena_alloc(size, PAGE);
        if !p.is_null() {
            return p;
        }
    }
    // SAFETY: glibc's valloc.
    unsafe { __libc_valloc(size) }
}

/// C `pvalloc` (obsolete, glibc).
#[no_mangle]
pub unsafe extern "C" fn pvalloc(size: usize) -> *mut c_void {
    if size >= MIN.load(Ordering::Relaxed) {
        if let Some(rounded) = size.checked_next_multiple_of(PAGE) {
            let p = arena_alloc(rounded, PAGE);
            if !p.is_null() {
                return p;
            }
        }
    }
    // SAFETY: glibc's pvalloc.
    unsafe { __libc_pvalloc(size) }
}

/// C `malloc_usable_size` (glibc).
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if in_arena(p) {
        // SAFETY: a live arena block (C contract).
        return unsafe { arena_usable(p) };
    }
    glibc_usable(p).unwrap_or(0)
}
