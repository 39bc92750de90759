//! Wire format of the CTRL messages (SHORT, REQ, RSP) and the 32-bit immediate word.
//!
//! Only mpi-core defines these. A header is a fixed 48-byte little-endian record at the
//! start of a CTRL slot, encoded and decoded with explicit byte copies: nothing read from
//! a slot is trusted until [`Header::decode`] and the engine's checks accepted it.
//!
//! ```text
//! byte  0      kind (1 = SHORT, 2 = REQ, 3 = RSP)
//! bytes 1..4   reserved (0)
//! bytes 4..8   context id (u32)
//! bytes 8..12  source rank in the communicator (i32)
//! bytes 12..16 tag (i32)
//! bytes 16..24 len (u64): SHORT payload bytes / REQ total message bytes /
//!              RSP bytes the sender must write (= min(message, receive buffer))
//! bytes 24..28 sender request id (u32; REQ, RSP)
//! bytes 28..32 receiver request id (u32; RSP)
//! bytes 32..36 region key (u32; RSP)
//! bytes 36..40 reserved (0)
//! bytes 40..48 offset in that region (u64; RSP)
//! ```
//!
//! ## Immediate word (32 bits) of a device write
//! The top two bits are the kind, the low 30 bits its argument:
//! * `01` CTRL: the low bits are the slot index in the receiver's ring for the writer (the
//!   writer is known from the event);
//! * `10` DATA: the low bits are the receiver's request id of the rendezvous receive;
//! * `11` CREDIT: low bits 0; the writer updated its credit word in our heap.
//! * `00` is never sent (a protocol error).
//!
//! ## Inline SHORT ([`IMM_INLINE_SHORT`])
//! When the device offers inline notifications (`Device::max_notify_data`, device-shm: 48
//! bytes), a SHORT of up to 48 − [`INLINE_HDR`] = 36 bytes travels in the notification
//! itself, without a CTRL slot or a credit: `Device::notify` with imm
//! [`IMM_INLINE_SHORT`] (= CTRL with the never-used slot index 2^30 − 1) and the bytes
//! ```text
//! bytes 0..4   context id (u32)
//! bytes 4..8   source rank in the communicator (i32)
//! bytes 8..12  tag (i32)
//! bytes 12..   payload
//! ```
//! It is ordered with the CTRL messages to the same destination (the device orders
//! notifications; the sender uses it only when no CTRL message to that destination is
//! queued).

/// Bytes reserved for the header at the start of every CTRL slot.
pub const HDR_RESERVED: usize = 64;
/// Encoded header length in bytes.
pub const HDR_LEN: usize = 48;

/// SHORT: eager message, payload follows the header in the slot.
pub const KIND_SHORT: u8 = 1;
/// REQ: rendezvous request to send.
pub const KIND_REQ: u8 = 2;
/// RSP: rendezvous answer telling where the DATA goes.
pub const KIND_RSP: u8 = 3;

/// Immediate kind: CTRL slot written.
pub const IMM_CTRL: u32 = 1 << 30;
/// Immediate kind: rendezvous DATA landed.
pub const IMM_DATA: u32 = 2 << 30;
/// Immediate kind: credit word updated.
pub const IMM_CREDIT: u32 = 3 << 30;
/// Mask of the immediate's kind bits.
pub const IMM_KIND_MASK: u32 = 3 << 30;
/// Mask of the immediate's argument bits (30 bits).
pub const IMM_ARG_MASK: u32 = (1 << 30) - 1;
/// Immediate of an inline SHORT (`Device::notify`), see the module doc.
pub const IMM_INLINE_SHORT: u32 = IMM_CTRL | IMM_ARG_MASK;
/// Bytes of the inline SHORT header (context, source, tag).
pub const INLINE_HDR: usize = 12;

/// A decoded CTRL header. All kinds share one layout; unused fields are 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// [`KIND_SHORT`], [`KIND_REQ`] or [`KIND_RSP`].
    pub kind: u8,
    /// Context id of the communicator (point-to-point or collective).
    pub ctx: u32,
    /// Sender's rank in the communicator.
    pub src: i32,
    /// Message tag.
    pub tag: i32,
    /// Length in bytes (meaning depends on the kind, see the module doc).
    pub len: u64,
    /// Sender request id.
    pub sreq: u32,
    /// Receiver request id.
    pub rreq: u32,
    /// Region key (RSP).
    pub key: u32,
    /// Byte offset in the region (RSP).
    pub offset: u64,
}

impl Header {
    /// Writes the header into `out[..HDR_LEN]` (little-endian).
    pub fn encode(&self, out: &mut [u8]) {
        let o = &mut out[..HDR_LEN];
        o[0] = self.kind;
        o[1..4].fill(0);
        o[4..8].copy_from_slice(&self.ctx.to_le_bytes());
        o[8..12].copy_from_slice(&self.src.to_le_bytes());
        o[12..16].copy_from_slice(&self.tag.to_le_bytes());
        o[16..24].copy_from_slice(&self.len.to_le_bytes());
        o[24..28].copy_from_slice(&self.sreq.to_le_bytes());
        o[28..32].copy_from_slice(&self.rreq.to_le_bytes());
        o[32..36].copy_from_slice(&self.key.to_le_bytes());
        o[36..40].fill(0);
        o[40..48].copy_from_slice(&self.offset.to_le_bytes());
    }

    /// Reads a header from `b[..HDR_LEN]`. Only the kind is checked here (unknown kind →
    /// `Err`); every other field is validated by the engine against its own state.
    pub fn decode(b: &[u8]) -> Result<Header, String> {
        if b.len() < HDR_LEN {
            return Err(format!(
                "CTRL write of {} bytes is shorter than a header",
                b.len()
            ));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        let h = Header {
            kind: b[0],
            ctx: u32_at(4),
            src: u32_at(8) as i32,
            tag: u32_at(12) as i32,
            len: u64_at(16),
            sreq: u32_at(24),
            rreq: u32_at(28),
            key: u32_at(32),
            offset: u64_at(40),
        };
        match h.kind {
            KIND_SHORT | KIND_REQ | KIND_RSP => Ok(h),
            k => Err(format!("unknown CTRL kind {k}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let h = Header {
            kind: KIND_RSP,
            ctx: 3,
            src: 7,
            tag: -1,
            len: 1 << 40,
            sreq: 0x3fff_ffff,
            rreq: 12,
            key: 0xdead_beef,
            offset: u64::MAX - 5,
        };
        let mut b = [0xffu8; 64];
        h.encode(&mut b);
        assert_eq!(&b[1..4], &[0, 0, 0]);
        assert_eq!(Header::decode(&b).unwrap(), h);
    }

    #[test]
    fn rejects_garbage() {
        let mut b = [0u8; 64];
        assert!(Header::decode(&b).is_err());
        b[0] = 9;
        assert!(Header::decode(&b).is_err());
        assert!(Header::decode(&b[..10]).is_err());
    }

    #[test]
    fn imm_kinds_disjoint() {
        assert_eq!(IMM_CTRL & IMM_ARG_MASK, 0);
        assert_eq!(IMM_DATA & IMM_KIND_MASK, IMM_DATA);
        assert_ne!(IMM_CREDIT, IMM_DATA);
    }
}
