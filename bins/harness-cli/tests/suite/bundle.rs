//! `harness bundle build --request FILE --out DIR` and `harness bundle verify DIR`.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;

fn workspace_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[expect(clippy::disallowed_methods, reason = "the test runs the harness binary")]
pub(crate) fn harness(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness")).args(args).env_clear().output().unwrap()
}

/// A fake install prefix and a request file for `resolved` on `route`.
pub(crate) fn setup(dir: &Path, resolved: &str, route: &str) -> std::path::PathBuf {
    let prefix = dir.join("prefix");
    // Every file of an install, each a few bytes naming itself. A file already there is left as
    // it is, never written through: it may be a hard link to the build's own binary.
    let layout = harness_adapters::InstallLayout::under(&harness_testkit::utf8(&prefix).unwrap());
    for (path, _mode) in layout.files() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => writeln!(file, "stand-in for {path}").unwrap(),
            Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::AlreadyExists, "{path}"),
        }
    }
    let root = workspace_root();
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    let request = dir.join(format!("{resolved}-{route}.json"));
    let text = json!({
        "resolved": root.join(format!("fixtures/resolved/{resolved}.json")),
        "contract": root.join("fixtures/bundle/contracts/pm.md"),
        "session": {"run": "run-9", "launchedBy": "jo", "workspace": dir.join("ws")},
        "route": route,
        "routeReason": "test",
        "skillsDir": root.join("fixtures/bundle/skills-enabled"),
        "install": {"prefix": prefix},
        "credentials": [{"service": "vikunja", "status": "usable"}],
    });
    std::fs::write(&request, text.to_string()).unwrap();
    request
}

#[test]
fn a_bundle_built_for_each_harness_passes_verify() {
    let dir = tempfile::tempdir().unwrap();
    for (resolved, route, expected) in [("pm", "primary", "claude-code"), ("pm", "fallback", "pi")]
    {
        let request = setup(dir.path(), resolved, route);
        let out = dir.path().join(format!("bundle-{route}"));
        let built = build(&request, &out);
        assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
        let digest = String::from_utf8_lossy(&built.stdout).trim().to_owned();
        assert_eq!(
            digest,
            harness_bundle::hex_sha256(&std::fs::read(out.join("manifest.json")).unwrap())
        );
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(manifest["harness"], expected);
        let verified = harness(&["bundle", "verify", out.to_str().unwrap()]);
        assert!(verified.status.success(), "{}", String::from_utf8_lossy(&verified.stdout));
        assert!(String::from_utf8_lossy(&verified.stdout).starts_with("ok: "));
        let sealed = harness(&["bundle", "verify", out.to_str().unwrap(), "--digest", &digest]);
        assert!(sealed.status.success(), "{}", String::from_utf8_lossy(&sealed.stdout));
    }
}

#[test]
fn verify_names_each_mismatch_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let request = setup(dir.path(), "pm", "primary");
    let out = dir.path().join("bundle");
    assert!(
        harness(&[
            "bundle",
            "build",
            "--request",
            request.to_str().unwrap(),
            "--out",
            out.to_str().unwrap()
        ])
        .status
        .success()
    );
    let tools = out.join("tools.json");
    let mut perms = std::fs::metadata(&tools).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&tools, perms).unwrap();
    std::fs::write(&tools, "{\"tools\": []}").unwrap();
    std::fs::write(dir.path().join("prefix/bin/harness-gate"), "another gate").unwrap();
    let verified = harness(&["bundle", "verify", out.to_str().unwrap()]);
    assert_eq!(verified.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(stdout.lines().any(|line| line.starts_with("tools.json: sha256 ")), "{stdout}");
    assert!(stdout.lines().any(|line| line.starts_with("gate (")), "{stdout}");
}

#[test]
fn a_refused_build_names_its_code_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let request = setup(dir.path(), "pm", "primary");
    let out = dir.path().join("bundle");
    std::fs::create_dir(&out).unwrap();
    let built = build(&request, &out);
    assert_eq!(built.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&built.stderr).contains("bundle-exists"),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(std::fs::read_dir(&out).unwrap().next().is_none());
    let usage = harness(&["bundle", "build", "--request"]);
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn verify_checks_the_digest_the_adapter_modes_and_refuses_a_key_outside() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let request = setup(dir.path(), "pm", "primary");
    let out = dir.path().join("bundle");
    let built = build(&request, &out);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let digest = String::from_utf8_lossy(&built.stdout).trim().to_owned();
    let verify = |digest: Option<&str>| {
        let mut args = vec!["bundle", "verify", out.to_str().unwrap()];
        args.extend(digest.map(|digest| ["--digest", digest]).into_iter().flatten());
        let output = harness(&args);
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    // The manifest's model edited: only the digest sees it.
    let manifest_path = out.join("manifest.json");
    let original = std::fs::read_to_string(&manifest_path).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&original).unwrap();
    manifest["cliTools"] = json!(["Bash"]);
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    let (code, stdout, _) = verify(Some(&digest));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains(&format!("the bundle digest is {digest}")), "{stdout}");
    // A files key outside the bundle refuses the manifest instead of reading the file.
    manifest["files"]["../../../etc/hostname"] = json!("0".repeat(64));
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let (code, _, stderr) = verify(None);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("manifest-invalid") && stderr.contains("../../../etc/hostname"),
        "{stderr}"
    );
    std::fs::write(&manifest_path, &original).unwrap();
    // The adapter script and a mode.
    std::fs::write(dir.path().join("prefix/share/harness/adapters/claude-code.sh"), "exec claude")
        .unwrap();
    std::fs::set_permissions(out.join("policy.json"), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    let (code, stdout, _) = verify(Some(&digest));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.lines().any(|line| line.starts_with("adapter (")), "{stdout}");
    assert!(
        stdout.lines().any(|line| line == "policy.json: mode 0644, the bundle's is 0600"),
        "{stdout}"
    );
}

/// `harness bundle build --request REQUEST --out OUT`.
pub(crate) fn build(request: &Path, out: &Path) -> std::process::Output {
    harness(&[
        "bundle",
        "build",
        "--request",
        request.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
}
