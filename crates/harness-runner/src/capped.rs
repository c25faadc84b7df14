//! A turn's stderr file, bounded: the runner reads the adapter's stderr through a pipe and keeps
//! at most [`HEAD`] bytes from its start and [`TAIL`] bytes from its end, with one line between
//! them saying how many bytes were dropped (docs/runner.md, "The run directory").
//!
//! The head is written to the file as it arrives; the tail is held in a ring buffer of [`TAIL`]
//! bytes and written when the pipe ends or the supervisor gives up waiting for its end (a process
//! the turn left may hold the pipe open), whichever comes first. Nothing the turn prints makes the
//! runner hold more than [`TAIL`] bytes of it, or the file grow past `HEAD + TAIL` and the note.
//!
//! A write that fails (a full disk: `ENOSPC`) never fails the turn or the runner: the file keeps
//! what was written before it, the rest of the pipe is read and dropped so the child never blocks
//! on it, and a last note saying how many bytes are missing and why is tried once.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// How many bytes from the start of the stream the file keeps.
pub(crate) const HEAD: usize = 512 * 1024;
/// How many bytes from the end of the stream the file keeps.
pub(crate) const TAIL: usize = 512 * 1024;

/// The state the reader thread and the supervisor share.
#[derive(Debug)]
struct Sink {
    /// The file; `None` once finished (what arrives later is read and dropped).
    file: Option<File>,
    /// Head bytes still to write straight to the file.
    head_left: usize,
    /// The last bytes past the head, at most [`TAIL`].
    tail: VecDeque<u8>,
    /// Bytes past the head that left the ring (dropped).
    dropped: u64,
    /// Bytes read from the pipe.
    read: u64,
    /// Bytes written to the file.
    written: u64,
    /// The first write error; nothing more is written after it but the last note.
    error: Option<io::Error>,
    /// The pipe ended (end of file or a read error).
    ended: bool,
}

impl Sink {
    fn write(&mut self, bytes: &[u8]) {
        if self.error.is_some() || bytes.is_empty() {
            return;
        }
        let Some(file) = &mut self.file else { return };
        match file.write_all(bytes) {
            Ok(()) => self.written += bytes.len() as u64,
            Err(error) => self.error = Some(error),
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.file.is_none() {
            return;
        }
        self.read += bytes.len() as u64;
        let head = bytes.len().min(self.head_left);
        self.head_left -= head;
        self.write(&bytes[..head]);
        let rest = &bytes[head..];
        if rest.is_empty() {
            return;
        }
        // The ring never holds more than TAIL bytes: what would overflow it leaves from the front
        // before the new bytes come in, so it never reallocates past its first capacity.
        let rest = if rest.len() > TAIL {
            self.dropped += (rest.len() - TAIL) as u64;
            &rest[rest.len() - TAIL..]
        } else {
            rest
        };
        let overflow = (self.tail.len() + rest.len()).saturating_sub(TAIL);
        self.dropped += overflow as u64;
        self.tail.drain(..overflow);
        if self.tail.capacity() == 0 {
            self.tail.reserve_exact(TAIL);
        }
        self.tail.extend(rest);
    }

    /// Writes the note and the tail, and closes the file; later calls do nothing.
    fn finish(&mut self) {
        if self.file.is_none() {
            return;
        }
        if let Some(error) = self.error.take() {
            let missing = self.read - self.written;
            let note = format!(
                "\n[harness-runner: the last {missing} bytes of this turn's stderr are not in \
                 this file: writing it failed: {error}]\n"
            );
            // One try: the disk may still be full, and nothing depends on the note.
            if let Some(file) = &mut self.file {
                let _ = file.write_all(note.as_bytes());
            }
        } else {
            if self.dropped > 0 {
                let note = format!(
                    "\n[harness-runner: {} bytes of this turn's stderr dropped here; the file \
                     keeps the first {HEAD} and the last {TAIL} bytes]\n",
                    self.dropped
                );
                self.write(note.as_bytes());
            }
            let tail = std::mem::take(&mut self.tail);
            let (front, back) = tail.as_slices();
            self.write(front);
            self.write(back);
        }
        self.file = None;
    }
}

/// A pipe copied to a file, capped (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct CappedFile(Arc<(Mutex<Sink>, Condvar)>);

impl CappedFile {
    /// Starts a thread that reads `pipe` into `file`.
    pub(crate) fn start(mut pipe: impl Read + Send + 'static, file: File) -> io::Result<Self> {
        let sink = Sink {
            file: Some(file),
            head_left: HEAD,
            tail: VecDeque::new(),
            dropped: 0,
            read: 0,
            written: 0,
            error: None,
            ended: false,
        };
        let capped = Self(Arc::new((Mutex::new(sink), Condvar::new())));
        let shared = capped.clone();
        std::thread::Builder::new().name("supervise-stderr".into()).spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                let read = match pipe.read(&mut chunk) {
                    Ok(0) => 0,
                    Ok(read) => read,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => 0,
                };
                let (lock, ended) = &*shared.0;
                let mut sink = lock.lock().unwrap_or_else(PoisonError::into_inner);
                if read == 0 {
                    sink.ended = true;
                    sink.finish();
                    ended.notify_all();
                    return;
                }
                sink.push(&chunk[..read]);
            }
        })?;
        Ok(capped)
    }

    /// Waits up to `grace` for the end of the pipe, then finishes the file either way: what
    /// arrives after that is read and dropped.
    pub(crate) fn finish(&self, grace: Duration) {
        let (lock, ended) = &*self.0;
        let sink = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut sink, _) = ended
            .wait_timeout_while(sink, grace, |sink| !sink.ended)
            .unwrap_or_else(PoisonError::into_inner);
        sink.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(input: Vec<u8>, file: File) {
        let capped = CappedFile::start(io::Cursor::new(input), file).unwrap();
        capped.finish(Duration::from_secs(30));
    }

    #[test]
    fn a_short_stream_is_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("err");
        let input: Vec<u8> = (0..HEAD + TAIL).map(|i| (i % 251) as u8).collect();
        copy(input.clone(), File::create(&path).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), input);
    }

    #[test]
    fn a_long_stream_keeps_its_head_and_tail_and_says_what_was_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("err");
        let total = HEAD + TAIL + 3 * 1024 * 1024 + 17;
        let input: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        copy(input.clone(), File::create(&path).unwrap());
        let kept = std::fs::read(&path).unwrap();
        assert_eq!(&kept[..HEAD], &input[..HEAD]);
        assert_eq!(&kept[kept.len() - TAIL..], &input[total - TAIL..]);
        let note = String::from_utf8_lossy(&kept[HEAD..kept.len() - TAIL]).into_owned();
        let dropped = total - HEAD - TAIL;
        assert_eq!(
            note,
            format!(
                "\n[harness-runner: {dropped} bytes of this turn's stderr dropped here; the file \
                 keeps the first {HEAD} and the last {TAIL} bytes]\n"
            )
        );
    }

    /// `/dev/full` fails every write with `ENOSPC`: the copy still reads the whole stream (the
    /// child never blocks) and ends without an error reaching anyone.
    #[test]
    fn a_full_disk_fails_no_one() {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let capped = CappedFile::start(io::Cursor::new(vec![b'x'; 4 * 1024 * 1024]), full).unwrap();
        capped.finish(Duration::from_secs(30));
        let sink = capped.0.0.lock().unwrap();
        assert!(sink.ended && sink.file.is_none());
        assert_eq!((sink.read, sink.written), (4 * 1024 * 1024, 0));
    }
}
