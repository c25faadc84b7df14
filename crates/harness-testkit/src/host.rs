//! A fake host: its git socket backed by a real bare "working" repository, and its launch
//! socket, both speaking the host-socket wire of docs/protocol.md. For the runner's git tools.
//!
//! `working.push` fetches the uploaded bundle's branch into the work branch `work/vikunja-PROJECT-TASK`
//! of the working repository, fast-forward only (`not-fast-forward` otherwise), and answers
//! `{ref, commit, previous}`. `working.fetch` answers a review request with the work ref's
//! bundle. `working.land` and `launch` answer from a script. Every call is recorded.

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;

use serde_json::{Value, json};

use crate::process::new_command;

/// One call the fake host received.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCall {
    /// The capability it carried.
    pub cap: String,
    /// The operation.
    pub op: String,
    /// Its arguments.
    pub args: Value,
    /// How many bytes came with it.
    pub bytes: u64,
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<HostCall>,
    /// Review request id → (project, work ref).
    reviews: BTreeMap<String, (String, String)>,
    /// Scripted answers for `working.land` and `launch` (a `{"ok": ...}` object), by op.
    answers: BTreeMap<String, Value>,
    /// A `bytes` figure to announce for the next fetch instead of the real bundle's.
    announce: Option<u64>,
}

/// A running fake host; dropping it leaves its threads blocked on a socket nobody will use.
#[derive(Debug)]
pub struct FakeHost {
    dir: tempfile::TempDir,
    state: Arc<Mutex<State>>,
}

/// Runs git with no configuration but its own, in `dir`.
pub fn git(dir: &Path, args: &[&str]) -> io::Result<String> {
    let output = new_command(Path::new("git"))
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

impl FakeHost {
    /// Starts the host with an empty bare working repository.
    pub fn start() -> io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("harness-host-").tempdir()?;
        git(dir.path(), &["init", "--quiet", "--bare", "working.git"])?;
        let state = Arc::new(Mutex::new(State::default()));
        for (name, git_socket) in [("git.sock", true), ("launch.sock", false)] {
            let listener = UnixListener::bind(dir.path().join(name))?;
            let (state, root) = (state.clone(), dir.path().to_path_buf());
            thread::Builder::new().name(format!("fake-host-{name}")).spawn(move || {
                for stream in listener.incoming().flatten() {
                    let _ = serve(stream, &root, &state, git_socket);
                }
            })?;
        }
        Ok(Self { dir, state })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The git socket.
    pub fn git_socket(&self) -> PathBuf {
        self.dir.path().join("git.sock")
    }

    /// The launch socket.
    pub fn launch_socket(&self) -> PathBuf {
        self.dir.path().join("launch.sock")
    }

    /// The bare working repository.
    pub fn working(&self) -> PathBuf {
        self.dir.path().join("working.git")
    }

    /// Names review request `id`: a fetch of it sends `work_ref` of `project`.
    pub fn review(&self, id: &str, project: &str, work_ref: &str) {
        self.lock().reviews.insert(id.to_owned(), (project.to_owned(), work_ref.to_owned()));
    }

    /// Answers `op` (`working.land`, `launch`) with `reply`, a `{"ok": ...}` object.
    pub fn answer(&self, op: &str, reply: Value) {
        self.lock().answers.insert(op.to_owned(), reply);
    }

    /// Announces `bytes` for the next fetch instead of the real bundle's size.
    pub fn announce_next_fetch(&self, bytes: u64) {
        self.lock().announce = Some(bytes);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<HostCall> {
        self.lock().calls.clone()
    }
}

fn refusal(code: &str) -> Value {
    json!({"ok": false, "code": code, "message": format!("fake host: {code}")})
}

fn serve(
    stream: UnixStream,
    root: &Path,
    state: &Mutex<State>,
    git_socket: bool,
) -> io::Result<()> {
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let header: Value = serde_json::from_str(&line).map_err(io::Error::other)?;
    let bytes = header["bytes"].as_u64().unwrap_or(0);
    let op = header["op"].as_str().unwrap_or_default().to_owned();
    let args = header["args"].clone();
    let upload = root.join(format!("upload-{}.bundle", std::process::id()));
    if bytes > 0 {
        let mut file = std::fs::File::create(&upload)?;
        io::copy(&mut (&mut reader).take(bytes), &mut file)?;
    }
    state.lock().unwrap_or_else(PoisonError::into_inner).calls.push(HostCall {
        cap: header["cap"].as_str().unwrap_or_default().to_owned(),
        op: op.clone(),
        args: args.clone(),
        bytes,
    });
    let working = root.join("working.git");
    let mut payload: Option<Vec<u8>> = None;
    let reply = match (git_socket, op.as_str()) {
        (true, "working.push") => {
            let project = args["project"].as_str().unwrap_or_default();
            let task = args["task_ref"]
                .as_str()
                .unwrap_or_default()
                .rsplit('-')
                .next()
                .unwrap_or_default();
            let work_ref = format!("work/vikunja-{project}-{task}");
            let branch = args["branch"].as_str().unwrap_or_default();
            let previous = git(
                &working,
                &["rev-parse", "--verify", "--quiet", &format!("refs/heads/{work_ref}")],
            )
            .ok();
            let spec = format!("refs/heads/{branch}:refs/heads/{work_ref}");
            let path = upload.to_string_lossy().into_owned();
            match git(&working, &["fetch", "--quiet", &path, &spec]) {
                Ok(_) => {
                    let commit = git(&working, &["rev-parse", &format!("refs/heads/{work_ref}")])?;
                    json!({"ok": true, "result": {"ref": work_ref, "commit": commit, "previous": previous}})
                }
                Err(_) => refusal("not-fast-forward"),
            }
        }
        (true, "working.fetch") => {
            let request = args["request"].as_str().unwrap_or_default();
            let review =
                state.lock().unwrap_or_else(PoisonError::into_inner).reviews.get(request).cloned();
            match review {
                None => refusal("no-such-review"),
                Some((project, work_ref)) => {
                    let bundle = root.join("fetch.bundle");
                    let _ = std::fs::remove_file(&bundle);
                    let path = bundle.to_string_lossy().into_owned();
                    git(
                        &working,
                        &["bundle", "create", "--quiet", &path, &format!("refs/heads/{work_ref}")],
                    )?;
                    let commit = git(&working, &["rev-parse", &format!("refs/heads/{work_ref}")])?;
                    let data = std::fs::read(&bundle)?;
                    let announce =
                        state.lock().unwrap_or_else(PoisonError::into_inner).announce.take();
                    let size = announce.unwrap_or(data.len() as u64);
                    payload = Some(data);
                    json!({"ok": true, "result": {"project": project, "ref": work_ref, "commit": commit}, "bytes": size})
                }
            }
        }
        _ => {
            let scripted =
                state.lock().unwrap_or_else(PoisonError::into_inner).answers.get(&op).cloned();
            scripted.unwrap_or_else(|| refusal("unscripted"))
        }
    };
    let _ = std::fs::remove_file(&upload);
    let mut writer = &stream;
    writer.write_all(format!("{reply}\n").as_bytes())?;
    if let Some(data) = payload {
        let _ = writer.write_all(&data);
    }
    Ok(())
}
