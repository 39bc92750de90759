//! The raw system calls of the data path, each through [`cvt`], which turns the C
//! convention (-1 and `errno`) into an [`io::Error`]. Everything else uses `std` or `nix`.

use std::io;
use std::os::fd::RawFd;

/// Converts a syscall return value: negative means failure with the reason in `errno`.
#[inline]
fn cvt(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// An empty iovec, to initialise arrays.
pub(crate) const IOV_NULL: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// Builds an iovec from a pointer and a length in bytes.
#[inline]
pub(crate) fn iov(base: *const u8, len: usize) -> libc::iovec {
    libc::iovec {
        iov_base: base as *mut libc::c_void,
        iov_len: len,
    }
}

/// `sendmsg(fd, iov, MSG_NOSIGNAL | MSG_DONTWAIT)`: gathers the iovecs into the socket
/// without blocking; returns the number of bytes the kernel accepted.
///
/// # Safety
/// Every iovec must describe memory valid for reads for the duration of the call.
#[inline]
pub(crate) unsafe fn send_vectored(fd: RawFd, iovs: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: a zeroed msghdr is valid (no name, no control data); the iovecs are valid by
    // this function's contract and outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iovs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iovs.len() as _;
    // SAFETY: msg points to live iovecs; sendmsg only reads them.
    cvt(unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) })
}

/// `recvmsg(fd, iov, MSG_DONTWAIT)`: scatters up to the iovecs' total length from the socket
/// without blocking; returns the number of bytes read, 0 at end of stream.
///
/// # Safety
/// Every iovec must describe memory valid for writes for the duration of the call.
#[inline]
pub(crate) unsafe fn recv_vectored(fd: RawFd, iovs: &mut [libc::iovec]) -> io::Result<usize> {
    // SAFETY: as in send_vectored; the kernel writes only into the iovecs' memory, which is
    // valid for writes by this function's contract.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iovs.as_mut_ptr();
    msg.msg_iovlen = iovs.len() as _;
    // SAFETY: see above.
    cvt(unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) })
}

/// `poll(2)` on `fds` for up to `timeout_ms` milliseconds (negative: forever). Returns the
/// number of ready descriptors.
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: the pointer and length describe a live, exclusively borrowed slice of pollfd.
    let ret = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    cvt(ret as isize)
}
