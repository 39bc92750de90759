//! The request table: a slab (vector + free list) of request records indexed by
//! [`crate::Request`]`(u32)`. Ids fit in 30 bits (they travel in the immediate word of a
//! DATA write). Allocation reuses freed entries, so steady-state traffic does not allocate.

use crate::engine::Status;
use crate::Error;
use rdma_api::RegionKey;

/// Largest number of simultaneously live requests (ids are 30-bit).
pub const MAX_REQUESTS: usize = 1 << 30;

/// What a request is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Free slab entry.
    Free,
    /// Finished; `status` / `error` are final.
    Done,
    /// Receive in the posted queue.
    Posted,
    /// Rendezvous receive: RSP sent to `peer` (world rank), waiting for DATA of `len` bytes.
    WaitData {
        /// Writer of the DATA.
        peer: usize,
        /// Bytes expected.
        len: usize,
    },
    /// Rendezvous send: REQ sent to `peer`, waiting for the RSP.
    WaitRsp {
        /// Destination world rank.
        peer: usize,
    },
    /// Rendezvous send: DATA written, waiting for the device's Sent event.
    DataInFlight,
}

/// One request record.
#[derive(Debug)]
pub struct Req {
    /// Current state.
    pub state: State,
    /// User buffer (send: source, receive: destination).
    pub buf: *mut u8,
    /// Buffer length in bytes.
    pub len: usize,
    /// Key registered for this request's buffer (deregistered at completion).
    pub reg: Option<RegionKey>,
    /// Final status (valid in `Done`).
    pub status: Status,
    /// Final error (valid in `Done`).
    pub error: Option<Error>,
}

impl Req {
    fn free() -> Req {
        Req {
            state: State::Free,
            buf: std::ptr::null_mut(),
            len: 0,
            reg: None,
            status: Status::default(),
            error: None,
        }
    }
}

/// The slab.
#[derive(Default)]
pub struct Requests {
    slab: Vec<Req>,
    free: Vec<u32>,
    live: usize,
}

impl Requests {
    /// Allocates a request in `state` for buffer (`buf`, `len`). Errors: MPI_ERR_INTERN
    /// when 2^30 requests are live.
    #[inline]
    pub fn alloc(&mut self, state: State, buf: *mut u8, len: usize) -> crate::Result<u32> {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                if self.slab.len() >= MAX_REQUESTS {
                    return Err(Error::new(
                        crate::ErrorClass::Intern,
                        "too many active requests (2^30)",
                    ));
                }
                self.slab.push(Req::free());
                (self.slab.len() - 1) as u32
            }
        };
        let r = &mut self.slab[id as usize];
        r.state = state;
        r.buf = buf;
        r.len = len;
        r.reg = None;
        r.status = Status::default();
        r.error = None;
        self.live += 1;
        Ok(id)
    }

    /// The live request `id`, if any.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&Req> {
        self.slab
            .get(id as usize)
            .filter(|r| r.state != State::Free)
    }

    /// The live request `id`, mutably.
    #[inline]
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Req> {
        self.slab
            .get_mut(id as usize)
            .filter(|r| r.state != State::Free)
    }

    /// Frees `id` (must be live).
    #[inline]
    pub fn release(&mut self, id: u32) {
        if let Some(r) = self.slab.get_mut(id as usize) {
            if r.state != State::Free {
                r.state = State::Free;
                r.error = None;
                self.free.push(id);
                self.live -= 1;
            }
        }
    }

    /// Number of live requests.
    pub fn live(&self) -> usize {
        self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_reuses_ids() {
        let mut r = Requests::default();
        let a = r.alloc(State::Done, std::ptr::null_mut(), 0).unwrap();
        let b = r.alloc(State::Posted, std::ptr::null_mut(), 0).unwrap();
        assert_ne!(a, b);
        r.release(a);
        assert!(r.get(a).is_none());
        let c = r.alloc(State::Posted, std::ptr::null_mut(), 0).unwrap();
        assert_eq!(a, c);
        assert_eq!(r.live(), 2);
        r.release(c);
        r.release(c);
        assert_eq!(r.live(), 1);
        assert!(r.get(999).is_none());
    }
}
