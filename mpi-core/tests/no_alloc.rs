//! The hot path (small send/recv, credits available) does not allocate: a counting global
//! allocator counts the allocations of each rank thread during a steady-state ping-pong.

mod common;
use common::{run, settings};
use mpi_core::{Comm, Datatype};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn small_pingpong_does_not_allocate() {
    run(2, settings(), |m| {
        let me = m.rank() as i32;
        let mut b = [0u8; 64];
        let mut round = |m: &mut mpi_core::Mpi| unsafe {
            if me == 0 {
                m.send(b.as_ptr(), 64, Datatype::Byte, 1, 0, Comm::WORLD)
                    .unwrap();
                m.recv(b.as_mut_ptr(), 64, Datatype::Byte, 1, 0, Comm::WORLD)
                    .unwrap();
            } else {
                m.recv(b.as_mut_ptr(), 64, Datatype::Byte, 0, 0, Comm::WORLD)
                    .unwrap();
                m.send(b.as_ptr(), 64, Datatype::Byte, 0, 0, Comm::WORLD)
                    .unwrap();
            }
        };
        for _ in 0..200 {
            round(m);
        }
        let before = ALLOCS.with(|c| c.get());
        for _ in 0..2000 {
            round(m);
        }
        let n = ALLOCS.with(|c| c.get()) - before;
        assert_eq!(
            n, 0,
            "rank {me}: {n} allocations in 2000 steady-state round trips"
        );
    });
}
