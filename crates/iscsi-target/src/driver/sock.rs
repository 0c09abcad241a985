//! A connection's socket as the pump reads and writes it: `recv` and
//! `writev` as bare system calls (rustix), without libc's wrappers, which
//! make each call a thread-cancellation point (two more calls into libc
//! per system call, about 3% of the target's CPU at 32 sessions x QD 2,
//! where a send or receive carries one or two commands).

use rustix::net::{RecvFlags, SendFlags};
use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;

/// A borrowed connection socket.
#[derive(Clone, Copy)]
pub(crate) struct Sock<'a>(pub(crate) &'a TcpStream);

impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::net::recv(self.0, buf, RecvFlags::empty())?.0)
    }
}

impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(self.0, buf, SendFlags::NOSIGNAL)?)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // writev(2), as std does: a socket whose peer is gone gets EPIPE,
        // and SIGPIPE is ignored in a Rust program.
        Ok(rustix::io::writev(self.0, bufs)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
