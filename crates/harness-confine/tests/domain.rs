//! The domain, entered by a real child: what it may reach and what it may not, and the modes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use harness_confine::{ConfineError, Mode, SessionPaths, kernel_abi, prepare};

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["workspace", "run/session", "run/bundle", "outside"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("workspace/inside.txt"), "inside").unwrap();
        std::fs::write(root.join("outside/secret.txt"), "secret").unwrap();
        std::fs::write(root.join("run/run.json"), "{}").unwrap();
        World { _dir: dir, root }
    }

    fn paths(&self) -> SessionPaths {
        SessionPaths {
            workspace: self.root.join("workspace"),
            session_dir: self.root.join("run/session"),
            bundle: self.root.join("run/bundle"),
            programs: vec!["/bin/sh".into()],
            search_path: Some("/usr/bin:/bin".into()),
            ..SessionPaths::default()
        }
    }
}

/// Runs `sh -c script` in the domain of `paths` under `mode`; true if it exited 0.
#[expect(clippy::disallowed_methods, reason = "the test runs a child in the domain")]
fn sh(paths: &SessionPaths, mode: Mode, script: &str) -> bool {
    let domain = Arc::new(prepare(&paths.policy(mode)).unwrap());
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]).stdout(Stdio::null()).stderr(Stdio::null());
    domain.attach(&mut command);
    command.status().unwrap().success()
}

fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[test]
fn a_child_reads_and_writes_its_workspace_and_nothing_else() {
    assert!(kernel_abi() >= 1, "this machine's kernel offers Landlock");
    let world = World::new();
    let paths = world.paths();
    let r = &world.root;
    let cat = |path: &Path| format!("cat {}", quoted(path));
    assert!(sh(&paths, Mode::Required, &cat(&r.join("workspace/inside.txt"))));
    assert!(sh(&paths, Mode::Required, &format!("echo x > {}", quoted(&r.join("workspace/new")))));
    assert!(sh(&paths, Mode::Required, &format!("echo x > {}", quoted(&r.join("run/session/s")))));
    assert!(!sh(&paths, Mode::Required, &cat(&r.join("outside/secret.txt"))));
    assert!(!sh(&paths, Mode::Required, &format!("ls {}", quoted(&r.join("outside")))));
    assert!(!sh(&paths, Mode::Required, &cat(&r.join("run/run.json"))));
    assert!(!sh(&paths, Mode::Required, &format!("echo x > {}", quoted(&r.join("outside/w")))));
    assert!(!sh(&paths, Mode::Required, &format!("echo x > {}", quoted(&r.join("run/bundle/w")))));
    assert!(!r.join("outside/w").exists() && !r.join("run/bundle/w").exists());
    // The same child with confinement off reaches all of it: the refusals are the domain's.
    assert!(sh(&paths, Mode::Off, &cat(&r.join("outside/secret.txt"))));
}

#[test]
fn required_fails_on_a_rule_it_cannot_apply_and_best_effort_reports_it() {
    let world = World::new();
    let mut paths = world.paths();
    paths.programs.push(world.root.join("no-such-program"));
    match prepare(&paths.policy(Mode::Required)) {
        Err(ConfineError::Rule { path, .. }) => {
            assert_eq!(path, world.root.join("no-such-program"))
        }
        other => panic!("required must fail on the missing program: {other:?}"),
    }
    let domain = prepare(&paths.policy(Mode::BestEffort)).unwrap();
    assert!(domain.confines());
    let report = domain.report().to_string();
    assert!(
        report.contains(&format!("not applied: {}", world.root.join("no-such-program").display())),
        "{report}"
    );
    assert!(report.contains(&format!("Landlock ABI {}", kernel_abi())), "{report}");
    let off = prepare(&paths.policy(Mode::Off)).unwrap();
    assert!(!off.confines());
    assert!(off.report().to_string().starts_with("not confined (confine \"off\""));
}
