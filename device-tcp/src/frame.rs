//! The wire format of this device (and only of this device): every write travels as a
//! fixed-size little-endian header followed by `len` payload bytes.
//!
//! | bytes  | field                                  |
//! |--------|----------------------------------------|
//! | 0..4   | remote region key (u32)                |
//! | 4..12  | byte offset in that region (u64)       |
//! | 12..20 | payload length in bytes (u64)          |
//! | 20..24 | flags (u32): bit 0 = imm present, bit 1 = BYE |
//! | 24..28 | imm (u32), meaningful with bit 0       |
//!
//! A BYE frame (sent once by [`crate::TcpDevice::finalize`]) has no payload and must have
//! all other fields zero; nothing follows it on the stream.

/// Size of a frame header in bytes.
pub(crate) const HDR_LEN: usize = 28;
/// Flag: the frame carries an immediate word; the receiver raises `Event::Recv`.
pub(crate) const F_IMM: u32 = 1;
/// Flag: orderly end of the stream.
pub(crate) const F_BYE: u32 = 2;

/// A decoded frame header. Fields come from the wire and are untrusted until validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub key: u32,
    pub offset: u64,
    pub len: u64,
    pub flags: u32,
    pub imm: u32,
}

impl Header {
    /// Serializes the header.
    #[inline]
    pub fn encode(&self) -> [u8; HDR_LEN] {
        let mut b = [0u8; HDR_LEN];
        b[0..4].copy_from_slice(&self.key.to_le_bytes());
        b[4..12].copy_from_slice(&self.offset.to_le_bytes());
        b[12..20].copy_from_slice(&self.len.to_le_bytes());
        b[20..24].copy_from_slice(&self.flags.to_le_bytes());
        b[24..28].copy_from_slice(&self.imm.to_le_bytes());
        b
    }

    /// Parses a header (any byte pattern parses; validation is the caller's job).
    #[inline]
    pub fn decode(b: &[u8; HDR_LEN]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        Header {
            key: u32_at(0),
            offset: u64_at(4),
            len: u64_at(12),
            flags: u32_at(20),
            imm: u32_at(24),
        }
    }

    /// The BYE frame.
    pub fn bye() -> Header {
        Header {
            key: 0,
            offset: 0,
            len: 0,
            flags: F_BYE,
            imm: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let h = Header {
            key: 0xdead_beef,
            offset: u64::MAX - 3,
            len: 1 << 40,
            flags: F_IMM,
            imm: 7,
        };
        assert_eq!(Header::decode(&h.encode()), h);
        assert_eq!(h.encode()[0], 0xef, "little-endian");
    }
}
