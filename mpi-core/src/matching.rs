//! Matching queues (MPI-4.1 §3.5, non-overtaking; §3.8 probe): the posted-receive queue
//! and the unexpected-message queue, both `VecDeque`s searched in order, so that messages
//! from one source on one context match in the order they were sent and receives match in
//! the order they were posted.

use std::collections::VecDeque;

/// An envelope pattern or value: context id, source rank (in the communicator), tag.
/// In a pattern, `src` may be [`crate::ANY_SOURCE`] and `tag` [`crate::ANY_TAG`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Context id.
    pub ctx: u32,
    /// Source rank in the communicator.
    pub src: i32,
    /// Tag.
    pub tag: i32,
}

impl Envelope {
    /// Whether the pattern `self` matches the concrete envelope `m`.
    #[inline]
    pub fn matches(&self, m: &Envelope) -> bool {
        self.ctx == m.ctx
            && (self.src == crate::ANY_SOURCE || self.src == m.src)
            && (self.tag == crate::ANY_TAG || self.tag == m.tag)
    }
}

/// A posted receive.
#[derive(Clone, Copy, Debug)]
pub struct Posted {
    /// Pattern.
    pub env: Envelope,
    /// Request id.
    pub req: u32,
}

/// What an unexpected message carries.
#[derive(Debug)]
pub enum Body {
    /// SHORT: the payload, copied out of the CTRL slot.
    Short(Vec<u8>),
    /// REQ: rendezvous request from world rank `peer` with sender request `sreq`.
    Req {
        /// Sender world rank.
        peer: usize,
        /// Sender's request id.
        sreq: u32,
        /// Total message length in bytes.
        len: u64,
    },
}

/// An unexpected message.
#[derive(Debug)]
pub struct Unexpected {
    /// Concrete envelope.
    pub env: Envelope,
    /// Payload or rendezvous request.
    pub body: Body,
}

impl Unexpected {
    /// Full message length in bytes.
    pub fn len(&self) -> usize {
        match &self.body {
            Body::Short(v) => v.len(),
            Body::Req { len, .. } => *len as usize,
        }
    }
    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A blocking receive waiting without a request ([`crate::Mpi::recv`]'s fast path).
///
/// Invariant: it exists only while the posted queue is empty and no unexpected message
/// matches `env` (checked when it is set up), so it stands for the one and only posted
/// receive: an arriving message is offered to the posted queue first (empty, so no
/// match), then to it, then queued as unexpected — the order the posted queue would give.
pub(crate) struct Direct {
    /// Pattern.
    pub(crate) env: Envelope,
    /// User buffer (valid for `len` bytes until the receive completes).
    pub(crate) buf: *mut u8,
    /// Capacity in bytes.
    pub(crate) len: usize,
    /// What happened so far.
    pub(crate) outcome: DirectOutcome,
}

/// Progress of a [`Direct`] receive.
pub(crate) enum DirectOutcome {
    /// Nothing matched yet.
    Waiting,
    /// A SHORT was copied into the buffer: its status (or the truncation error).
    Done(crate::Result<crate::Status>),
    /// A REQ matched: the rendezvous continues as request `id`.
    Rndv(u32),
}

/// Both queues.
pub struct Queues {
    /// Posted receives in posting order.
    pub posted: VecDeque<Posted>,
    /// Unexpected messages in arrival order.
    pub unexpected: VecDeque<Unexpected>,
}

/// Entries each queue holds before it first grows: the hot path (a message that arrives
/// just before its receive is posted, or a few receives posted ahead) must not allocate.
const QUEUE_RESERVE: usize = 64;

impl Default for Queues {
    fn default() -> Queues {
        Queues {
            posted: VecDeque::with_capacity(QUEUE_RESERVE),
            unexpected: VecDeque::with_capacity(QUEUE_RESERVE),
        }
    }
}

impl Queues {
    /// Removes and returns the first posted receive matching the arrived envelope `m`.
    #[inline]
    pub fn take_posted(&mut self, m: &Envelope) -> Option<Posted> {
        // Fast path: the oldest posted receive matches (ping-pong, ordered streams).
        if self.posted.front()?.env.matches(m) {
            return self.posted.pop_front();
        }
        let i = self.posted.iter().position(|p| p.env.matches(m))?;
        self.posted.remove(i)
    }

    /// Removes and returns the first unexpected message matching pattern `p`.
    #[inline]
    pub fn take_unexpected(&mut self, p: &Envelope) -> Option<Unexpected> {
        if p.matches(&self.unexpected.front()?.env) {
            return self.unexpected.pop_front();
        }
        let i = self.unexpected.iter().position(|u| p.matches(&u.env))?;
        self.unexpected.remove(i)
    }

    /// The first unexpected message matching pattern `p` (probe).
    pub fn peek_unexpected(&self, p: &Envelope) -> Option<&Unexpected> {
        self.unexpected.iter().find(|u| p.matches(&u.env))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ANY_SOURCE, ANY_TAG};

    fn env(ctx: u32, src: i32, tag: i32) -> Envelope {
        Envelope { ctx, src, tag }
    }

    #[test]
    fn posted_in_order_with_wildcards() {
        let mut q = Queues::default();
        q.posted.push_back(Posted {
            env: env(0, 1, 5),
            req: 1,
        });
        q.posted.push_back(Posted {
            env: env(0, ANY_SOURCE, ANY_TAG),
            req: 2,
        });
        q.posted.push_back(Posted {
            env: env(0, 2, 5),
            req: 3,
        });
        assert!(q.take_posted(&env(1, 1, 5)).is_none()); // other context
        assert_eq!(q.take_posted(&env(0, 2, 5)).unwrap().req, 2);
        assert_eq!(q.take_posted(&env(0, 2, 5)).unwrap().req, 3);
        assert_eq!(q.take_posted(&env(0, 1, 5)).unwrap().req, 1);
        assert!(q.take_posted(&env(0, 1, 5)).is_none());
    }

    #[test]
    fn unexpected_in_arrival_order() {
        let mut q = Queues::default();
        for (i, (src, tag)) in [(1, 7), (2, 7), (1, 8), (1, 7)].iter().enumerate() {
            q.unexpected.push_back(Unexpected {
                env: env(0, *src, *tag),
                body: Body::Short(vec![i as u8]),
            });
        }
        let pick = |q: &mut Queues, p| match q.take_unexpected(&p).unwrap().body {
            Body::Short(v) => v[0],
            _ => unreachable!(),
        };
        assert_eq!(q.peek_unexpected(&env(0, 1, ANY_TAG)).unwrap().len(), 1);
        assert_eq!(pick(&mut q, env(0, 1, 7)), 0);
        assert_eq!(pick(&mut q, env(0, ANY_SOURCE, 7)), 1);
        assert_eq!(pick(&mut q, env(0, 1, ANY_TAG)), 2);
        assert_eq!(pick(&mut q, env(0, ANY_SOURCE, ANY_TAG)), 3);
        assert!(q.take_unexpected(&env(0, ANY_SOURCE, ANY_TAG)).is_none());
    }
}
