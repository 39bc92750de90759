//! Predefined reduction operations (MPI-4.1 §6.9.2) and the local reduction kernel
//! (MPI_Reduce_local, MPI-4.1 §6.9.7).
//!
//! | op | C integer | floating point | MPI_BYTE, MPI_PACKED, MPI_C_BOOL, MPI_WCHAR |
//! |---|---|---|---|
//! | MPI_SUM, MPI_PROD | yes (wrapping, two's complement) | yes | MPI_ERR_OP |
//! | MPI_MIN, MPI_MAX | yes | yes | MPI_ERR_OP |
//!
//! "C integer" is the standard's group (MPI_SIGNED_CHAR … MPI_UNSIGNED_LONG_LONG and the
//! fixed-width MPI_INT8_T … MPI_UINT64_T) plus MPI_AINT, MPI_OFFSET, MPI_COUNT (the
//! "multi-language types" group) and, as MPICH does, MPI_CHAR, computed as C's `char`
//! (signed on x86_64, unsigned on aarch64 Linux). Floating point is MPI_FLOAT, MPI_DOUBLE
//! and MPI_LONG_DOUBLE; the latter is computed by a small C kernel (`csrc/longdouble.c`)
//! because Rust has no `long double`.
//!
//! MIN and MAX on floating point follow MPICH's `inout < in ? inout : in`, so the result is
//! the same bit pattern on every rank (NaN handling is not specified by the standard).

use std::ffi::{c_char, c_int, c_long, c_longlong, c_short, c_uint, c_ulong, c_ulonglong};
use std::ffi::{c_uchar, c_ushort};

use crate::{Datatype, Error, ErrorClass, Result};

/// A predefined reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// MPI_SUM
    Sum,
    /// MPI_PROD
    Prod,
    /// MPI_MIN
    Min,
    /// MPI_MAX
    Max,
}

impl Op {
    /// The MPI name, for error messages.
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "MPI_SUM",
            Op::Prod => "MPI_PROD",
            Op::Min => "MPI_MIN",
            Op::Max => "MPI_MAX",
        }
    }
}

extern "C" {
    fn mpicore_ld_sum(input: *const u8, inout: *mut u8, n: usize);
    fn mpicore_ld_prod(input: *const u8, inout: *mut u8, n: usize);
    fn mpicore_ld_min(input: *const u8, inout: *mut u8, n: usize);
    fn mpicore_ld_max(input: *const u8, inout: *mut u8, n: usize);
}

/// Whether `op` is defined on `dt` (MPI-4.1 §6.9.2). Call it before communicating so
/// that every rank reports MPI_ERR_OP instead of failing in the middle of a collective.
///
/// Errors: MPI_ERR_OP naming the operation and the type (e.g. MPI_SUM on MPI_BYTE).
pub fn check(op: Op, dt: Datatype) -> Result<()> {
    use Datatype::*;
    match dt {
        Byte | Packed | CBool | WChar => Err(Error::new(
            ErrorClass::Op,
            format!(
                "{} is not defined for datatype {} (MPI-4.1 §6.9.2)",
                op.name(),
                dt.name()
            ),
        )),
        Char | SignedChar | UnsignedChar | Short | UnsignedShort | Int | Unsigned | Long
        | UnsignedLong | LongLong | UnsignedLongLong | Int8 | Int16 | Int32 | Int64 | Uint8
        | Uint16 | Uint32 | Uint64 | Aint | Offset | Count | Float | Double | LongDouble => Ok(()),
    }
}

/// One element-wise loop: `inout[i] = f(inout[i], input[i])` for `n` elements of `T`, with
/// unaligned loads and stores (plain `mov`s on x86_64 and aarch64; the loop vectorizes,
/// with a run-time overlap check since `input` may equal `inout`).
///
/// # Safety
/// `input` valid for reads and `inout` for reads and writes of `n * size_of::<T>()` bytes.
#[inline(always)]
unsafe fn apply<T: Copy>(input: *const u8, inout: *mut u8, n: usize, f: impl Fn(T, T) -> T) {
    let a = input as *const T;
    let c = inout as *mut T;
    for i in 0..n {
        let x = a.add(i).read_unaligned();
        let y = c.add(i).read_unaligned();
        c.add(i).write_unaligned(f(y, x));
    }
}

macro_rules! int_kernel {
    ($t:ty, $op:expr, $input:expr, $inout:expr, $n:expr) => {
        match $op {
            Op::Sum => apply::<$t>($input, $inout, $n, |o, i| o.wrapping_add(i)),
            Op::Prod => apply::<$t>($input, $inout, $n, |o, i| o.wrapping_mul(i)),
            Op::Min => apply::<$t>($input, $inout, $n, |o, i| if o < i { o } else { i }),
            Op::Max => apply::<$t>($input, $inout, $n, |o, i| if o > i { o } else { i }),
        }
    };
}

macro_rules! float_kernel {
    ($t:ty, $op:expr, $input:expr, $inout:expr, $n:expr) => {
        match $op {
            Op::Sum => apply::<$t>($input, $inout, $n, |o, i| o + i),
            Op::Prod => apply::<$t>($input, $inout, $n, |o, i| o * i),
            Op::Min => apply::<$t>($input, $inout, $n, |o, i| if o < i { o } else { i }),
            Op::Max => apply::<$t>($input, $inout, $n, |o, i| if o > i { o } else { i }),
        }
    };
}

/// Dispatches on the datatype; each arm names the Rust type with C's layout.
macro_rules! dispatch {
    ($dt:expr, $op:expr, $input:expr, $inout:expr, $n:expr;
     int { $($ity:ident => $it:ty),* $(,)? }
     float { $($fty:ident => $ft:ty),* $(,)? }) => {
        match $dt {
            $(Datatype::$ity => int_kernel!($it, $op, $input, $inout, $n),)*
            $(Datatype::$fty => float_kernel!($ft, $op, $input, $inout, $n),)*
            Datatype::LongDouble => match $op {
                Op::Sum => mpicore_ld_sum($input, $inout, $n),
                Op::Prod => mpicore_ld_prod($input, $inout, $n),
                Op::Min => mpicore_ld_min($input, $inout, $n),
                Op::Max => mpicore_ld_max($input, $inout, $n),
            },
            // Rejected by `check` above.
            Datatype::Byte | Datatype::Packed | Datatype::CBool | Datatype::WChar => {
                unreachable!()
            }
        }
    };
}

/// `inout[i] = inout[i] op input[i]` for `count` elements of `dt` (MPI_Reduce_local,
/// MPI-4.1 §6.9.7). Integer arithmetic wraps.
///
/// Errors: MPI_ERR_OP when `op` is not defined on `dt` (e.g. MPI_SUM on MPI_BYTE); nothing
/// is written then.
///
/// # Safety
/// `input` valid for reads and `inout` for reads and writes of `count * dt.size()` bytes
/// (unless `count == 0`); neither needs any alignment. They may be equal but may not
/// overlap partially.
pub unsafe fn reduce_local(
    op: Op,
    dt: Datatype,
    input: *const u8,
    inout: *mut u8,
    count: usize,
) -> Result<()> {
    check(op, dt)?;
    if count == 0 {
        return Ok(());
    }
    dispatch!(dt, op, input, inout, count;
        int {
            Char => c_char,
            SignedChar => i8,
            UnsignedChar => c_uchar,
            Short => c_short,
            UnsignedShort => c_ushort,
            Int => c_int,
            Unsigned => c_uint,
            Long => c_long,
            UnsignedLong => c_ulong,
            LongLong => c_longlong,
            UnsignedLongLong => c_ulonglong,
            Int8 => i8,
            Int16 => i16,
            Int32 => i32,
            Int64 => i64,
            Uint8 => u8,
            Uint16 => u16,
            Uint32 => u32,
            Uint64 => u64,
            Aint => i64,
            Offset => i64,
            Count => i64,
        }
        float {
            Float => f32,
            Double => f64,
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_OPS: [Op; 4] = [Op::Sum, Op::Prod, Op::Min, Op::Max];

    /// Runs `reduce_local` on copies of `a` (input) and `b` (inout) placed at byte offset
    /// `shift` (so 1 makes both unaligned) and returns the result.
    fn run<T: Copy>(op: Op, dt: Datatype, a: &[T], b: &[T], shift: usize) -> Vec<T> {
        let sz = std::mem::size_of::<T>();
        assert_eq!(sz, dt.size());
        let n = a.len();
        let len = std::mem::size_of_val(a);
        assert_eq!(len, std::mem::size_of_val(b));
        let mut ia = vec![0u8; len + 16];
        let mut ib = vec![0u8; len + 16];
        unsafe {
            std::ptr::copy_nonoverlapping(a.as_ptr() as *const u8, ia.as_mut_ptr().add(shift), len);
            std::ptr::copy_nonoverlapping(b.as_ptr() as *const u8, ib.as_mut_ptr().add(shift), len);
            // Guard bytes after the data must stay untouched.
            ib[shift + len] = 0xA5;
            reduce_local(
                op,
                dt,
                ia.as_ptr().add(shift),
                ib.as_mut_ptr().add(shift),
                n,
            )
            .unwrap();
            assert_eq!(ib[shift + len], 0xA5, "wrote past the end");
            (0..n)
                .map(|i| (ib.as_ptr().add(shift + i * sz) as *const T).read_unaligned())
                .collect()
        }
    }

    /// Checks every op on `dt` for aligned and unaligned buffers against a scalar model.
    macro_rules! check_int {
        ($name:ident, $t:ty, $dt:expr) => {
            #[test]
            fn $name() {
                let vals: Vec<$t> = vec![
                    <$t>::MIN,
                    <$t>::MAX,
                    0 as $t,
                    1 as $t,
                    2 as $t,
                    3 as $t,
                    <$t>::MAX / 2,
                    <$t>::MIN / 2 + 1,
                    100u8 as $t,
                    7 as $t,
                ];
                // All pairs, plus a long tail so the vector loop and its remainder run.
                let mut a = Vec::new();
                let mut b = Vec::new();
                for x in &vals {
                    for y in &vals {
                        a.push(*x);
                        b.push(*y);
                    }
                }
                for i in 0..257usize {
                    a.push((i as u8).wrapping_mul(37) as $t);
                    b.push((i as u8).wrapping_mul(11) as $t);
                }
                for op in ALL_OPS {
                    let want: Vec<$t> = a
                        .iter()
                        .zip(&b)
                        .map(|(&x, &y)| match op {
                            Op::Sum => y.wrapping_add(x),
                            Op::Prod => y.wrapping_mul(x),
                            Op::Min => y.min(x),
                            Op::Max => y.max(x),
                        })
                        .collect();
                    for shift in [0, 1, 3] {
                        assert_eq!(
                            run(op, $dt, &a, &b, shift),
                            want,
                            "{:?} shift {}",
                            op,
                            shift
                        );
                    }
                    // In place (input == inout), as MPI_IN_PLACE reductions do.
                    let mut c = b.clone();
                    unsafe {
                        reduce_local(
                            op,
                            $dt,
                            c.as_ptr() as *const u8,
                            c.as_mut_ptr() as *mut u8,
                            c.len(),
                        )
                        .unwrap();
                    }
                    let want_self: Vec<$t> = b
                        .iter()
                        .map(|&y| match op {
                            Op::Sum => y.wrapping_add(y),
                            Op::Prod => y.wrapping_mul(y),
                            Op::Min | Op::Max => y,
                        })
                        .collect();
                    assert_eq!(c, want_self, "{:?} in place", op);
                }
            }
        };
    }

    check_int!(char_, c_char, Datatype::Char);
    check_int!(signed_char, i8, Datatype::SignedChar);
    check_int!(unsigned_char, u8, Datatype::UnsignedChar);
    check_int!(short, i16, Datatype::Short);
    check_int!(unsigned_short, u16, Datatype::UnsignedShort);
    check_int!(int, i32, Datatype::Int);
    check_int!(unsigned, u32, Datatype::Unsigned);
    check_int!(long, i64, Datatype::Long);
    check_int!(unsigned_long, u64, Datatype::UnsignedLong);
    check_int!(long_long, i64, Datatype::LongLong);
    check_int!(unsigned_long_long, u64, Datatype::UnsignedLongLong);
    check_int!(int8, i8, Datatype::Int8);
    check_int!(int16, i16, Datatype::Int16);
    check_int!(int32, i32, Datatype::Int32);
    check_int!(int64, i64, Datatype::Int64);
    check_int!(uint8, u8, Datatype::Uint8);
    check_int!(uint16, u16, Datatype::Uint16);
    check_int!(uint32, u32, Datatype::Uint32);
    check_int!(uint64, u64, Datatype::Uint64);
    check_int!(aint, i64, Datatype::Aint);
    check_int!(offset, i64, Datatype::Offset);
    check_int!(count, i64, Datatype::Count);

    #[test]
    fn signed_vs_unsigned_min() {
        // -1 as a signed char is the minimum; as unsigned 255 is the maximum.
        assert_eq!(
            run(Op::Min, Datatype::SignedChar, &[-1i8], &[5], 0),
            vec![-1]
        );
        assert_eq!(
            run(Op::Min, Datatype::UnsignedChar, &[255u8], &[5], 0),
            vec![5]
        );
        assert_eq!(
            run(Op::Sum, Datatype::Int, &[i32::MAX], &[1], 1),
            vec![i32::MIN]
        );
        assert_eq!(
            run(Op::Prod, Datatype::Unsigned, &[u32::MAX], &[2], 1),
            vec![u32::MAX - 1]
        );
    }

    macro_rules! check_float {
        ($name:ident, $t:ty, $dt:expr) => {
            #[test]
            fn $name() {
                let vals: Vec<$t> = vec![
                    0.0,
                    -0.0,
                    1.0,
                    -1.5,
                    2.25,
                    1e10,
                    -3e-5,
                    <$t>::MAX,
                    <$t>::MIN_POSITIVE,
                    <$t>::INFINITY,
                    <$t>::NEG_INFINITY,
                    0.1,
                ];
                let mut a = Vec::new();
                let mut b = Vec::new();
                for x in &vals {
                    for y in &vals {
                        a.push(*x);
                        b.push(*y);
                    }
                }
                for i in 0..131 {
                    a.push(i as $t * 0.5 - 20.0);
                    b.push(i as $t * -0.25 + 3.0);
                }
                for op in ALL_OPS {
                    let want: Vec<$t> = a
                        .iter()
                        .zip(&b)
                        .map(|(&x, &y)| match op {
                            Op::Sum => y + x,
                            Op::Prod => y * x,
                            Op::Min => {
                                if y < x {
                                    y
                                } else {
                                    x
                                }
                            }
                            Op::Max => {
                                if y > x {
                                    y
                                } else {
                                    x
                                }
                            }
                        })
                        .collect();
                    for shift in [0, 1, 2, 5] {
                        let got = run(op, $dt, &a, &b, shift);
                        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                            // Compare bit patterns except for NaN (inf - inf, 0 * inf).
                            assert!(
                                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                                "{:?} shift {} element {}: {} != {}",
                                op,
                                shift,
                                k,
                                g,
                                w
                            );
                        }
                    }
                }
            }
        };
    }

    check_float!(float, f32, Datatype::Float);
    check_float!(double, f64, Datatype::Double);

    /// `long double` as the C kernel sees it: converted from and to `double` through the
    /// kernel's helpers, so the test does not depend on the 80-bit or 128-bit format.
    mod ld {
        extern "C" {
            pub fn mpicore_ld_from_double(d: f64, out: *mut u8);
            pub fn mpicore_ld_to_double(inp: *const u8) -> f64;
        }
    }

    fn ld_encode(vals: &[f64], shift: usize) -> Vec<u8> {
        let mut buf = vec![0u8; vals.len() * 16 + shift];
        for (i, &v) in vals.iter().enumerate() {
            unsafe { ld::mpicore_ld_from_double(v, buf.as_mut_ptr().add(shift + i * 16)) };
        }
        buf
    }

    fn ld_decode(buf: &[u8], n: usize, shift: usize) -> Vec<f64> {
        (0..n)
            .map(|i| unsafe { ld::mpicore_ld_to_double(buf.as_ptr().add(shift + i * 16)) })
            .collect()
    }

    #[test]
    fn long_double() {
        let a: Vec<f64> = (0..37).map(|i| i as f64 * 1.5 - 10.0).collect();
        let b: Vec<f64> = (0..37).map(|i| 7.0 - i as f64 * 0.5).collect();
        for op in ALL_OPS {
            for shift in [0, 1, 8] {
                let ia = ld_encode(&a, shift);
                let mut ib = ld_encode(&b, shift);
                unsafe {
                    reduce_local(
                        op,
                        Datatype::LongDouble,
                        ia.as_ptr().add(shift),
                        ib.as_mut_ptr().add(shift),
                        a.len(),
                    )
                    .unwrap();
                }
                let got = ld_decode(&ib, a.len(), shift);
                let want: Vec<f64> = a
                    .iter()
                    .zip(&b)
                    .map(|(&x, &y)| match op {
                        // Exact in double for these small multiples of 1/4.
                        Op::Sum => y + x,
                        Op::Prod => y * x,
                        Op::Min => y.min(x),
                        Op::Max => y.max(x),
                    })
                    .collect();
                assert_eq!(got, want, "{:?} shift {}", op, shift);
            }
        }
    }

    #[test]
    fn long_double_has_extra_precision() {
        // 1 + 2^-60 is not representable in double but is in x87 extended (64-bit
        // mantissa) and IEEE quad: (1 + 2^-60) - 1 must come back as 2^-60 where
        // long double is wider than double.
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            let tiny = 2f64.powi(-60);
            let one = ld_encode(&[1.0], 0);
            let mut acc = ld_encode(&[tiny], 0);
            unsafe {
                reduce_local(
                    Op::Sum,
                    Datatype::LongDouble,
                    one.as_ptr(),
                    acc.as_mut_ptr(),
                    1,
                )
                .unwrap();
            }
            let minus_one = ld_encode(&[-1.0], 0);
            unsafe {
                reduce_local(
                    Op::Sum,
                    Datatype::LongDouble,
                    minus_one.as_ptr(),
                    acc.as_mut_ptr(),
                    1,
                )
                .unwrap();
            }
            assert_eq!(ld_decode(&acc, 1, 0), vec![tiny]);
        }
    }

    #[test]
    fn invalid_combinations() {
        for dt in [
            Datatype::Byte,
            Datatype::Packed,
            Datatype::CBool,
            Datatype::WChar,
        ] {
            for op in ALL_OPS {
                let e = check(op, dt).unwrap_err();
                assert_eq!(e.class, ErrorClass::Op);
                assert!(
                    e.msg.contains(op.name()) && e.msg.contains(dt.name()),
                    "{}",
                    e.msg
                );
                let mut x = [7u8; 4];
                let y = [1u8; 4];
                let e = unsafe { reduce_local(op, dt, y.as_ptr(), x.as_mut_ptr(), 1) }.unwrap_err();
                assert_eq!(e.class, ErrorClass::Op);
                assert_eq!(x, [7u8; 4], "nothing written on error");
            }
        }
    }

    #[test]
    fn zero_count_touches_nothing() {
        for op in ALL_OPS {
            unsafe {
                reduce_local(
                    op,
                    Datatype::Double,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    0,
                )
                .unwrap();
                reduce_local(
                    op,
                    Datatype::LongDouble,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    0,
                )
                .unwrap();
            }
        }
    }
}
