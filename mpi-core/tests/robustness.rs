//! A peer that violates the protocol makes the receiver fail with MPI_ERR_INTERN (never
//! a panic or UB). A wrapper device corrupts rank 0's outgoing CTRL writes.

use mpi_core::{Comm, Datatype, ErrorClass, Mpi};
use rdma_api::thread_kvs::ThreadKvs;
use rdma_api::{Bootstrap, Caps, Device, Event, RegionKey, Write};
use std::time::Duration;

#[derive(Clone, Copy)]
enum Corrupt {
    /// Overwrite the header's kind byte in the staging slot with 0x77.
    Kind,
    /// Send the CTRL write with imm = DATA | 12345 (no such request).
    DataImm,
    /// Claim a payload length larger than the slot.
    Len,
}

struct Evil {
    inner: Box<dyn Device>,
    heap: *mut u8,
    mode: Option<Corrupt>,
}

// SAFETY: the heap pointer is only used while the engine that owns the heap is alive.
unsafe impl Send for Evil {}

impl Device for Evil {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn caps(&self) -> Caps {
        self.inner.caps()
    }
    unsafe fn register(&mut self, base: *mut u8, len: usize) -> rdma_api::Result<RegionKey> {
        unsafe { self.inner.register(base, len) }
    }
    fn deregister(&mut self, key: RegionKey) -> rdma_api::Result<()> {
        self.inner.deregister(key)
    }
    fn heap_key(&self, peer: usize) -> RegionKey {
        self.inner.heap_key(peer)
    }
    fn write(&mut self, w: &Write) -> rdma_api::Result<()> {
        let mut w = *w;
        let is_ctrl = w.imm.is_some_and(|i| i >> 30 == 1);
        if is_ctrl && w.peer != self.rank() {
            match self.mode {
                Some(Corrupt::Kind) => unsafe { *self.heap.add(w.local_offset) = 0x77 },
                Some(Corrupt::DataImm) => w.imm = Some((2 << 30) | 12345),
                Some(Corrupt::Len) => unsafe {
                    let p = self.heap.add(w.local_offset + 16);
                    std::ptr::copy_nonoverlapping(u64::MAX.to_le_bytes().as_ptr(), p, 8)
                },
                None => {}
            }
        }
        self.inner.write(&w)
    }
    fn poll(&mut self, events: &mut Vec<Event>) -> rdma_api::Result<usize> {
        self.inner.poll(events)
    }
    fn wait(&mut self, timeout: Duration) -> rdma_api::Result<()> {
        self.inner.wait(timeout)
    }
    fn finalize(&mut self) -> rdma_api::Result<()> {
        self.inner.finalize()
    }
}

fn run_corrupt(mode: Corrupt) {
    let hs: Vec<_> = ThreadKvs::job(2)
        .into_iter()
        .map(|k| {
            std::thread::spawn(move || {
                let rank = k.rank();
                let make = move |b: &mut dyn Bootstrap, base: *mut u8, len: usize| {
                    let d = unsafe { device_tcp::TcpDevice::new(b, base, len) }?;
                    Ok(Box::new(Evil {
                        inner: Box::new(d),
                        heap: base,
                        mode: if rank == 0 { Some(mode) } else { None },
                    }) as Box<dyn Device>)
                };
                let mut m = Mpi::init_with_device(Box::new(k), Default::default(), &make).unwrap();
                let mut b = [5u8; 16];
                if rank == 0 {
                    unsafe { m.send(b.as_ptr(), 16, Datatype::Byte, 1, 0, Comm::WORLD) }.unwrap();
                    // Keep the connection open until rank 1 has seen the message.
                    std::thread::sleep(Duration::from_millis(300));
                } else {
                    let e =
                        unsafe { m.recv(b.as_mut_ptr(), 16, Datatype::Byte, 0, 0, Comm::WORLD) }
                            .unwrap_err();
                    assert_eq!(e.class, ErrorClass::Intern, "{e}");
                    assert!(e.msg.contains("rank 0"), "{}", e.msg);
                }
                // Dropped without finalize: the job is broken.
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

#[test]
fn unknown_ctrl_kind_is_an_internal_error() {
    run_corrupt(Corrupt::Kind);
}

#[test]
fn data_for_unknown_request_is_an_internal_error() {
    run_corrupt(Corrupt::DataImm);
}

#[test]
fn oversized_short_length_is_an_internal_error() {
    run_corrupt(Corrupt::Len);
}

#[test]
fn lost_peer_is_mpi_err_other() {
    let hs: Vec<_> = ThreadKvs::job(2)
        .into_iter()
        .map(|k| {
            std::thread::spawn(move || {
                let rank = k.rank();
                let mut m = Mpi::init_with(Box::new(k), Default::default()).unwrap();
                if rank == 0 {
                    let mut b = [0u8; 4];
                    let e = unsafe { m.recv(b.as_mut_ptr(), 4, Datatype::Byte, 1, 0, Comm::WORLD) }
                        .unwrap_err();
                    assert_eq!(e.class, ErrorClass::Other, "{e}");
                    assert!(e.msg.contains("rank 1"), "{}", e.msg);
                }
                // Rank 1 "dies": its engine is dropped without MPI_Finalize.
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}
