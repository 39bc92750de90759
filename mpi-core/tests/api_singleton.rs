//! The Rust API on a singleton (no launcher: MPI_COMM_WORLD of size 1). MPI may be
//! initialized once per process, so everything runs in one test, in order.

use mpi_core::api::*;
use mpi_core::ErrorClass;

#[test]
fn singleton() {
    let mut universe = Universe::init().expect("MPI_Init as a singleton");
    assert_eq!(universe.thread_level(), ThreadLevel::Single);
    {
        let mut world = universe.world();
        assert_eq!((world.rank(), world.size()), (0, 1));

        // Send to self through the scoped nonblocking API.
        let out: Vec<u64> = (0..1000).map(|i| i * 3).collect();
        let mut inp = vec![0u64; 1000];
        world
            .scope(|s| -> mpi_core::Result<()> {
                let r = s.immediate_receive_into(&mut inp, 0, 5)?;
                let w = s.immediate_send(&out, 0, 5)?;
                w.wait()?;
                let st = r.wait()?;
                assert_eq!((st.source, st.tag, st.count_of::<u64>()), (0, 5, 1000));
                Ok(())
            })
            .unwrap();
        assert_eq!(inp, out);

        // A large message (rendezvous) to self, completed by wait_all, and one completed by
        // dropping the request, and one completed by test().
        let big: Vec<u8> = (0..(1 << 20)).map(|i| i as u8).collect();
        let mut got = vec![0u8; 1 << 20];
        let mut small = [0i32; 2];
        world
            .scope(|s| -> mpi_core::Result<()> {
                let r = s.immediate_receive_into(&mut got, ANY_SOURCE, ANY_TAG)?;
                let w = s.immediate_send(&big, 0, 9)?;
                let st = s.wait_all(vec![r, w])?;
                assert_eq!((st[0].tag, st[0].count), (9, 1 << 20));
                let r = s.immediate_receive_into(&mut small, 0, 1)?;
                s.with_communicator(|c| c.send(&[7i32, 8], 0, 1))?;
                let mut r = r;
                loop {
                    match r.test() {
                        Ok(res) => {
                            res?;
                            break;
                        }
                        Err(again) => r = again,
                    }
                }
                Ok(())
            })
            .unwrap();
        assert!(got == big);
        assert_eq!(small, [7, 8]);

        // Probe, then receive what it announced.
        let mut buf = [0f64; 3];
        world
            .scope(|s| -> mpi_core::Result<()> {
                let w = s.immediate_send(&[1.5f64, 2.5, 3.5], 0, 11)?;
                let st = s.with_communicator(|c| c.probe(ANY_SOURCE, 11))?;
                assert_eq!(st.count_of::<f64>(), 3);
                s.with_communicator(|c| c.receive_into(&mut buf, st.source, st.tag))?;
                w.wait()?;
                Ok(())
            })
            .unwrap();
        assert_eq!(buf, [1.5, 2.5, 3.5]);

        // A request dropped unwaited, and one never touched: the scope completes both.
        let mut a = [0u8; 4];
        world.scope(|s| {
            let r = s.immediate_receive_into(&mut a, 0, 2).unwrap();
            let _ = s.immediate_send(&[1u8, 2, 3, 4], 0, 2).unwrap();
            std::mem::forget(r);
        });
        assert_eq!(a, [1, 2, 3, 4]);

        // PROC_NULL.
        world.send(&[1u8], PROC_NULL, 0).unwrap();
        let st = world.receive_into(&mut [0u8; 4], PROC_NULL, 0).unwrap();
        assert_eq!((st.source, st.count), (PROC_NULL, 0));

        // Collectives on one rank are the identity.
        world.barrier().unwrap();
        let mut b = [1i32, 2, 3];
        world.broadcast_into(&mut b, 0).unwrap();
        assert_eq!(b, [1, 2, 3]);
        let mut r = [0i64; 2];
        world.all_reduce_into(&[4i64, -5], &mut r, Op::Sum).unwrap();
        assert_eq!(r, [4, -5]);
        let mut r = [1.0f32, 9.0];
        world.all_reduce_in_place(&mut r, Op::Max).unwrap();
        assert_eq!(r, [1.0, 9.0]);
        let mut r = [0u16; 2];
        world
            .reduce_into(&[3u16, 4], Some(&mut r), Op::Prod, 0)
            .unwrap();
        assert_eq!(r, [3, 4]);

        // Errors come back as Results.
        let e = world.send(&[1u8], 1, 0).unwrap_err();
        assert_eq!(e.class, ErrorClass::Rank);
        let e = world.send(&[1u8], 0, -3).unwrap_err();
        assert_eq!(e.class, ErrorClass::Tag);
        let e = world.broadcast_into(&mut [0u8], 1).unwrap_err();
        assert_eq!(e.class, ErrorClass::Root);
        let e = world
            .all_reduce_into(&[1i32, 2], &mut [0i32; 3], Op::Sum)
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Count);
        let e = world
            .reduce_into::<i32>(&[1], None, Op::Sum, 0)
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Buffer);
        let e = world
            .send_receive_into(&[1u8], 3, 0, &mut [0u8], 0, 0)
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Rank);
        // Truncation: 4 elements into room for 2.
        let mut two = [0u32; 2];
        let res = world.scope(|s| -> mpi_core::Result<Status> {
            let r = s.immediate_receive_into(&mut two, 0, 3)?;
            let w = s.immediate_send(&[1u32, 2, 3, 4], 0, 3)?;
            let res = r.wait();
            let _ = w.wait();
            res
        });
        assert_eq!(res.unwrap_err().class, ErrorClass::Truncate);

        // Send-receive with oneself.
        let mut back = [0i16; 3];
        let st = world
            .send_receive_into(&[5i16, 6, 7], 0, 4, &mut back, 0, 4)
            .unwrap();
        assert_eq!((back, st.count_of::<i16>()), ([5, 6, 7], 3));
    }
    {
        let mut me = universe.self_comm();
        assert_eq!((me.rank(), me.size()), (0, 1));
        let mut r = [0u8; 1];
        me.all_reduce_into(&[200u8], &mut r, Op::Sum).unwrap();
        assert_eq!(r, [200]);
        me.barrier().unwrap();
    }
    universe.finalize().unwrap();
}
