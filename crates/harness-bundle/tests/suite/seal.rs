//! The seal (issue 13, item 1): what `verify_bundle` and `SealedBundle` find after a build was
//! tampered with the way a session with bash or an operator could: the adapter script, the
//! manifest's own fields, modes, a manifest key pointing outside, a link, policy.json between
//! turns, an installed asset, another workspace, another CLI.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use harness_bundle::{Built, Mismatch, Route, SealedBundle, build_bundle, verify_bundle};

use super::env::{Env, request, resolved};

fn built(env: &Env, fixture: &str, route: Route) -> Built {
    let instance = resolved(fixture);
    build_bundle(&request(env, &instance, route)).unwrap()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Rewrites a bundle file in place, keeping its mode.
fn rewrite(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

fn lines(mismatches: &[Mismatch]) -> Vec<String> {
    mismatches.iter().map(ToString::to_string).collect()
}

#[test]
fn a_changed_adapter_script_is_a_mismatch_on_both_harnesses() {
    for (fixture, route, script) in
        [("pm", Route::Primary, "claude-code.sh"), ("pm", Route::Fallback, "pi.sh")]
    {
        let env = Env::new();
        let bundle = built(&env, fixture, route);
        rewrite(env.layout.adapters.join(script).as_std_path(), "exec \"$MOSAIC_CLI\" --no-gate");
        let found = verify_bundle(&bundle.dir, Some(&bundle.digest)).unwrap();
        let text = lines(&found.mismatches);
        assert!(
            text.iter().any(|line| line.starts_with("adapter (") && line.contains(script)),
            "{text:#?}"
        );
        let error = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap_err();
        assert_eq!(error.code(), "bundle-changed");
        assert!(error.to_string().contains(script), "{error}");
    }
}

#[test]
fn an_edited_manifest_fails_the_digest() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Primary);
    let path = bundle.dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (field, value) in [
        ("model", serde_json::json!("another-model")),
        ("cliTools", serde_json::json!(["Bash"])),
        ("adapter", serde_json::json!("/tmp/evil.sh")),
    ] {
        let mut edited = manifest.clone();
        edited[field] = value;
        rewrite(path.as_std_path(), &serde_json::to_string_pretty(&edited).unwrap());
        let found = verify_bundle(&bundle.dir, Some(&bundle.digest)).unwrap();
        assert!(
            matches!(&found.mismatches[0], Mismatch::Digest { expected, .. } if *expected == bundle.digest),
            "{field}: {:#?}",
            found.mismatches
        );
        let error = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap_err();
        assert!(error.to_string().contains("manifest.json: sha256"), "{field}: {error}");
    }
    // The adapter asset sealed in the manifest must be the adapter the manifest runs, with or
    // without a digest.
    manifest["adapter"] = serde_json::json!("/tmp/evil.sh");
    rewrite(path.as_std_path(), &serde_json::to_string_pretty(&manifest).unwrap());
    let found = verify_bundle(&bundle.dir, None).unwrap();
    assert!(
        lines(&found.mismatches)
            .iter()
            .any(|line| line.starts_with("adapter: the manifest runs /tmp/evil.sh")),
        "{:#?}",
        found.mismatches
    );
}

#[test]
fn modes_are_checked() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Primary);
    chmod(bundle.dir.join("policy.json").as_std_path(), 0o644);
    chmod(bundle.dir.as_std_path(), 0o755);
    chmod(bundle.dir.join("skills").as_std_path(), 0o770);
    let found = verify_bundle(&bundle.dir, Some(&bundle.digest)).unwrap();
    let text = lines(&found.mismatches);
    for expected in [
        "policy.json: mode 0644, the bundle's is 0600",
        ".: mode 0755, the bundle's is 0700",
        "skills: mode 0770, the bundle's is 0700",
    ] {
        assert!(text.iter().any(|line| line == expected), "{expected}: {text:#?}");
    }
    assert_eq!(text.len(), 3, "{text:#?}");
}

#[test]
fn a_manifest_key_outside_the_bundle_is_refused_and_never_read() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Primary);
    let path = bundle.dir.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for key in ["../../../etc/hostname", "/etc/hostname", "skills/../../x", "a//b", "./prompt.md"] {
        let mut edited = manifest.clone();
        edited["files"][key] = serde_json::json!("0".repeat(64));
        rewrite(path.as_std_path(), &edited.to_string());
        let error = verify_bundle(&bundle.dir, None).unwrap_err();
        assert_eq!(error.code(), "manifest-invalid", "{key}: {error}");
        assert!(error.to_string().contains(key), "{key}: {error}");
    }
    manifest.as_object_mut().unwrap().remove("cliVersion");
    rewrite(path.as_std_path(), &manifest.to_string());
    assert_eq!(verify_bundle(&bundle.dir, None).unwrap_err().code(), "manifest-invalid");
}

#[test]
fn a_link_or_an_added_file_in_the_bundle_is_a_mismatch() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Primary);
    std::fs::remove_file(bundle.dir.join("tools.json")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", bundle.dir.join("tools.json")).unwrap();
    std::fs::write(bundle.dir.join("skills/extra.md"), "smuggled").unwrap();
    let found = verify_bundle(&bundle.dir, Some(&bundle.digest)).unwrap();
    let text = lines(&found.mismatches);
    assert!(
        text.iter().any(|line| line == "tools.json: not a regular file or directory"),
        "{text:#?}"
    );
    assert!(text.iter().any(|line| line == "skills/extra.md: not in the manifest"), "{text:#?}");
}

#[test]
fn the_sealed_bundle_refuses_a_change_made_after_the_start() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Primary);
    let sealed = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap();
    sealed.recheck().unwrap();
    // The session widens its own policy between two turns.
    let policy = bundle.dir.join("policy.json");
    let text = std::fs::read_to_string(&policy).unwrap();
    rewrite(policy.as_std_path(), &text.replace(&env.workspace.to_string(), "/"));
    let error = sealed.recheck().unwrap_err();
    assert_eq!(error.code(), "bundle-changed");
    assert!(error.to_string().contains("policy.json: sha256"), "{error}");
    rewrite(policy.as_std_path(), &text);
    sealed.recheck().unwrap();
    // A file added, a mode widened, the manifest rewritten: each is named.
    std::fs::write(bundle.dir.join("skills/planted.md"), "x").unwrap();
    chmod(bundle.dir.join("prompt.md").as_std_path(), 0o644);
    let error = sealed.recheck().unwrap_err().to_string();
    assert!(error.contains("skills/planted.md: not in the manifest"), "{error}");
    assert!(error.contains("prompt.md: mode 0644"), "{error}");
    rewrite(bundle.dir.join("manifest.json").as_std_path(), "{}");
    let error = sealed.recheck().unwrap_err().to_string();
    assert!(error.contains("manifest.json: sha256"), "{error}");
}

#[test]
fn the_sealed_bundle_checks_the_workspace_and_the_cli_version() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Primary);
    let sealed = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap();
    sealed.check_workspace(&env.workspace).unwrap();
    sealed.check_workspace(env.workspace.join("../ws")).unwrap();
    let error = sealed.check_workspace(&env.root).unwrap_err();
    assert_eq!(error.code(), "workspace-mismatch", "{error}");
    assert_eq!(sealed.cli_version(), "2.1.296 (Claude Code)");
    sealed.check_cli_version(Path::new("/bin/claude"), "2.1.296 (Claude Code)\n").unwrap();
    let error =
        sealed.check_cli_version(Path::new("/bin/claude"), "2.1.300 (Claude Code)\n").unwrap_err();
    assert_eq!(error.code(), "cli-version-mismatch");
    assert!(
        error.to_string().contains("\"2.1.300 (Claude Code)\"")
            && error.to_string().contains("\"2.1.296 (Claude Code)\""),
        "{error}"
    );
}

#[test]
fn the_prompt_names_typed_tools_as_claude_code_shows_them() {
    let env = Env::new();
    let mut instance = resolved("chief-of-staff");
    instance.vars.insert("harness".to_owned(), "claude-code".to_owned());
    let built = build_bundle(&request(&env, &instance, Route::Primary)).unwrap();
    let prompt = std::fs::read_to_string(built.dir.join("prompt.md")).unwrap();
    assert!(prompt.contains("You can stop a run with mcp__mosaic__end_run ("), "{prompt}");
    assert!(prompt.contains("A routed mcp__mosaic__raise_decision goes"), "{prompt}");
}

/// Issue 14, item 10: a bundle whose install moved or was upgraded in place is told apart from a
/// tampered bundle: when every mismatch is about the install, the error says so and what to do;
/// when a bundle file changed too, it does not.
#[test]
fn an_install_that_moved_is_named_as_such_not_as_tampering() {
    let env = Env::new();
    let bundle = built(&env, "pm", Route::Fallback);
    let moved = env.root.join("prefix-moved");
    std::fs::rename(env.root.join("prefix"), &moved).unwrap();
    let found = verify_bundle(&bundle.dir, Some(&bundle.digest)).unwrap();
    assert!(!found.mismatches.is_empty() && found.mismatches.iter().all(Mismatch::is_install));
    let error = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap_err();
    assert_eq!(error.code(), "bundle-changed");
    let text = error.to_string();
    assert!(text.contains("gate ("), "{text}");
    assert!(text.ends_with(harness_bundle::INSTALL_HINT), "{text}");
    // The install back, upgraded in place: the same hint.
    std::fs::rename(&moved, env.root.join("prefix")).unwrap();
    rewrite(env.layout.gate.as_std_path(), "a newer gate");
    let error = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap_err().to_string();
    assert!(error.starts_with("bundle-changed: gate ("), "{error}");
    assert!(error.ends_with(harness_bundle::INSTALL_HINT), "{error}");
    // A bundle file changed as well: tampering, no hint.
    let prompt = bundle.dir.join("prompt.md");
    rewrite(prompt.as_std_path(), "another prompt");
    let error = SealedBundle::open(&bundle.dir, &bundle.digest).unwrap_err().to_string();
    assert!(error.contains("prompt.md"), "{error}");
    assert!(!error.contains(harness_bundle::INSTALL_HINT), "{error}");
}
