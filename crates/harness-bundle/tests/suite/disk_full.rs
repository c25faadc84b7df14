//! The disk fills while a bundle is written (issue 8, item 3): on a small tmpfs, with more and
//! more of it taken by a filler file, every build either succeeds whole or fails with
//! `bundle-failed` and leaves nothing behind (no bundle, no partial sibling).
//!
//! The test mounts a tmpfs (it runs as root, as the workspace's tests do); a machine where the
//! mount is impossible fails the test rather than skipping it.

use std::path::{Path, PathBuf};
use std::process::Command;

use harness_bundle::{Route, build_bundle};

use super::env::{Env, request, resolved};

/// The tmpfs's size: a little over what the bundle below needs, so that the filler moves the
/// point where the disk fills through every file of the build.
const TMPFS_KIB: usize = 128;
const STEP: usize = 2 * 1024;

/// A tmpfs mounted on a directory, unmounted when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    #[expect(clippy::disallowed_methods, reason = "the test mounts a small tmpfs")]
    fn mount(dir: &Path, kib: usize) -> Tmpfs {
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k,mode=0700"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount(8) runs");
        assert!(
            output.status.success(),
            "cannot mount a tmpfs on {} (the disk-full test needs root; it does not skip): {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    #[expect(clippy::disallowed_methods, reason = "the test unmounts its tmpfs")]
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn disk_full_while_writing_a_bundle_fails_bundle_failed_and_leaves_nothing() {
    let env = Env::new();
    // A skill big enough that its copy and the prompt holding it take most of the tmpfs.
    let notes: String = "A line of notes for the skill, long enough to matter.\n".repeat(500);
    std::fs::write(env.skills.join("tdd/notes.md"), &notes).unwrap();
    let instance = resolved("pm");
    let _tmpfs = Tmpfs::mount(env.out.as_std_path(), TMPFS_KIB);
    let filler = env.out.join("filler");
    let (mut built, mut failed) = (0, Vec::new());
    for size in (0..TMPFS_KIB * 1024).step_by(STEP) {
        if std::fs::write(&filler, vec![b'x'; size]).is_err() {
            break;
        }
        match build_bundle(&request(&env, &instance, Route::Primary)) {
            Ok(built_bundle) => {
                built += 1;
                let report =
                    harness_bundle::verify_bundle(&built_bundle.dir, Some(&built_bundle.digest))
                        .unwrap();
                assert!(report.mismatches.is_empty());
                std::fs::remove_dir_all(&built_bundle.dir).unwrap();
            }
            Err(error) => {
                assert_eq!(error.code(), "bundle-failed", "filler {size}: {error}");
                let text = error.to_string();
                assert!(text.contains(&env.out.to_string()), "names the file: {text}");
                assert!(!text.contains(".partial"), "names the target, not the sibling: {text}");
                assert!(text.contains("No space left on device"), "the OS cause: {text}");
                let source = std::error::Error::source(&error)
                    .and_then(|source| source.downcast_ref::<std::io::Error>())
                    .and_then(std::io::Error::raw_os_error);
                failed.push((text, source));
            }
        }
        assert_eq!(
            names(env.out.as_std_path()),
            ["filler"],
            "filler {size}: nothing but the filler is left"
        );
        std::fs::remove_file(&filler).unwrap();
    }
    assert!(built > 0, "the bundle fits on the empty tmpfs");
    // The filler moves the point of failure through the build: the skill copy, the prompt, the
    // policy, tools.json, the harness's own files and the manifest, each created in the sibling.
    for file in ["skills/tdd/notes.md", "prompt.md", "policy.json", "tools.json", "manifest.json"] {
        assert!(
            failed.iter().any(|(text, _)| text.contains(&format!("/{file}\""))),
            "no build failed while writing {file}: {failed:#?}"
        );
    }
    assert!(
        failed.iter().all(|(_, errno)| *errno == Some(28)),
        "every failure is ENOSPC: {failed:#?}"
    );
}
