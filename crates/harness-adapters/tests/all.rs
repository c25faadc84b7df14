//! harness-adapters: the modules' names, tools and files, and the assets they ship.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails loudly where its setup fails"
)]

use std::path::Path;

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
    let layout = InstallLayout::under(Path::new("/opt/harness"));
    let typed = strings(&["list_tasks"]);
    let cx =
        ModuleContext { bundle_dir: Path::new("/runs/r1/bundle"), layout: &layout, typed: &typed };
    let files = module("claude-code").unwrap().files(&cx);
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
    assert!(module("pi").unwrap().files(&cx).is_empty());
}

#[test]
fn no_adapter_passes_bare() {
    // --bare would skip the hooks the gate runs as; only comments may mention it.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
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
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        Path::new("/unused"),
    );
    for module in modules() {
        let script = module.adapter(&layout);
        let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o111,
            0,
            "{} must not be executable: it runs as /bin/sh ADAPTER",
            script.display()
        );
        let text = std::fs::read_to_string(&script).unwrap();
        assert!(!text.starts_with("#!"), "{}: no shebang, it is run by /bin/sh", script.display());
        assert!(text.contains("set -eu"), "{}", script.display());
    }
}

#[test]
#[expect(clippy::disallowed_methods, reason = "the test runs /bin/sh -n on the adapter scripts")]
fn adapter_scripts_parse_and_refuse_a_missing_variable() {
    let layout = InstallLayout::from_checkout(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        Path::new("/unused"),
    );
    for module in modules() {
        let script = module.adapter(&layout);
        let syntax = std::process::Command::new("/bin/sh").arg("-n").arg(&script).output().unwrap();
        assert!(
            syntax.status.success(),
            "{}: {}",
            script.display(),
            String::from_utf8_lossy(&syntax.stderr)
        );
        let run = std::process::Command::new("/bin/sh").arg(&script).env_clear().output().unwrap();
        assert_eq!(run.status.code(), Some(2), "{}", script.display());
        assert!(
            String::from_utf8_lossy(&run.stderr).contains("is not set"),
            "{}",
            script.display()
        );
    }
}
