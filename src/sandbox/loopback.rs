//! The kernel's own loopback: `lo` of its private network namespace,
//! brought up by the init before anything runs there. A new namespace has
//! only `lo`, and down; ipykernel sends the output of forked children
//! (`multiprocessing`) over `tcp://127.0.0.1`, and local servers (Dask,
//! ipyparallel) talk there too. Up, `lo` reaches only the namespace itself:
//! the host's loopback and every other address have no route.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Brings `lo` up in the calling process's network namespace (an ioctl on
/// a datagram socket, as `ip link set lo up` does; no program needed).
// socket(2) and ioctl(2) have no safe wrapper for interface flags; each block says why it is sound.
#[allow(unsafe_code)]
pub fn bring_up() -> std::io::Result<()> {
    // SAFETY: a plain syscall with integer arguments.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a non-negative result is a new descriptor that we own.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: the request is a valid ifreq naming the interface; the kernel
    // fills in its flags.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut request) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe {
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: as above; the kernel reads the name and flags.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS as _, &request) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
