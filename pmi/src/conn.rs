//! The byte stream to the process manager, shared by the PMI-1 and PMI-2 clients: reads
//! PMI-1 lines and PMI-2 frames from one buffer (the PMI-2 handshake starts with a PMI-1
//! line, and bytes read past it must not be lost).

use crate::wire::{self, Message};
use crate::wire2;
use rdma_api::{DeviceError, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;

pub(crate) fn err(msg: impl Into<String>) -> DeviceError {
    DeviceError::Bootstrap(msg.into())
}

pub(crate) struct Conn {
    file: File,
    inbuf: Vec<u8>,
}

impl Conn {
    pub(crate) fn new(fd: OwnedFd) -> Conn {
        Conn {
            file: File::from(fd),
            inbuf: Vec::with_capacity(256),
        }
    }

    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.file
            .write_all(bytes)
            .map_err(|e| err(format!("PMI write failed: {e}")))
    }

    /// Reads more bytes into the buffer (at least one).
    fn fill(&mut self) -> Result<()> {
        let mut chunk = [0u8; 4096];
        loop {
            match self.file.read(&mut chunk) {
                Ok(0) => return Err(err("process manager closed the PMI connection")),
                Ok(n) => {
                    self.inbuf.extend_from_slice(&chunk[..n]);
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(err(format!("PMI read failed: {e}"))),
            }
        }
    }

    /// Reads one PMI-1 line (blank lines are skipped).
    pub(crate) fn read_line(&mut self) -> Result<Message> {
        loop {
            if let Some(pos) = self.inbuf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.inbuf.drain(..=pos).collect();
                if line.iter().all(|b| b.is_ascii_whitespace() || *b == 0) {
                    continue;
                }
                return wire::parse_bytes(&line).map_err(|e| err(e.to_string()));
            }
            self.fill()?;
        }
    }

    /// Reads one PMI-2 frame (6-byte length field, then the body).
    pub(crate) fn read_frame(&mut self) -> Result<Message> {
        while self.inbuf.len() < wire2::LEN_FIELD {
            self.fill()?;
        }
        let len =
            wire2::parse_len(&self.inbuf[..wire2::LEN_FIELD]).map_err(|e| err(e.to_string()))?;
        while self.inbuf.len() < wire2::LEN_FIELD + len {
            self.fill()?;
        }
        let frame: Vec<u8> = self.inbuf.drain(..wire2::LEN_FIELD + len).collect();
        wire2::parse_body(&frame[wire2::LEN_FIELD..]).map_err(|e| err(e.to_string()))
    }
}
