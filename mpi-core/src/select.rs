//! Device selection (`MPI_DEVICE`): which device reaches which peer, and where the heap
//! lives.
//!
//! At start-up every rank publishes its hostname (`mpi-host-<rank>`) and rank 0 the job's
//! shared-memory id (`mpi-shm-job`: `MPI_JOBID` from mpirun, else `<pid>-<random>`). Ranks
//! started by our `mpirun` skip this exchange (all on one host, `MPI_JOBID` shared; see
//! [`mpirun_local_job`]), and so does `MPI_DEVICE=tcp`, which needs neither. Then:
//!
//! | `MPI_DEVICE` | heap | device |
//! |---|---|---|
//! | `tcp` | anonymous mapping | [`TcpDevice`] for every peer |
//! | `shm` | this rank's shared-memory segment | [`ShmDevice`]; a rank on another host is an error at init |
//! | `auto`, one host | segment | [`ShmDevice`] |
//! | `auto`, several hosts | segment | [`Composite`]: shm for peers on this host, TCP for the others |
//!
//! With shared memory the heap is the heap area of the rank's [`Segment`] (created here,
//! mapped by the local peers in [`ShmDevice::new`], unlinked as soon as they all attached),
//! so a write into a peer's heap is a `memcpy` by the sender; see `crate::heap`.

use crate::heap::{Heap, HeapLayout};
use crate::settings::{DeviceChoice, Settings};
use crate::{Error, ErrorClass, Result};
use device_shm::{Segment, ShmDevice};
use device_tcp::TcpDevice;
use rdma_api::{Bootstrap, Caps, Device, DeviceError, Event, RegionKey, Write};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Longest sleep in the shared-memory device when TCP peers also exist (the futex does not
/// see socket traffic, so a TCP message waits at most this long in a blocked rank).
const MIXED_WAIT: Duration = Duration::from_micros(500);

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// `MPI_JOBID` (set by mpirun; only `[A-Za-z0-9_-]`, at most 64 bytes are kept) or a fresh
/// `<pid>-<random>`.
fn job_id() -> String {
    if let Ok(j) = std::env::var("MPI_JOBID") {
        let j: String = j
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(64)
            .collect();
        if !j.is_empty() {
            return j;
        }
    }
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = (t ^ (&t as *const u64 as u64).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    format!("{}-{:08x}", std::process::id(), x >> 32)
}

fn other(msg: String) -> Error {
    Error::new(ErrorClass::Other, msg)
}

/// The job id when this rank was started by our `mpirun` (which starts every rank of a job
/// on its own host): `MPI_JOBID`, if the PMI-1 store is the one that mpirun named after it
/// (`kvs_<MPI_JOBID>`, so variables inherited from an outer job do not count) and
/// `MPI_LOCAL_SIZE` is the job size. Then [`build`] needs no hostname exchange.
pub(crate) fn mpirun_local_job(boot: &pmi::Boot) -> Option<String> {
    let raw = std::env::var("MPI_JOBID").ok()?;
    let local_size: usize = std::env::var("MPI_LOCAL_SIZE").ok()?.parse().ok()?;
    let kvs = boot.kvsname()?;
    (local_size == boot.size() && kvs.strip_prefix("kvs_") == Some(raw.as_str()) && job_id() == raw)
        .then_some(raw)
}

/// Creates the heap and the device of this rank (collective). `host` overrides the
/// hostname (tests simulate several hosts with it). `local_job`: every rank runs on this
/// host and this is the job's shared-memory id ([`mpirun_local_job`]); otherwise the ranks
/// exchange hostnames and rank 0's id through the store. With `MPI_DEVICE=tcp` neither is
/// needed.
pub(crate) fn build(
    boot: &mut dyn Bootstrap,
    settings: &Settings,
    lay: HeapLayout,
    host: Option<&str>,
    local_job: Option<&str>,
) -> Result<(Heap, Box<dyn Device>)> {
    let (rank, size) = (boot.rank(), boot.size());
    if settings.device == DeviceChoice::Tcp {
        let heap = Heap::new(lay)?;
        // SAFETY: the heap mapping outlives the device (the device field of `Mpi` is dropped
        // before the heap field).
        let tcp = unsafe { TcpDevice::new(boot, heap.base(), heap.len()) }?;
        return Ok((heap, Box::new(tcp)));
    }
    let (job, local, one_host) = match local_job {
        Some(job) => (job.to_string(), vec![true; size], true),
        None => {
            let me = host.map_or_else(hostname, str::to_string);
            boot.put(&format!("mpi-host-{rank}"), &me)?;
            if rank == 0 {
                boot.put("mpi-shm-job", &job_id())?;
            }
            boot.barrier()?;
            let hosts = (0..size)
                .map(|q| boot.get(&format!("mpi-host-{q}")))
                .collect::<rdma_api::Result<Vec<String>>>()?;
            let local: Vec<bool> = hosts.iter().map(|h| *h == me).collect();
            let one_host = hosts.iter().all(|h| *h == hosts[0]);
            if settings.device == DeviceChoice::Shm && !one_host {
                let q = local.iter().position(|&l| !l).unwrap_or(0);
                return Err(other(format!(
                    "MPI_DEVICE=shm, but rank {q} runs on host {:?} and this rank ({rank}) on \
                     {me:?}: shared memory reaches only ranks of one host (use \
                     MPI_DEVICE=auto or tcp)",
                    hosts[q]
                )));
            }
            (boot.get("mpi-shm-job")?, local, one_host)
        }
    };
    let use_tcp = !one_host;
    let seg = Arc::new(Segment::create(&job, rank, size, lay.total).map_err(|e| {
        other(format!(
            "cannot create the shared-memory segment {} of {} bytes: {e}",
            device_shm::segment_name(&job, rank),
            lay.total
        ))
    })?);
    let heap = Heap::in_segment(lay, seg.clone())?;
    let shm = ShmDevice::new(boot, seg, &job, &local)?;
    if !use_tcp {
        return Ok((heap, Box::new(shm)));
    }
    // SAFETY: as above; the segment (and so the heap) is also kept alive by the shm device.
    let tcp = unsafe { TcpDevice::new(boot, heap.base(), heap.len()) }?;
    Ok((heap, Box::new(Composite::new(shm, tcp, local))))
}

/// Routes each peer to one device: shared memory for ranks on this host (and this rank),
/// TCP for the others. Regions are registered in both; the composite key is the shm key,
/// and [`Device::key_for_peer`] translates it to the TCP key for TCP peers.
pub(crate) struct Composite {
    shm: ShmDevice,
    tcp: TcpDevice,
    via_shm: Vec<bool>,
    /// Composite (= shm) key → TCP key, for regions other than the heap.
    tcp_keys: HashMap<u32, RegionKey>,
}

impl Composite {
    fn new(shm: ShmDevice, tcp: TcpDevice, via_shm: Vec<bool>) -> Composite {
        Composite {
            shm,
            tcp,
            via_shm,
            tcp_keys: HashMap::new(),
        }
    }

    fn tcp_key(&self, key: RegionKey) -> RegionKey {
        if key.0 == 0 {
            return key;
        }
        // An unknown key maps to one no device has registered (rejected by the device).
        self.tcp_keys
            .get(&key.0)
            .copied()
            .unwrap_or(RegionKey(u32::MAX))
    }
}

impl Device for Composite {
    fn rank(&self) -> usize {
        self.shm.rank()
    }
    fn size(&self) -> usize {
        self.shm.size()
    }
    fn caps(&self) -> Caps {
        let (s, t) = (self.shm.caps(), self.tcp.caps());
        Caps {
            max_inline: s.max_inline.min(t.max_inline),
            max_write: s.max_write.min(t.max_write),
            name: "shm+tcp",
        }
    }
    unsafe fn register(&mut self, base: *mut u8, len: usize) -> rdma_api::Result<RegionKey> {
        // SAFETY: forwarded contract.
        let k = unsafe { self.shm.register(base, len) }?;
        // SAFETY: forwarded contract.
        match unsafe { self.tcp.register(base, len) } {
            Ok(t) => {
                self.tcp_keys.insert(k.0, t);
                Ok(k)
            }
            Err(e) => {
                let _ = self.shm.deregister(k);
                Err(e)
            }
        }
    }
    fn deregister(&mut self, key: RegionKey) -> rdma_api::Result<()> {
        let t = self.tcp_key(key);
        self.tcp_keys.remove(&key.0);
        let a = self.shm.deregister(key);
        let b = self.tcp.deregister(t);
        a.and(b)
    }
    fn heap_key(&self, _peer: usize) -> RegionKey {
        RegionKey(0)
    }
    fn key_for_peer(&self, key: RegionKey, peer: usize) -> RegionKey {
        if self.via_shm.get(peer).copied().unwrap_or(false) {
            key
        } else {
            self.tcp_key(key)
        }
    }
    #[inline]
    fn write(&mut self, w: &Write) -> rdma_api::Result<()> {
        match self.via_shm.get(w.peer) {
            Some(true) => self.shm.write(w),
            Some(false) => {
                let mut t = *w;
                t.local_key = self.tcp_key(w.local_key);
                self.tcp.write(&t)
            }
            None => Err(DeviceError::InvalidArgument(format!(
                "peer {} out of range",
                w.peer
            ))),
        }
    }
    fn max_notify_data(&self, peer: usize) -> usize {
        match self.via_shm.get(peer) {
            Some(true) => self.shm.max_notify_data(peer),
            _ => 0,
        }
    }
    #[inline]
    fn notify(&mut self, peer: usize, imm: u32, data: &[u8]) -> rdma_api::Result<()> {
        match self.via_shm.get(peer) {
            Some(true) => self.shm.notify(peer, imm, data),
            _ => self.tcp.notify(peer, imm, data),
        }
    }
    fn can_write_bytes(&self, peer: usize) -> bool {
        matches!(self.via_shm.get(peer), Some(true)) && self.shm.can_write_bytes(peer)
    }
    #[inline]
    fn write_bytes(
        &mut self,
        peer: usize,
        parts: [&[u8]; 2],
        remote_key: RegionKey,
        remote_offset: usize,
        imm: Option<u32>,
    ) -> rdma_api::Result<()> {
        match self.via_shm.get(peer) {
            Some(true) => self
                .shm
                .write_bytes(peer, parts, remote_key, remote_offset, imm),
            _ => self
                .tcp
                .write_bytes(peer, parts, remote_key, remote_offset, imm),
        }
    }
    fn busy(&mut self) -> bool {
        self.shm.busy() | self.tcp.busy()
    }
    fn poll(&mut self, events: &mut Vec<Event>) -> rdma_api::Result<usize> {
        let a = self.shm.poll(events)?;
        Ok(a + self.tcp.poll(events)?)
    }
    fn wait(&mut self, timeout: Duration) -> rdma_api::Result<()> {
        self.shm.wait(timeout.min(MIXED_WAIT))?;
        self.tcp.wait(Duration::ZERO)
    }
    fn finalize(&mut self) -> rdma_api::Result<()> {
        let a = self.shm.finalize();
        let b = self.tcp.finalize();
        a.and(b)
    }
}
