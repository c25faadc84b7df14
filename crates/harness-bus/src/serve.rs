//! The tool socket's loop: one thread reads every connection, and a call's backend runs on a
//! thread of its own (docs/protocol.md, section 2, "Bounds").
//!
//! Why one thread and not a thread per connection: what a client can make the runner hold must
//! not grow with the number of clients. Here a connection is a descriptor and a buffer; its line
//! is read without blocking, checked and parsed on the loop thread, one line at a time, so the
//! parse of a large line is never done 256 times at once; only a call that passed every check
//! gets a thread, with a small stack, for as long as its backend takes.
//!
//! The bounds, each against a client that is idle, slow or hostile:
//!
//! - **Line length.** Any connection may buffer [`SMALL_LINE`] bytes of an unfinished line; past
//!   that it needs one of [`LARGE_SLOTS`] slots, held until the line's reply is written, to buffer
//!   up to [`MAX_REQUEST_BYTES`]. With no slot free, the holder still reading its line that started
//!   first is answered `busy` and closed and the slot goes to the newcomer; if every holder is in a
//!   call, the newcomer is answered `busy` and closed.
//! - **Time.** A request line must end within [`LINE_DEADLINE`] of its first byte, a reply must be
//!   taken within [`WRITE_DEADLINE`]; an idle connection is closed after [`IDLE_TIMEOUT`].
//! - **Connections.** At most [`MAX_CONNECTIONS`]; the next one takes the place of the connection
//!   idle the longest that is not in a call (answered `busy` and closed). Only when every
//!   connection is in a call is the newcomer answered `busy`.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::net::SendFlags;

use harness_tools::{MAX_REQUEST_BYTES, ToolErrorKind, ToolReply};

use crate::server::{Shared, call, check};

/// The most connections open at once.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// How long a connection may sit idle between calls before it is closed.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a request line may take from its first byte to its newline.
pub(crate) const LINE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a reply may wait for the client to take it.
pub(crate) const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// What any connection may buffer of an unfinished request line. Every call of every tool but
/// write_record and change_organization fits well below it in practice (the longest other text,
/// raise_decision's context, is 8000 characters).
pub(crate) const SMALL_LINE: usize = 16 * 1024;
/// How many connections may buffer a line longer than [`SMALL_LINE`] at once.
pub(crate) const LARGE_SLOTS: usize = 4;
/// The stack of a call's thread: it makes one backend call (a socket round trip and the parse
/// of the reply, at most 128 levels deep).
const CALL_STACK: usize = 256 * 1024;
/// The most bytes one read takes from one connection, so that every ready connection gets a
/// turn in each round.
const READ_CHUNK: usize = 64 * 1024;

/// What a call's thread sends back: the connection and what it could not write of its reply.
pub(crate) type Done = (u64, Vec<u8>);

/// What a connection waits for after its next line was looked at.
enum Next {
    /// A reply was queued: write it.
    Flush,
    /// Its client, a call's thread, or nothing.
    Wait,
}

/// One client connection.
struct Conn {
    stream: UnixStream,
    /// What was read and not yet answered: the current line, and whatever followed it.
    input: Vec<u8>,
    /// When the first byte of the line being read arrived.
    line_started: Option<Instant>,
    /// When the last byte was read or written.
    last_active: Instant,
    /// The reply being written, and how much of it is written.
    output: Vec<u8>,
    written: usize,
    /// When the reply was queued.
    output_since: Option<Instant>,
    /// A call of this connection is on its thread.
    in_call: bool,
    /// It holds one of the large-line slots.
    large: bool,
    /// The client shut its side: the lines it sent are answered, then the connection closes.
    eof: bool,
    /// Close once the reply is written.
    close_after: bool,
}

impl Conn {
    fn new(stream: UnixStream, now: Instant) -> Self {
        Self {
            stream,
            input: Vec::new(),
            line_started: None,
            last_active: now,
            output: Vec::new(),
            written: 0,
            output_since: None,
            in_call: false,
            large: false,
            eof: false,
            close_after: false,
        }
    }

    /// Returns true if and only if the connection waits for its client's next bytes: no call on
    /// its thread and no reply to write.
    fn reading(&self) -> bool {
        !self.in_call && self.output.is_empty()
    }

    fn line_end(&self) -> Option<usize> {
        self.input.iter().position(|&byte| byte == b'\n')
    }

    fn queue(&mut self, reply: &[u8], now: Instant) {
        self.output.extend_from_slice(reply);
        self.output_since.get_or_insert(now);
    }

    /// Writes what it can of the reply without blocking; false when the connection is broken.
    fn flush(&mut self, now: Instant) -> bool {
        while self.written < self.output.len() {
            let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
            match rustix::net::send(&self.stream, &self.output[self.written..], flags) {
                Ok(sent) => {
                    self.written += sent;
                    self.last_active = now;
                }
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return false,
            }
        }
        self.output = Vec::new();
        self.written = 0;
        self.output_since = None;
        true
    }
}

/// The loop's state.
struct Server {
    shared: Arc<Shared>,
    conns: BTreeMap<u64, Conn>,
    next_id: u64,
    slots_used: usize,
    done_tx: Sender<Done>,
    wake: Arc<OwnedFd>,
    /// The buffer one read goes to, allocated with the first connection.
    chunk: Vec<u8>,
}

/// Serves `listener` until `stopping` is set and `wake` is signalled.
pub(crate) fn run(
    listener: &UnixListener,
    shared: Arc<Shared>,
    stopping: &AtomicBool,
    wake: Arc<OwnedFd>,
    (done_tx, done_rx): (Sender<Done>, Receiver<Done>),
) {
    let mut server = Server {
        shared,
        conns: BTreeMap::new(),
        next_id: 0,
        slots_used: 0,
        done_tx,
        wake,
        chunk: Vec::new(),
    };
    while !stopping.load(Ordering::SeqCst) {
        server.round(listener, &done_rx);
    }
}

impl Server {
    /// One `poll` and everything that became ready.
    fn round(&mut self, listener: &UnixListener, done_rx: &Receiver<Done>) {
        let now = Instant::now();
        let timeout = self.next_deadline(now).map(|at| at.saturating_duration_since(now));
        let mut ready: Vec<(u64, PollFlags)> = Vec::with_capacity(self.conns.len());
        let (listener_ready, woken) = {
            let mut ids = Vec::with_capacity(self.conns.len());
            let base =
                [PollFd::new(listener, PollFlags::IN), PollFd::new(&*self.wake, PollFlags::IN)];
            // An idle socket allocates nothing on this thread (no malloc arena of its own): the
            // poll set of the listener and the eventfd alone is an array.
            let mut base_only = base.clone();
            let mut fds = Vec::new();
            if !self.conns.is_empty() {
                fds.reserve_exact(self.conns.len() + 2);
                fds.extend(base);
            }
            for (&id, conn) in &self.conns {
                let events = if !conn.output.is_empty() {
                    PollFlags::OUT
                } else if conn.reading() && !conn.eof {
                    PollFlags::IN
                } else {
                    continue;
                };
                ids.push(id);
                fds.push(PollFd::new(&conn.stream, events));
            }
            let timespec =
                timeout.and_then(|timeout| rustix::event::Timespec::try_from(timeout).ok());
            let fds: &mut [PollFd<'_>] = if fds.is_empty() { &mut base_only } else { &mut fds };
            if rustix::event::poll(fds, timespec.as_ref()).is_err() {
                // EINTR, or out of memory for the poll set: the next round tries again; the
                // pause keeps a persistent error from spinning a core.
                thread::sleep(Duration::from_millis(10));
                return;
            }
            ready.extend(
                ids.iter()
                    .zip(&fds[2..])
                    .filter(|(_, fd)| !fd.revents().is_empty())
                    .map(|(&id, fd)| (id, fd.revents())),
            );
            (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
        };
        let now = Instant::now();
        if woken {
            let mut counter = [0u8; 8];
            let _ = rustix::io::read(&*self.wake, &mut counter);
        }
        while let Ok((id, rest)) = done_rx.try_recv() {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.in_call = false;
                conn.last_active = now;
                if rest.is_empty() {
                    // The call's thread wrote the whole reply: the connection reads again.
                    self.after_reply(id, now);
                    ready.push((id, PollFlags::IN));
                } else {
                    conn.queue(&rest, now);
                    ready.push((id, PollFlags::OUT));
                }
            }
        }
        for (id, flags) in ready {
            self.service(id, flags, now);
        }
        if listener_ready {
            self.accept(listener, now);
        }
        self.expire(now);
    }

    /// The earliest time a connection runs out of time, if any.
    fn next_deadline(&self, now: Instant) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|conn| {
                if let Some(since) = conn.output_since {
                    Some(since + WRITE_DEADLINE)
                } else if !conn.reading() {
                    None
                } else if let Some(started) = conn.line_started {
                    Some(started + LINE_DEADLINE)
                } else {
                    Some(conn.last_active + IDLE_TIMEOUT)
                }
            })
            .min()
            .map(|at| at.max(now))
    }

    /// Accepts every pending connection, making room for each.
    fn accept(&mut self, listener: &UnixListener, now: Instant) {
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors, say: the next round tries again.
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.conns.len() >= MAX_CONNECTIONS && !self.evict_idlest() {
                refuse(&stream, "busy: every connection of the tool socket is in a call");
                continue;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.conns.insert(id, Conn::new(stream, now));
            // A client writes its request as it connects: read it now rather than a round later.
            self.service(id, PollFlags::IN, now);
        }
    }

    /// Closes the connection idle the longest that is not in a call; false if there is none.
    fn evict_idlest(&mut self) -> bool {
        let idlest = self
            .conns
            .iter()
            .filter(|(_, conn)| !conn.in_call)
            .min_by_key(|(_, conn)| conn.last_active)
            .map(|(&id, _)| id);
        let Some(id) = idlest else { return false };
        self.close(id, Some("busy: closed to make room for another connection"));
        true
    }

    /// Closes connection `id`, answering it `reply` first unless a reply is half written.
    fn close(&mut self, id: u64, reply: Option<&str>) {
        if let Some(conn) = self.conns.remove(&id) {
            if conn.large {
                self.slots_used -= 1;
            }
            if let Some(text) = reply
                && conn.output.is_empty()
            {
                refuse(&conn.stream, text);
            }
        }
    }

    /// Reads, answers and writes what connection `id` is ready for, line after line, until it
    /// waits: for its client, for a call's thread, or for room to write a reply.
    fn service(&mut self, id: u64, flags: PollFlags, now: Instant) {
        let mut may_read = flags.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR);
        let mut may_write = flags.intersects(PollFlags::OUT | PollFlags::HUP | PollFlags::ERR);
        loop {
            let Some(conn) = self.conns.get_mut(&id) else { return };
            if !conn.output.is_empty() {
                if !may_write {
                    return;
                }
                if !conn.flush(now) {
                    self.close(id, None);
                    return;
                }
                if !conn.output.is_empty() {
                    return;
                }
                if conn.close_after {
                    self.close(id, None);
                    return;
                }
                self.after_reply(id, now);
            }
            let Some(conn) = self.conns.get_mut(&id) else { return };
            if may_read && conn.reading() && !conn.eof {
                may_read = false;
                self.read(id, now);
            }
            match self.next_line(id, now) {
                Next::Flush => may_write = true,
                Next::Wait => return,
            }
        }
    }

    /// After a reply is written: gives back a large slot no longer needed, and starts the
    /// deadline of a line that already waits in the buffer.
    fn after_reply(&mut self, id: u64, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.large && conn.input.len() <= SMALL_LINE {
            conn.large = false;
            self.slots_used -= 1;
            conn.input.shrink_to(SMALL_LINE);
        }
        conn.line_started = (!conn.input.is_empty()).then_some(now);
    }

    /// One read of what the client sent, up to what the connection may buffer.
    fn read(&mut self, id: u64, now: Instant) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        let limit = if conn.large { MAX_REQUEST_BYTES } else { SMALL_LINE };
        if self.chunk.is_empty() {
            self.chunk = vec![0u8; READ_CHUNK];
        }
        let room = limit.saturating_sub(conn.input.len()).min(self.chunk.len());
        if room == 0 {
            return;
        }
        match (&conn.stream).read(&mut self.chunk[..room]) {
            Ok(0) => conn.eof = true,
            Ok(read) => {
                if conn.input.is_empty() {
                    conn.line_started = Some(now);
                }
                conn.input.extend_from_slice(&self.chunk[..read]);
                conn.last_active = now;
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                self.close(id, None);
            }
        }
    }

    /// Answers the next whole line of connection `id` if it is waiting for one; handles a line
    /// that outgrew what the connection may buffer, and the end of the client's side.
    fn next_line(&mut self, id: u64, now: Instant) -> Next {
        let Some(conn) = self.conns.get_mut(&id) else { return Next::Wait };
        if !conn.reading() {
            return Next::Wait;
        }
        let Some(end) = conn.line_end() else {
            if conn.eof {
                // The client hung up mid-request (or after its last reply): nothing to answer.
                self.close(id, None);
            } else if conn.input.len() >= MAX_REQUEST_BYTES {
                let text =
                    format!("request-too-large: a request is at most {MAX_REQUEST_BYTES} bytes");
                let reply = ToolReply::failure(ToolErrorKind::RequestTooLarge, text);
                conn.queue(reply.to_line().as_bytes(), now);
                conn.close_after = true;
                return Next::Flush;
            } else if conn.input.len() >= SMALL_LINE && !conn.large {
                self.take_slot(id);
            }
            return Next::Wait;
        };
        let rest = conn.input.split_off(end + 1);
        // The newline stays: the parser reads it as white space, or names it in a string.
        let line = std::mem::replace(&mut conn.input, rest);
        conn.line_started = None;
        let (tool, args) = match check(&self.shared, &line) {
            Ok(checked) => checked,
            Err(reply) => {
                conn.queue(reply.to_line().as_bytes(), now);
                return Next::Flush;
            }
        };
        drop(line);
        conn.in_call = true;
        let shared = self.shared.clone();
        let done = self.done_tx.clone();
        let wake = self.wake.clone();
        // The call's thread writes what the client's buffer takes of the reply itself, on its
        // own descriptor of the connection: the loop does not touch a connection in a call, and
        // the reply need not wait for the loop to wake. The loop writes the rest, if any.
        let writer = conn.stream.try_clone().ok();
        let spawned = thread::Builder::new().name("tool-call".into()).stack_size(CALL_STACK).spawn(
            move || {
                let mut line = call(&shared, tool, &args).to_line().into_bytes();
                if let Some(writer) = writer {
                    let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
                    let sent = rustix::net::send(&writer, &line, flags).unwrap_or(0);
                    line.drain(..sent);
                }
                if done.send((id, line)).is_ok() {
                    let _ = rustix::io::write(&*wake, &1u64.to_ne_bytes());
                }
            },
        );
        match spawned {
            Ok(_) => Next::Wait,
            Err(error) => {
                conn.in_call = false;
                let text = format!("failed: the tool socket could not start the call: {error}");
                conn.queue(
                    ToolReply::failure(ToolErrorKind::Failed, text).to_line().as_bytes(),
                    now,
                );
                Next::Flush
            }
        }
    }

    /// Gives connection `id` a large-line slot, taking one from the slowest holder still reading
    /// when none is free; answers it `busy` when every holder is in a call. The rest of its line
    /// is read in the next rounds.
    fn take_slot(&mut self, id: u64) {
        if self.slots_used >= LARGE_SLOTS {
            let slowest = self
                .conns
                .iter()
                .filter(|(_, conn)| conn.large && conn.reading())
                .min_by_key(|(_, conn)| conn.line_started)
                .map(|(&id, _)| id);
            let Some(slowest) = slowest else {
                let text = format!(
                    "busy: {LARGE_SLOTS} requests over {SMALL_LINE} bytes are in calls; try again"
                );
                self.close(id, Some(&text));
                return;
            };
            self.close(
                slowest,
                Some("busy: the tool socket closed this request to read a newer one"),
            );
        }
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.large = true;
            self.slots_used += 1;
        }
    }

    /// Closes every connection whose time ran out.
    fn expire(&mut self, now: Instant) {
        let mut late = Vec::new();
        for (&id, conn) in &self.conns {
            if let Some(since) = conn.output_since {
                if now >= since + WRITE_DEADLINE {
                    late.push((id, None));
                }
            } else if conn.reading() {
                match conn.line_started {
                    Some(started) if now >= started + LINE_DEADLINE => {
                        late.push((id, Some(format!(
                            "bad-request: the request line did not end within {} s of its first byte",
                            LINE_DEADLINE.as_secs()
                        ))));
                    }
                    None if now >= conn.last_active + IDLE_TIMEOUT => late.push((id, None)),
                    _ => {}
                }
            }
        }
        for (id, text) in late {
            self.close(id, text.as_deref());
        }
    }
}

/// Answers `text` as an error on a connection about to be closed, if the client's buffer takes
/// it at once; never blocks.
fn refuse(stream: &UnixStream, text: &str) {
    let kind =
        if text.starts_with("busy") { ToolErrorKind::Busy } else { ToolErrorKind::BadRequest };
    let line = ToolReply::failure(kind, text).to_line();
    let _ = rustix::net::send(
        stream.as_fd(),
        line.as_bytes(),
        SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
    );
}
