//! Connection setup: publish this rank's address through the bootstrap store, then build one
//! TCP stream per peer pair.
//!
//! Rank `r` connects to every lower rank (in increasing order) and then accepts one
//! connection from every higher rank. Rank 0 only accepts, so by induction every connect
//! is eventually accepted: no deadlock for any job size, even when a listen backlog
//! overflows. The connector first sends `MAGIC` and its rank (two little-endian u32) so that
//! the acceptor knows who it is; unknown or malformed connections are dropped.

use nix::ifaddrs::getifaddrs;
use nix::net::if_::InterfaceFlags;
use rdma_api::{Bootstrap, DeviceError, Result};
use std::io::{self, Read, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Handshake magic ("MPTC").
const MAGIC: u32 = 0x4354_504d;
/// How long setup waits for all peers to connect, and for the last address of a peer.
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to try an address of a remote peer before the next one.
const ADDR_TIMEOUT: Duration = Duration::from_secs(10);
/// Environment variable that forces the address(es) to publish (`;`-separated IPv4).
pub(crate) const ENV_IF_ADDR: &str = "MPI_TCP_IF_ADDR";

/// The bootstrap key under which `rank` publishes its address.
fn addr_key(rank: usize) -> String {
    format!("tcp-addr-{rank}")
}

/// IPv4 addresses of the up, non-loopback interfaces (127.0.0.1 if there is none).
fn interface_ips() -> Vec<Ipv4Addr> {
    let mut ips = Vec::new();
    if let Ok(addrs) = getifaddrs() {
        for ifa in addrs {
            if !ifa.flags.contains(InterfaceFlags::IFF_UP)
                || ifa.flags.contains(InterfaceFlags::IFF_LOOPBACK)
            {
                continue;
            }
            if let Some(sin) = ifa.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
                let ip = sin.ip();
                if !ips.contains(&ip) {
                    ips.push(ip);
                }
            }
        }
    }
    if ips.is_empty() {
        ips.push(Ipv4Addr::LOCALHOST);
    }
    ips
}

/// The addresses to publish: `MPI_TCP_IF_ADDR` if set, otherwise the interfaces'.
fn published_ips() -> Result<Vec<Ipv4Addr>> {
    match std::env::var(ENV_IF_ADDR) {
        Ok(v) if !v.trim().is_empty() => v
            .split(';')
            .map(|s| {
                s.trim()
                    .parse::<Ipv4Addr>()
                    .map_err(|e| DeviceError::InvalidArgument(format!("{ENV_IF_ADDR}={v:?}: {e}")))
            })
            .collect(),
        _ => Ok(interface_ips()),
    }
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// A peer's published address: `hostname,port,ip1;ip2;...`.
struct PeerAddr {
    host: String,
    port: u16,
    ips: Vec<Ipv4Addr>,
}

fn parse_addr(rank: usize, v: &str) -> Result<PeerAddr> {
    let bad = || DeviceError::Bootstrap(format!("bad address of rank {rank}: {v:?}"));
    let mut it = v.splitn(3, ',');
    let host = it.next().ok_or_else(bad)?.to_string();
    let port = it.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
    let ips = it
        .next()
        .unwrap_or("")
        .split(';')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| bad()))
        .collect::<Result<Vec<_>>>()?;
    Ok(PeerAddr { host, port, ips })
}

fn connect(rank: usize, me: &str, a: &PeerAddr) -> Result<TcpStream> {
    if a.host == me {
        let s = TcpStream::connect_timeout(
            &SocketAddr::from((Ipv4Addr::LOCALHOST, a.port)),
            SETUP_TIMEOUT,
        )
        .map_err(|e| DeviceError::PeerLost {
            peer: rank,
            reason: format!("connect to 127.0.0.1:{}: {e}", a.port),
        })?;
        return Ok(s);
    }
    let mut errs = Vec::new();
    for (i, ip) in a.ips.iter().enumerate() {
        let t = if i + 1 == a.ips.len() {
            SETUP_TIMEOUT
        } else {
            ADDR_TIMEOUT
        };
        match TcpStream::connect_timeout(&SocketAddr::new(IpAddr::V4(*ip), a.port), t) {
            Ok(s) => return Ok(s),
            Err(e) => errs.push(format!("{ip}:{}: {e}", a.port)),
        }
    }
    Err(DeviceError::PeerLost {
        peer: rank,
        reason: format!("cannot connect to {}: [{}]", a.host, errs.join(", ")),
    })
}

/// Reads the connector's handshake; `None` if it is not a valid, new higher rank.
fn handshake(s: &mut TcpStream, rank: usize, size: usize) -> io::Result<Option<usize>> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(ADDR_TIMEOUT))?;
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let who = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
    Ok((magic == MAGIC && who > rank && who < size).then_some(who))
}

/// Publishes this rank's address, waits for everyone (`boot.barrier()`), and returns one
/// connected stream per peer (`None` at index `rank`), with TCP_NODELAY set and in
/// nonblocking mode. A job of size 1 opens no socket and returns `[None]`.
pub(crate) fn connect_all(boot: &mut dyn Bootstrap) -> Result<Vec<Option<TcpStream>>> {
    let (rank, size) = (boot.rank(), boot.size());
    let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
    if size <= 1 {
        return Ok(streams);
    }
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let port = listener.local_addr()?.port();
    let me = hostname();
    let ips: Vec<String> = published_ips()?.iter().map(|ip| ip.to_string()).collect();
    boot.put(&addr_key(rank), &format!("{me},{port},{}", ips.join(";")))?;
    boot.barrier()?;

    for (q, slot) in streams.iter_mut().enumerate().take(rank) {
        let addr = parse_addr(q, &boot.get(&addr_key(q))?)?;
        let mut s = connect(q, &me, &addr)?;
        let mut hello = [0u8; 8];
        hello[..4].copy_from_slice(&MAGIC.to_le_bytes());
        hello[4..].copy_from_slice(&(rank as u32).to_le_bytes());
        s.write_all(&hello)?;
        *slot = Some(s);
    }

    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut missing = size - 1 - rank;
    while missing > 0 {
        match listener.accept() {
            Ok((mut s, _)) => {
                if let Ok(Some(who)) = handshake(&mut s, rank, size) {
                    if streams[who].is_none() {
                        streams[who] = Some(s);
                        missing -= 1;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(DeviceError::Bootstrap(format!(
                        "rank {rank}: timed out waiting for {missing} peer(s) to connect"
                    )));
                }
                let mut pfd = [libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                }];
                match crate::sys::poll(&mut pfd, left.as_millis().min(i32::MAX as u128) as i32) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }

    for s in streams.iter().flatten() {
        s.set_read_timeout(None)?;
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
    }
    Ok(streams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let a = parse_addr(3, "node1,4242,10.0.0.1;192.168.1.2").unwrap();
        assert_eq!(a.host, "node1");
        assert_eq!(a.port, 4242);
        assert_eq!(a.ips.len(), 2);
        let a = parse_addr(3, "node1,4242,").unwrap();
        assert!(a.ips.is_empty());
        assert!(parse_addr(3, "node1").is_err());
        assert!(parse_addr(3, "node1,x,").is_err());
    }
}
