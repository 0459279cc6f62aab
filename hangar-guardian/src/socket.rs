//! The guardian's end of its socket (`SOCK_SEQPACKET` on stdin, one message a line, pipe copies
//! attached with `SCM_RIGHTS`).

use std::io::IoSliceMut;
use std::os::fd::RawFd;
use std::time::Duration;

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};

/// What one receive brought.
pub enum Received {
    /// A message of `len` bytes in the buffer, with the descriptors attached to it.
    Message(usize, Vec<RawFd>),
    /// Interrupted: nothing yet.
    Nothing,
    /// The supervisor's end closed (it exited, however it died), or the socket failed.
    End,
}

/// Whether a message (or the end) arrives within `wait`.
pub fn message_within(wait: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    // Whole milliseconds, rounded up: a wait cut down to 0 would spin until the deadline.
    let millis = u64::try_from(wait.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    let timeout = PollTimeout::try_from(Duration::from_millis(millis)).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => false,
        // Ready, or an error that `receive` will report.
        Ok(_) | Err(_) => true,
    }
}

/// Receives one message into `buf` (close-on-exec descriptors).
pub fn receive(buf: &mut [u8]) -> Received {
    let mut space = nix::cmsg_space!([RawFd; 8]);
    let mut iov = [IoSliceMut::new(buf)];
    match recvmsg::<()>(0, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
        Ok(message) if message.bytes == 0 => Received::End,
        Ok(message) => {
            let fds: Vec<RawFd> = message
                .cmsgs()
                .into_iter()
                .flatten()
                .flat_map(|cmsg| match cmsg {
                    ControlMessageOwned::ScmRights(fds) => fds,
                    _ => Vec::new(),
                })
                .collect();
            Received::Message(message.bytes, fds)
        }
        Err(nix::errno::Errno::EINTR) => Received::Nothing,
        Err(_) => Received::End,
    }
}
