//! harness-adapters: the modules' names, tools and files, and the assets they ship.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

use camino::Utf8Path;

use harness_adapters::{InstallLayout, ModuleContext, S0_TOPICS, module, modules};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn modules_are_found_by_name_and_only_by_name() {
    assert_eq!(module("pi").unwrap().name(), "pi");
    assert_eq!(module("claude-code").unwrap().name(), "claude-code");
    assert!(module("claude").is_none());
    assert!(module("").is_none());
    assert_eq!(modules().len(), 2);
}

#[test]
fn built_in_tools_follow_the_limits() {
    let pi = module("pi").unwrap();
    let claude = module("claude-code").unwrap();
    let all = strings(&["read", "write", "edit", "grep", "find", "ls", "bash"]);
    assert_eq!(pi.builtin_tools(&all), all);
    assert_eq!(claude.builtin_tools(&all), strings(&["Read", "Write", "Edit", "Grep", "Glob"]));
    // A read-only role stays read-only in Claude Code too.
    let read_only = strings(&["read", "grep", "ls"]);
    assert_eq!(claude.builtin_tools(&read_only), strings(&["Read", "Grep"]));
    assert_eq!(claude.typed_tool_name("list_tasks"), "mcp__mosaic__list_tasks");
    assert_eq!(pi.typed_tool_name("list_tasks"), "list_tasks");
}

#[test]
fn s0_lines_cover_the_five_topics_in_order() {
    for module in modules() {
        let lines = module.relies_on();
        for (index, line) in lines.iter().enumerate() {
            assert_eq!(usize::from(line.line), index + 1);
            assert_eq!(line.topic, S0_TOPICS[index]);
        }
    }
}

#[test]
fn claude_code_settings_wrap_the_gate_and_never_block_on_unslop() {
    let layout = InstallLayout::under(Utf8Path::new("/opt/harness"));
    let typed = strings(&["list_tasks"]);
    let builtin = strings(&["Read", "Write"]);
    let cx = ModuleContext {
        bundle_dir: Utf8Path::new("/runs/r1/bundle"),
        workspace: Utf8Path::new("/data/ws"),
        layout: &layout,
        typed: &typed,
        builtin: &builtin,
    };
    let files = module("claude-code").unwrap().files(&cx).unwrap();
    let names: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["settings.json", "mcp.json"]);
    let settings: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    let pre = &settings["hooks"]["PreToolUse"][0];
    assert_eq!(pre["matcher"], "*");
    assert_eq!(pre["hooks"][0]["timeout"], 20);
    assert_eq!(
        pre["hooks"][0]["command"],
        "timeout -k 2 10 '/opt/harness/bin/harness-gate' claude-hook --policy '/runs/r1/bundle/policy.json' || exit 2"
    );
    for event in ["Stop", "UserPromptSubmit"] {
        let command = settings["hooks"][event][0]["hooks"][0]["command"].as_str().unwrap();
        assert!(command.ends_with("; exit 0"), "{event}: {command}");
    }
    let mcp: serde_json::Value = serde_json::from_slice(&files[1].1).unwrap();
    let servers = mcp["mcpServers"].as_object().unwrap();
    assert_eq!(servers.keys().collect::<Vec<_>>(), ["mosaic"]);
    assert_eq!(servers["mosaic"]["command"], "/opt/harness/bin/harness-mcp");
    assert!(module("pi").unwrap().files(&cx).unwrap().is_empty());
}

/// Issue 13, item 5: under `--permission-mode dontAsk` a built-in missing from `allow` is denied
/// everywhere, so `allow` holds exactly the role's built-ins and the typed tools' server.
#[test]
fn claude_code_settings_allow_exactly_the_roles_built_ins_and_the_typed_tools() {
    let layout = InstallLayout::under(Utf8Path::new("/opt/harness"));
    let typed = strings(&["list_tasks"]);
    for builtin in [strings(&[]), strings(&["Read"]), strings(&["Read", "Write", "Edit"])] {
        let cx = ModuleContext {
            bundle_dir: Utf8Path::new("/runs/r1/bundle"),
            workspace: Utf8Path::new("/data/ws"),
            layout: &layout,
            typed: &typed,
            builtin: &builtin,
        };
        let files = module("claude-code").unwrap().files(&cx).unwrap();
        let settings: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
        let mut expected: Vec<serde_json::Value> =
            builtin.iter().map(|name| serde_json::json!(name)).collect();
        expected.push(serde_json::json!("mcp__mosaic"));
        assert_eq!(settings["permissions"]["allow"], serde_json::Value::Array(expected));
    }
}

/// Issue 11, item 9: Claude Code's own deny rules for the bundle and every install directory,
/// as absolute (`//`) paths, for reading and for editing; a path a rule would misread gets none.
#[test]
fn claude_code_settings_deny_the_bundle_and_the_install() {
    let layout = InstallLayout::under(Utf8Path::new("/opt/harness"));
    let cx = ModuleContext {
        bundle_dir: Utf8Path::new("/runs/r1/bundle"),
        workspace: Utf8Path::new("/data/ws"),
        layout: &layout,
        typed: &[],
        builtin: &[],
    };
    let files = module("claude-code").unwrap().files(&cx).unwrap();
    let settings: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    let deny: Vec<&str> = settings["permissions"]["deny"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rule| rule.as_str().unwrap())
        .collect();
    assert_eq!(
        deny,
        [
            "Read(//runs/r1/bundle/**)",
            "Edit(//runs/r1/bundle/**)",
            "Read(//opt/harness/bin/**)",
            "Edit(//opt/harness/bin/**)",
            "Read(//opt/harness/share/harness/pi/**)",
            "Edit(//opt/harness/share/harness/pi/**)",
            "Read(//opt/harness/share/harness/unslop/**)",
            "Edit(//opt/harness/share/harness/unslop/**)",
            "Read(//opt/harness/share/harness/adapters/**)",
            "Edit(//opt/harness/share/harness/adapters/**)",
        ]
    );
    let odd = ModuleContext { bundle_dir: Utf8Path::new("/runs/r 1*/bundle"), ..cx };
    let files = module("claude-code").unwrap().files(&odd).unwrap();
    let settings: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    assert!(!settings["permissions"]["deny"].to_string().contains("r 1"), "{settings}");
    // An install directory that holds the workspace, or lies inside it, gets no rule: it would
    // deny the session its own files (the canary found the first with its install in /tmp).
    let around = InstallLayout::under(Utf8Path::new("/srv"));
    let inside = ModuleContext { workspace: Utf8Path::new("/srv/bin/ws"), layout: &around, ..cx };
    let files = module("claude-code").unwrap().files(&inside).unwrap();
    let settings: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    let deny = settings["permissions"]["deny"].to_string();
    assert!(!deny.contains("//srv/bin/"), "{deny}");
    assert!(deny.contains("//srv/share/harness/pi/**"), "{deny}");
    let within = ModuleContext { workspace: Utf8Path::new("/srv/share"), layout: &around, ..cx };
    let files = module("claude-code").unwrap().files(&within).unwrap();
    let settings: serde_json::Value = serde_json::from_slice(&files[0].1).unwrap();
    let deny = settings["permissions"]["deny"].to_string();
    assert!(!deny.contains("//srv/share/"), "{deny}");
}

/// Issue 13, item 4: a role with no file tool gets `MOSAIC_TOOLS=""`, and the adapter passes
/// `--tools ""` (no built-in) instead of exiting 2.
#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs the adapter script with a fake CLI")]
fn the_claude_code_adapter_passes_an_empty_tool_list() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cli = root.join("cli");
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o755).open(&cli).unwrap();
    std::io::Write::write_all(
        &mut file,
        b"#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n",
    )
    .unwrap();
    drop(file);
    std::fs::write(root.join("prompt.md"), "the prompt").unwrap();
    std::fs::write(root.join("request"), "the request").unwrap();
    let layout = InstallLayout::from_checkout(
        &Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        Utf8Path::new("/unused"),
    );
    let script = module("claude-code").unwrap().adapter(&layout);
    let vars = [
        ("MOSAIC_CLI", cli.display().to_string()),
        ("MOSAIC_BUNDLE", root.display().to_string()),
        ("MOSAIC_WORKSPACE", root.display().to_string()),
        ("MOSAIC_SESSION_DIR", root.join("session").display().to_string()),
        ("MOSAIC_SESSION_ID", "0c2b7d1e-0000-4000-8000-000000000000".to_owned()),
        ("MOSAIC_MODEL", "m".to_owned()),
        ("MOSAIC_THINKING", "low".to_owned()),
        ("MOSAIC_REQUEST", root.join("request").display().to_string()),
        ("MOSAIC_TURN", "1".to_owned()),
    ];
    let run = |tools: Option<&str>| {
        let mut command = std::process::Command::new("/bin/sh");
        command.arg(&script).env_clear().env("PATH", "/usr/bin:/bin").envs(vars.clone());
        if let Some(tools) = tools {
            command.env("MOSAIC_TOOLS", tools);
        }
        command.output().unwrap()
    };
    let output = run(Some(""));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let args = String::from_utf8_lossy(&output.stdout);
    assert!(args.contains("[--tools]\n[]\n[--permission-mode]"), "{args}");
    let output = run(None);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("MOSAIC_TOOLS is not set"));
}

#[test]
fn no_adapter_passes_bare() {
    // --bare would skip the hooks the gate runs as; only comments may mention it.
    let root = Utf8Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["assets/adapters", "assets/pi"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with('#') && !l.trim_start().starts_with("//"))
                .collect();
            assert!(!code.contains("--bare"), "{} passes --bare", path.display());
        }
    }
}

#[test]
fn adapter_scripts_are_kept_0644_and_run_by_sh() {
    use std::os::unix::fs::PermissionsExt;
    let layout = InstallLayout::from_checkout(
        &Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        Utf8Path::new("/unused"),
    );
    for module in modules() {
        let script = module.adapter(&layout);
        let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o111,
            0,
            "{} must not be executable: it runs as /bin/sh ADAPTER",
            script
        );
        let text = std::fs::read_to_string(&script).unwrap();
        assert!(!text.starts_with("#!"), "{}: no shebang, it is run by /bin/sh", script);
        assert!(text.contains("set -eu"), "{}", script);
    }
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs /bin/sh -n on the adapter scripts")]
fn adapter_scripts_parse_and_refuse_a_missing_variable() {
    let layout = InstallLayout::from_checkout(
        &Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        Utf8Path::new("/unused"),
    );
    for module in modules() {
        let script = module.adapter(&layout);
        let syntax = std::process::Command::new("/bin/sh").arg("-n").arg(&script).output().unwrap();
        assert!(syntax.status.success(), "{}: {}", script, String::from_utf8_lossy(&syntax.stderr));
        let run = std::process::Command::new("/bin/sh").arg(&script).env_clear().output().unwrap();
        assert_eq!(run.status.code(), Some(2), "{}", script);
        assert!(String::from_utf8_lossy(&run.stderr).contains("is not set"), "{}", script);
    }
}

/// Issue 14, item 1: the install holds every path of the layout, harness-runner (the binary a
/// host starts) included: `files()` is what `cargo xtask dist` copies, and every path the layout
/// names (the adapters directory by its scripts) is among them; docs/bundle.md lists the same.
#[test]
fn the_install_holds_every_path_of_the_layout() {
    let layout = InstallLayout::under(Utf8Path::new("/opt/harness"));
    let files: Vec<camino::Utf8PathBuf> =
        layout.files().into_iter().map(|(path, _)| path).collect();
    for (field, path) in layout.paths() {
        let held = if field == "install.adapters" {
            files.contains(&path.join("pi.sh")) && files.contains(&path.join("claude-code.sh"))
        } else {
            files.iter().any(|file| file == path)
        };
        assert!(held, "{field} ({}) is not installed", path);
    }
    assert!(files.contains(&Utf8Path::new("/opt/harness/bin/harness-runner").to_path_buf()));
    let doc = std::fs::read_to_string(
        Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bundle.md"),
    )
    .unwrap();
    for (path, _) in layout.files() {
        let relative = path.strip_prefix("/opt/harness").unwrap().to_string();
        let name = relative.rsplit('/').next().unwrap();
        assert!(doc.contains(name), "docs/bundle.md does not name {relative}");
    }
}

/// Every schema of the checkout's docs/schemas is one an install carries, and no other: a new
/// schema cannot be left out of `cargo xtask dist`, nor a removed one still be looked for.
#[test]
fn the_install_carries_every_schema_of_the_checkout() {
    let checkout = harness_adapters::SchemaFiles::from_checkout(
        &Utf8Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    );
    let mut on_disk: Vec<String> = std::fs::read_dir(&checkout.dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json"))
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, harness_adapters::SCHEMA_FILES, "docs/schemas and SCHEMA_FILES differ");
    let installed = harness_adapters::SchemaFiles::under(Utf8Path::new("/opt/harness")).files();
    assert_eq!(installed.len(), on_disk.len());
    assert!(installed.iter().all(|(path, mode)| {
        path.starts_with("/opt/harness/share/harness/schemas/") && *mode == 0o644
    }));
}
