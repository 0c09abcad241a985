//! A connection as its worker holds it.

use super::pump::Pump;
use std::net::TcpStream;
use std::sync::Arc;

/// A connection on its worker: its socket and the pump between the socket
/// and the connection's state machine.
pub(crate) struct Slot {
    /// The socket.
    pub(super) stream: Arc<TcpStream>,
    /// The connection and its buffers.
    pub(super) pump: Pump,
    /// Whether it has been placed beside its session's other connections
    /// (or found to be where it belongs) once in full feature phase.
    pub(super) placed: bool,
    /// Whether it is in its worker's `unsent` list.
    pub(super) unsent: bool,
}
