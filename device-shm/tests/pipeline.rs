//! Pipelined writes into registered (non-heap) regions: chunks staged in the receiver's
//! segment and copied out by the receiver (see the crate doc). Sizes around the chunk
//! boundaries, data integrity, order with small heap writes, several senders at once.

mod util;

use device_shm::{DEFAULT_CHUNK, DEFAULT_PIPE_MIN};
use rdma_api::{Bootstrap, Event, RegionKey, Write};
use util::{pattern, run_job, Mem, Rank};

const C: usize = DEFAULT_CHUNK;

/// Sizes around the pipelining threshold and the chunk boundaries, up to 16 MiB.
fn sizes() -> Vec<usize> {
    let mut v = vec![
        0,
        1,
        DEFAULT_PIPE_MIN - 1,
        DEFAULT_PIPE_MIN,
        DEFAULT_PIPE_MIN + 1,
    ];
    for k in [1, 2, 7, 8, 9, 17] {
        v.extend([k * C - 1, k * C, k * C + 1]);
    }
    v.extend([(4 << 20) + 4096 + 3, 16 << 20]);
    v
}

/// Registers `mem` and publishes its key under `name-<rank>`.
fn publish(r: &mut Rank, mem: &Mem, name: &str) -> RegionKey {
    // SAFETY: mem outlives the device's use of it (deregistered before drop by the caller,
    // or the device is finalized first).
    let k = unsafe { r.dev.register(mem.ptr, mem.len) }.unwrap();
    let me = r.rank();
    r.kvs
        .put(&format!("{name}-{me}"), &k.0.to_string())
        .unwrap();
    k
}

fn lookup(r: &mut Rank, name: &str, q: usize) -> RegionKey {
    RegionKey(r.kvs.get(&format!("{name}-{q}")).unwrap().parse().unwrap())
}

/// Rank 0 writes every size from a registered source region into rank 1's registered
/// region (at an odd offset); rank 1 checks the bytes at each Recv and acknowledges.
#[test]
fn sizes_around_chunk_boundaries() {
    let max = 16 << 20;
    run_job(2, 4096, move |mut r| {
        let me = r.rank();
        let mem = Mem::new(max + 64);
        let _k = publish(&mut r, &mem, "buf");
        r.barrier();
        let peer_key = lookup(&mut r, "buf", 1 - me);
        let my_key = RegionKey(_k.0);
        for (i, &size) in sizes().iter().enumerate() {
            if me == 0 {
                let data = pattern(i as u64, size);
                // SAFETY: mem is ours, no device call copies from it meanwhile.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), mem.ptr.add(3), size) };
                r.dev
                    .write(&Write {
                        peer: 1,
                        local_key: my_key,
                        local_offset: 3,
                        remote_key: peer_key,
                        remote_offset: 5,
                        len: size,
                        imm: Some(i as u32),
                        sid: Some(i as u64),
                    })
                    .unwrap();
                let (mut sent, mut acked) = (false, false);
                while !(sent && acked) {
                    match r.next_event() {
                        Event::Sent { sid } => {
                            assert_eq!(sid, i as u64);
                            sent = true;
                        }
                        Event::Recv { peer: 1, imm, .. } => {
                            assert_eq!(imm, i as u32);
                            acked = true;
                        }
                        e => panic!("unexpected {e:?}"),
                    }
                }
            } else {
                let e = r.next_event();
                assert_eq!(
                    e,
                    Event::Recv {
                        peer: 0,
                        imm: i as u32,
                        len: size
                    }
                );
                let want = pattern(i as u64, size);
                // SAFETY: no write into mem is in flight (the sender waits for our ack).
                let got = unsafe { std::slice::from_raw_parts(mem.ptr.add(5), size) };
                assert!(got == want.as_slice(), "size {size}: data differ");
                r.put(0, 0, 0, 0, Some(i as u32), None);
            }
        }
        r.dev.finalize().unwrap();
        drop(mem);
    });
}

/// Ranks 1..=3 each send 20 messages to rank 0 at once, alternating pipelined writes
/// (various sizes) into their own part of rank 0's registered region and small heap
/// writes; rank 0 checks per-sender order and every pipelined message's bytes at its Recv
/// (each sender waits for an ack every 4 big messages, so the region part is reused).
#[test]
fn three_senders_to_one_receiver() {
    const PART: usize = 4 * (3 << 20);
    const MSGS: u32 = 20;
    let len_of = |s: usize, i: u32| (s * 977 + i as usize * 131_071) % (3 << 20) + 1;
    run_job(4, 4096, move |mut r| {
        let me = r.rank();
        if me == 0 {
            let mem = Mem::new(3 * PART);
            publish(&mut r, &mem, "dst");
            r.barrier();
            let mut next = [0u32; 4];
            let mut big = [0u32; 4];
            let mut done = 0;
            while done < 3 {
                let Event::Recv { peer, imm, len } = r.next_event() else {
                    panic!("Sent at the receiver")
                };
                assert_eq!(imm, next[peer], "order from {peer}");
                next[peer] += 1;
                if imm % 2 == 0 {
                    let i = imm / 2;
                    assert_eq!(len, len_of(peer, i));
                    let off = (peer - 1) * PART + (i as usize % 4) * (3 << 20);
                    let want = pattern(peer as u64 * 1000 + i as u64, len);
                    // SAFETY: the sender does not write this part again before our ack.
                    let got = unsafe { std::slice::from_raw_parts(mem.ptr.add(off), len) };
                    assert!(got == want.as_slice(), "data from {peer} msg {i}");
                    big[peer] += 1;
                    if big[peer] % 4 == 0 {
                        r.put(peer, 0, 0, 0, Some(big[peer]), None);
                    }
                } else {
                    assert_eq!(len, 8);
                }
                if next[peer] == 2 * MSGS {
                    done += 1;
                }
            }
            r.dev.finalize().unwrap();
            drop(mem);
        } else {
            let src = Mem::new(4 * (3 << 20));
            let sk = unsafe { r.dev.register(src.ptr, src.len) }.unwrap();
            r.barrier();
            let dk = lookup(&mut r, "dst", 0);
            let mut sent = 0;
            for i in 0..MSGS {
                let len = len_of(me, i);
                let soff = (i as usize % 4) * (3 << 20);
                if i > 0 && i % 4 == 0 {
                    // Wait for the receiver's ack of the previous 4 (and our Sents).
                    loop {
                        match r.next_event() {
                            Event::Sent { .. } => sent += 1,
                            Event::Recv { peer: 0, imm, .. } if imm == i => break,
                            e => panic!("unexpected {e:?}"),
                        }
                    }
                }
                let data = pattern(me as u64 * 1000 + i as u64, len);
                // SAFETY: the slot's previous write reported Sent (acked by the receiver).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), src.ptr.add(soff), len) };
                r.dev
                    .write(&Write {
                        peer: 0,
                        local_key: sk,
                        local_offset: soff,
                        remote_key: dk,
                        remote_offset: (me - 1) * PART + soff,
                        len,
                        imm: Some(2 * i),
                        sid: Some(i as u64),
                    })
                    .unwrap();
                r.put(0, 0, 8 * me, 8, Some(2 * i + 1), None);
            }
            while sent < MSGS {
                if let Event::Sent { .. } = r.next_event() {
                    sent += 1;
                }
            }
            r.dev.finalize().unwrap();
            drop(src);
        }
    });
}

/// A receiver blocked in wait (one-hour timeout) is woken by a pipelined write and copies
/// all its chunks out, waking again as needed.
#[test]
fn sleeping_receiver_gets_pipelined_write() {
    const LEN: usize = 5 * C + 17;
    run_job(2, 4096, |mut r| {
        let me = r.rank();
        let mem = Mem::new(LEN);
        publish(&mut r, &mem, "b");
        r.barrier();
        let pk = lookup(&mut r, "b", 1 - me);
        let mk = lookup(&mut r, "b", me);
        if me == 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let data = pattern(7, LEN);
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), mem.ptr, LEN) };
            r.dev
                .write(&Write {
                    peer: 1,
                    local_key: mk,
                    local_offset: 0,
                    remote_key: pk,
                    remote_offset: 0,
                    len: LEN,
                    imm: Some(9),
                    sid: Some(1),
                })
                .unwrap();
            assert_eq!(r.next_event(), Event::Sent { sid: 1 });
        } else {
            assert_eq!(
                r.next_event_blocking(),
                Event::Recv {
                    peer: 0,
                    imm: 9,
                    len: LEN
                }
            );
            let got = unsafe { std::slice::from_raw_parts(mem.ptr, LEN) };
            assert!(got == pattern(7, LEN).as_slice());
        }
        r.dev.finalize().unwrap();
        drop(mem);
    });
}
