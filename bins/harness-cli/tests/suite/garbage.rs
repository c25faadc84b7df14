//! Garbage for `harness bundle build --request FILE` (issue 8, docs/reliability.md "Garbage in"):
//! every request that cannot be used exits 1 with one clear error, and nothing is written next
//! to `--out` (no bundle, no partial sibling).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::bundle::{build, harness, setup};

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn garbage_requests_exit_1_with_a_clear_error_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good_path = setup(dir.path(), "pm", "primary");
    let good: Value = serde_json::from_slice(&std::fs::read(&good_path).unwrap()).unwrap();
    let with = |key: &str, value: Value| {
        let mut request = good.clone();
        request[key] = value;
        request.to_string().into_bytes()
    };
    let without = |key: &str| {
        let mut request = good.clone();
        request.as_object_mut().unwrap().remove(key);
        request.to_string().into_bytes()
    };
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("garbage.json"), b"\xff\xfe").unwrap();
    std::fs::write(files.join("contract.md"), b"# Contract \xff\n").unwrap();
    let text = good.to_string();
    let deep = "[".repeat(100_000);
    // The pm instance inline, with one field of the wrong type.
    let mut inline_bad: Value = serde_json::from_slice(
        &std::fs::read(harness_testkit::workspace_root().join("fixtures/resolved/pm.json"))
            .unwrap(),
    )
    .unwrap();
    inline_bad["skills"] = json!(5);
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "not a bundle request: EOF while parsing"),
        ("not json", b"resolved = pm".to_vec(), "not a bundle request: expected value"),
        ("not UTF-8", b"\xff\xfe".to_vec(), "not a bundle request"),
        ("truncated", text.as_bytes()[..text.len() / 2].to_vec(), "not a bundle request: EOF while parsing"),
        ("100k open brackets", deep.clone().into_bytes(), "not a bundle request"),
        ("deep resolved", format!(r#"{{"resolved": {deep}"#).into_bytes(), "not a bundle request"),
        ("oversized", [b"{\"contract\": \"".to_vec(), vec![b'x'; 20 << 20]].concat(), "not a bundle request: EOF while parsing"),
        ("an array", b"[]".to_vec(), "not a bundle request"),
        ("an unknown field", with("cap", json!("x")), "request-invalid: "),
        ("an unknown field named", with("cap", json!("x")), "unknown field `cap`"),
        ("two objects", format!("{text} {text}").into_bytes(), "not a bundle request: trailing characters"),
        ("resolved inline without a role", with("resolved", json!({"instance": "x"})), "not a bundle request: resolved: missing field"),
        ("dir, which is --out", with("dir", json!(files.join("elsewhere"))), "unknown field `dir`"),
        ("no session", without("session"), "missing field `session`"),
        ("no install, run from the build directory", without("install"), "no install.prefix is given, and the prefix this harness binary is installed under, "),
        ("no install, said what to do", without("install"), "is not a harness install (10 of its 10 files are missing): give install.prefix"),
        ("route unknown", with("route", json!("sideways")), "not a bundle request: route: unknown variant `sideways`"),
        ("resolved a number", with("resolved", json!(5)), "not a bundle request: resolved is a number; give a path (a string) or the instance (an object)"),
        ("resolved inline, a field wrong", with("resolved", inline_bad), "not a bundle request: resolved.skills: invalid type: integer `5`, expected a sequence"),
        ("install.prefix a number", with("install", json!({"prefix": 5})), "not a bundle request: install.prefix: invalid type: integer `5`"),
        ("session.workspace a number", with("session", json!({"run": "r", "launchedBy": "jo", "workspace": 7})), "not a bundle request: session.workspace: invalid type: integer `7`"),
        ("resolved not UTF-8", with("resolved", json!(files.join("garbage.json"))), "not a resolved instance"),
        ("resolved missing", with("resolved", json!(files.join("none.json"))), "none.json"),
        ("contract missing", with("contract", json!(files.join("none.md"))), "none.md"),
        ("contract not UTF-8", with("contract", json!(files.join("contract.md"))), "contract.md"),
        ("harness unknown", with("harness", json!("vim")), "request-invalid: "),
        ("harness unknown named", with("harness", json!("vim")), "no harness module is called \"vim\""),
        ("workspace relative", with("session", json!({"run": "r", "launchedBy": "jo", "workspace": "ws"})), "path-not-absolute: session.workspace \"ws\""),
        ("workspace missing", with("session", json!({"run": "r", "launchedBy": "jo", "workspace": files.join("no-ws")})), "workspace-invalid: "),
        ("workspace root", with("session", json!({"run": "r", "launchedBy": "jo", "workspace": "/"})), "workspace-invalid: "),
        ("land disagrees", with("land", json!(true)), "land-mismatch: "),
        ("skillsDir missing", with("skillsDir", json!(files.join("no-skills"))), "skill"),
        ("install missing", with("install", json!({"prefix": files.join("no-prefix")})), "install-invalid: "),
        ("install missing, said so", with("install", json!({"prefix": files.join("no-prefix")})), "no-prefix\" is not a harness install prefix"),
        ("install relative and missing", with("install", json!({"prefix": "../no-such-prefix"})), "no-such-prefix\" is not a harness install prefix"),
    ];
    let out_parent = dir.path().join("out");
    std::fs::create_dir(&out_parent).unwrap();
    for (what, bytes, reason) in &cases {
        let request = files.join("request.json");
        std::fs::write(&request, bytes).unwrap();
        let out = out_parent.join("bundle");
        let built = build(&request, &out);
        let stderr = String::from_utf8_lossy(&built.stderr);
        assert_eq!(built.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.starts_with("harness: error: "), "{what}: {stderr}");
        assert!(stderr.contains(reason), "{what}: expected {reason:?} in {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{what}: one line: {stderr}");
        assert!(stderr.len() < 2000, "{what}: {} bytes", stderr.len());
        assert!(built.stdout.is_empty(), "{what}: {:?}", built.stdout);
        assert!(listing(&out_parent).is_empty(), "{what}: written: {:?}", listing(&out_parent));
    }
    // The request is a directory, or missing.
    for (what, request) in [("a directory", files.clone()), ("missing", files.join("none"))] {
        let out = out_parent.join("bundle");
        let built = build(&request, &out);
        let stderr = String::from_utf8_lossy(&built.stderr);
        assert_eq!(built.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.contains(request.to_str().unwrap()), "{what}: names the file: {stderr}");
        assert!(listing(&out_parent).is_empty(), "{what}: written: {:?}", listing(&out_parent));
    }
    // `--out ..` cannot name a bundle: refused, naming the path, nothing written.
    let dots = out_parent.join("sub/..");
    let built = build(&good_path, &dots);
    let stderr = String::from_utf8_lossy(&built.stderr);
    assert_eq!(built.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("path-not-normal: --out \""), "{stderr}");
    assert!(listing(&out_parent).is_empty(), "written: {:?}", listing(&out_parent));
    // And the good request still builds.
    let out = out_parent.join("bundle");
    let built = harness(&[
        "bundle",
        "build",
        "--request",
        good_path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    assert_eq!(listing(&out_parent), ["bundle"]);
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the harness binary")]
fn arguments_that_are_not_utf8_are_a_usage_error() {
    let bad = OsStr::from_bytes(b"/tmp/\xff.json");
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args([OsStr::new("bundle"), OsStr::new("build"), OsStr::new("--request"), bad])
        .args(["--out", "/nonexistent/bundle"])
        .env_clear()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(r#"the argument "/tmp/\xFF.json" is not UTF-8"#), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Issue 14, item 8: a relative `--request` is made absolute against the working directory, and
/// a working directory that is not UTF-8 cannot give the bundle's paths: refused, naming it.
#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the harness binary")]
fn a_request_under_a_directory_that_is_not_utf8_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let good_path = setup(dir.path(), "pm", "primary");
    let odd = dir.path().join(OsStr::from_bytes(b"req-\xff"));
    std::fs::create_dir(&odd).unwrap();
    std::fs::copy(&good_path, odd.join("request.json")).unwrap();
    let out = dir.path().join("out/bundle");
    std::fs::create_dir(dir.path().join("out")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["bundle", "build", "--request", "request.json", "--out", out.to_str().unwrap()])
        .current_dir(&odd)
        .env_clear()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("harness: error: path-not-utf8: the request file, made absolute "),
        "{stderr}"
    );
    assert!(stderr.contains(r"req-\xFF/request.json"), "names the path: {stderr}");
    assert!(listing(&dir.path().join("out")).is_empty());
}

/// `--out` is relative to the working directory, like `--request`, and recorded as the kernel
/// resolves its parent: `../out/bundle` from a sibling directory is built at `DIR/out/bundle`;
/// a request's relative `install.prefix` is resolved the same way, so the manifest and Claude
/// Code's deny rules name no `..`.
#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the harness binary")]
fn a_relative_out_is_built_under_the_working_directory_without_dots() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let good_path = setup(&root, "pm", "primary");
    std::fs::create_dir(root.join("out")).unwrap();
    std::fs::create_dir(root.join("elsewhere")).unwrap();
    // The request, beside the working directory, names the install relative to itself.
    let mut request: Value = serde_json::from_slice(&std::fs::read(&good_path).unwrap()).unwrap();
    request["install"] = json!({"prefix": "../prefix"});
    std::fs::write(root.join("elsewhere/request.json"), request.to_string()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["bundle", "build", "--request", "request.json"])
        .args(["--out", "../out/bundle"])
        .current_dir(root.join("elsewhere"))
        .env_clear()
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(root.join("out/bundle/manifest.json")).unwrap())
            .unwrap();
    let settings = std::fs::read_to_string(root.join("out/bundle/settings.json")).unwrap();
    assert!(!settings.contains("/../"), "{settings}");
    assert!(!manifest.to_string().contains("/../"), "{manifest}");
    assert!(settings.contains(&format!("{}/out/bundle/policy.json", root.display())), "{settings}");
    let gate = manifest["assets"]["gate"]["path"].as_str().unwrap();
    assert_eq!(gate, format!("{}/prefix/bin/harness-gate", root.display()));
}
