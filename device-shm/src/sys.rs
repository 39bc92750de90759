//! The raw system calls of the device, each through [`cvt`], which turns the C convention
//! (-1 and `errno`) into an [`io::Error`]: futex wait/wake on a shared word, pidfd, and
//! cross-memory attach.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

#[inline]
fn cvt(ret: i64) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// FUTEX_WAIT on a word of a shared mapping (not FUTEX_PRIVATE: the word is shared between
/// processes). Returns when woken, when `*word != expected`, on a signal, or after `timeout`.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; the kernel only
    // reads it. EAGAIN/EINTR/ETIMEDOUT are all "return to the caller", so the result is
    // ignored.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// FUTEX_WAKE of up to `n` waiters on a shared word.
pub(crate) fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not access memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, n);
    }
}

/// pidfd_open(pid): a descriptor that becomes readable when the process exits.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<RawFd> {
    // SAFETY: no memory is passed.
    cvt(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) }).map(|fd| fd as RawFd)
}

/// Whether the process behind `pidfd` has exited (its pidfd is readable).
pub(crate) fn pidfd_exited(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on our stack, zero timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    r > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

/// Closes a descriptor (errors ignored).
pub(crate) fn close(fd: RawFd) {
    // SAFETY: the caller owns `fd` and does not use it afterwards.
    unsafe { libc::close(fd) };
}

/// Copies `len` bytes from our `src` into process `pid`'s memory at address `dst`
/// (process_vm_writev), looping over partial transfers.
///
/// # Safety
/// `src .. src+len` must be valid for reads. The remote range is checked by the kernel
/// (an unmapped address gives `EFAULT`); nothing in our address space is written.
pub(crate) unsafe fn cma_write(pid: i32, src: *const u8, dst: u64, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let l = libc::iovec {
            iov_base: src.wrapping_add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        let r = libc::iovec {
            iov_base: (dst as usize).wrapping_add(done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: the caller guarantees the local range; the remote one is checked by the
        // kernel.
        let n = cvt(unsafe { libc::process_vm_writev(pid, &l, 1, &r, 1, 0) } as i64)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "process_vm_writev wrote 0",
            ));
        }
        done += n;
    }
    Ok(())
}
