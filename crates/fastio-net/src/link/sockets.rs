//! The kernel's bound on a send no peer acknowledges (the only module of
//! this crate with `unsafe`: two socket options, by file descriptor).
//!
//! Why: Zenoh's low-latency transport (`options.rs`) writes each message
//! to the TCP socket from the thread that puts it, holding the link's
//! lock, with no deadline (zenoh-transport 1.10,
//! `unicast/lowlatency/link.rs`, `send` → `write_all(.., None)`). When the
//! peer's link is cut while the socket's send buffer is full (a stream's
//! frames in flight), that write waits for TCP to give up: some 15
//! minutes (`tcp_retries2`). Zenoh's lease does expire meanwhile, but
//! closing the transport first sends a `close` under the same lock
//! (`finalize` → `send_async`), so it waits behind the stuck write: the
//! transport never closes, the peer's liveliness tokens never vanish,
//! and every later put towards that peer (the host's own status lines,
//! from the driver's thread) waits too. The host hangs, and so do the
//! hosts waiting for its `done`.
//!
//! `TCP_USER_TIMEOUT` set to the lease makes the kernel abort a
//! connection whose sent data stays unacknowledged that long: the stuck
//! write fails, the lock is let go, Zenoh closes the transport and the
//! peer's tokens vanish, as the lease says. A live peer acknowledges
//! what it receives (and, with its window shut, the kernel's probes) in
//! far less: a peer that acknowledges nothing for a whole lease has sent
//! nothing either, and Zenoh's lease would end it anyway.

#![allow(unsafe_code)]

use std::time::Duration;

/// Sets `TCP_USER_TIMEOUT` to `timeout` on every TCP socket of this
/// process that has another value: Zenoh's links (and its listeners,
/// whose accepted links inherit it). Zenoh does not hand its sockets
/// out, so they are found by descriptor (`/proc/self/fd`); any other TCP
/// socket of the process gets the same bound, which no socket with a live
/// peer reaches. Returns how many were set.
pub(crate) fn bound_unacknowledged_sends(timeout: Duration) -> usize {
    let ms = libc::c_uint::try_from(timeout.as_millis()).unwrap_or(libc::c_uint::MAX);
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return 0;
    };
    let mut set = 0;
    for fd in fds.flatten() {
        let Some(n) = fd.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let socket = std::fs::read_link(fd.path())
            .is_ok_and(|l| l.as_os_str().as_encoded_bytes().starts_with(b"socket:"));
        if socket
            && option(n, libc::SOL_SOCKET, libc::SO_PROTOCOL) == Some(libc::IPPROTO_TCP as _)
            && option(n, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) != Some(ms)
            && set_option(n, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)
        {
            set += 1;
        }
    }
    set
}

/// An integer socket option of descriptor `fd`, if it has it.
fn option(fd: i32, level: i32, name: i32) -> Option<libc::c_uint> {
    let mut value: libc::c_uint = 0;
    let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes to `value`, a local of
    // that size, and `len`. The descriptor is not ours: it may be closed
    // or reused meanwhile, and then the call fails (EBADF, ENOTSOCK) or
    // reads another socket's option; no memory is involved but the locals.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&raw mut value).cast::<libc::c_void>(),
            &mut len,
        )
    };
    (r == 0).then_some(value)
}

/// Sets an integer socket option of descriptor `fd`; whether it was set.
fn set_option(fd: i32, level: i32, name: i32, value: libc::c_uint) -> bool {
    // SAFETY: setsockopt reads `size_of::<c_uint>()` bytes from `value`, a
    // local. A descriptor closed and reused meanwhile fails the call or
    // gets this option too (only ever `TCP_USER_TIMEOUT` on a TCP socket,
    // which changes nothing but when it gives up on an unanswered send).
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const value).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    r == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn every_tcp_socket_of_the_process_gets_the_bound_and_nothing_else_does() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let timeout = Duration::from_millis(2345);
        assert!(bound_unacknowledged_sends(timeout) >= 3);
        for fd in [listener.as_raw_fd(), client.as_raw_fd(), server.as_raw_fd()] {
            assert_eq!(
                option(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
                Some(2345)
            );
        }
        assert_eq!(
            option(udp.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT),
            None
        );
    }
}
