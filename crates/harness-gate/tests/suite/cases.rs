//! One-line cases, named after what they try. Each builds its own tree.

use super::tree::check;

/// A workspace with a file, a subdirectory, links in and out, and a secret beside it.
const BASIC: &str = "
    ws/a.txt
    ws/sub/b.txt
    ws/in -> a.txt
    ws/in_abs -> $ROOT/ws/sub
    ws/out -> ../secret
    ws/out_dir -> ../outside
    ws/up -> ..
    outside/c.txt
    secret
    home/notes
";

#[test]
fn read_inside_is_allowed() {
    check(BASIC, r#"pi read {"path":"a.txt"}"#, "allow");
    check(BASIC, r#"pi read {"path":"$WS/sub/b.txt"}"#, "allow");
    check(BASIC, r#"claude Read {"file_path":"$WS/a.txt"}"#, "allow");
    check(BASIC, r#"claude Read {"file_path":"a.txt"}"#, "allow");
}

#[test]
fn absolute_path_outside_is_blocked() {
    check(BASIC, r#"pi read {"path":"/etc/hostname"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"$ROOT/secret"}"#, "block outside-workspace");
    check(BASIC, r#"claude Read {"file_path":"$ROOT/secret"}"#, "block outside-workspace");
}

#[test]
fn dotdot_escapes() {
    check(BASIC, r#"pi read {"path":"../secret"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"sub/../../secret"}"#, "block outside-workspace");
    check(BASIC, r#"pi write {"path":"../new.txt","content":"x"}"#, "block outside-workspace");
    check(BASIC, r#"claude Edit {"file_path":"$WS/../secret"}"#, "block outside-workspace");
}

#[test]
fn dotdot_that_stays_inside_is_allowed() {
    check(BASIC, r#"pi read {"path":"sub/../a.txt"}"#, "allow");
    check(BASIC, r#"pi ls {"path":"sub/.."}"#, "allow");
}

#[test]
fn symlink_inside_is_allowed() {
    check(BASIC, r#"pi read {"path":"in"}"#, "allow");
    check(BASIC, r#"pi read {"path":"in_abs/b.txt"}"#, "allow");
}

#[test]
fn symlink_to_outside_is_blocked() {
    check(BASIC, r#"pi read {"path":"out"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"out_dir/c.txt"}"#, "block outside-workspace");
    check(BASIC, r#"pi ls {"path":"up"}"#, "block outside-workspace");
    check(BASIC, r#"claude Read {"file_path":"$WS/out"}"#, "block outside-workspace");
}

#[test]
fn write_of_new_file_through_link_to_outside_dir_is_blocked() {
    check(BASIC, r#"pi write {"path":"out_dir/new.txt","content":"x"}"#, "block outside-workspace");
    check(BASIC, r#"pi write {"path":"out_dir/deeper/new.txt"}"#, "block outside-workspace");
}

#[test]
fn new_file_and_new_directories_inside_are_allowed() {
    check(BASIC, r#"pi write {"path":"new.txt","content":"x"}"#, "allow");
    check(BASIC, r#"pi write {"path":"new/dir/file.txt","content":"x"}"#, "allow");
    check(BASIC, r#"claude Write {"file_path":"$WS/sub/new.txt","content":"x"}"#, "allow");
}

#[test]
fn dangling_link_pointing_inside_is_refused() {
    let tree = "ws/a.txt\nws/ghost -> not-there";
    check(tree, r#"pi read {"path":"ghost"}"#, "block dangling-symlink");
    check(tree, r#"pi write {"path":"ghost","content":"x"}"#, "block dangling-symlink");
    check(tree, r#"claude Write {"file_path":"$WS/ghost"}"#, "block dangling-symlink");
}

#[test]
fn dangling_link_whose_directory_is_missing_is_refused() {
    // Pi's write makes the missing directories first, so the target would appear.
    let tree = "ws/a.txt\nws/ghost -> newdir/file";
    check(tree, r#"pi write {"path":"ghost","content":"x"}"#, "block dangling-symlink");
}

#[test]
fn dangling_link_at_depth_three() {
    let tree = "ws/a/b/c -> ../../../nope\nws/a/b/x";
    check(tree, r#"pi write {"path":"a/b/c/file","content":"x"}"#, "block dangling-symlink");
    check(tree, r#"pi read {"path":"a/b/x"}"#, "allow");
}

#[test]
fn dangling_link_reached_through_another_link() {
    let tree = "ws/sub/dangle -> missing\nws/dirlink -> sub";
    check(tree, r#"pi write {"path":"dirlink/dangle"}"#, "block dangling-symlink");
}

#[test]
fn link_to_dangling_link_is_refused() {
    let tree = "ws/first -> second\nws/second -> nowhere";
    check(tree, r#"pi read {"path":"first"}"#, "block dangling-symlink");
}

#[test]
fn dotdot_inside_link_target_follows_the_kernel() {
    // `l -> dirlink/../a.txt` with `dirlink -> ../outside/d`: the kernel follows dirlink first
    // and lands in outside/a.txt; Node's realpathSync would say ws/a.txt.
    let tree =
        "ws/a.txt\nws/dirlink -> ../outside/d\noutside/d/\noutside/a.txt\nws/l -> dirlink/../a.txt";
    check(tree, r#"pi read {"path":"l"}"#, "block outside-workspace");
}

#[test]
fn dotdot_through_symlink_escapes_the_kernels_way() {
    // Pi resolves `link/../x` lexically to ws/x; an open by the kernel would land in outside/x.
    // The gate checks both readings.
    let tree = "ws/x\nws/link -> ../outside/d\noutside/d/\noutside/x";
    check(tree, r#"pi read {"path":"link/../x"}"#, "block outside-workspace");
    check(tree, r#"claude Read {"file_path":"$WS/link/../x"}"#, "block outside-workspace");
}

#[test]
fn symlink_loop_is_refused() {
    let tree = "ws/one -> two\nws/two -> one";
    check(tree, r#"pi read {"path":"one"}"#, "block symlink-loop");
    check("ws/self -> self", r#"pi read {"path":"self/x"}"#, "block symlink-loop");
}

#[test]
fn dotdot_out_of_a_missing_directory_is_refused() {
    // The kernel would fail; a tool that makes directories first would not.
    check(
        "ws/link -> sub\nws/sub/",
        r#"pi write {"path":"link/nodir/../../../x"}"#,
        "block outside-workspace",
    );
    check(
        "ws/a.txt",
        r#"claude Write {"file_path":"$WS/nodir/../a.txt"}"#,
        "block climbs-out-of-absent",
    );
}

#[test]
fn tilde_expands_with_home() {
    check(BASIC, r#"pi read {"path":"~/notes"}"#, "block outside-workspace");
    check(BASIC, r#"pi ls {"path":"~"}"#, "block outside-workspace");
    check(BASIC, r#"claude Read {"file_path":"~/notes"}"#, "block outside-workspace");
    // `~user` is not expanded by Pi: it is a name in the workspace.
    check(BASIC, r#"pi write {"path":"~user/x"}"#, "allow");
}

#[test]
fn home_inside_the_workspace_makes_tilde_inside() {
    let tree = "@workspace home\nhome/notes";
    check(tree, r#"pi read {"path":"~/notes"}"#, "allow");
}

#[test]
fn one_leading_at_is_stripped() {
    check(BASIC, r#"pi read {"path":"@a.txt"}"#, "allow");
    check(BASIC, r#"pi read {"path":"@../secret"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"@~/notes"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"@$ROOT/secret"}"#, "block outside-workspace");
}

#[test]
fn unicode_spaces_are_normalised_as_pi_does() {
    // U+2003 becomes a space: Pi opens "ws/a b", a link to the secret.
    let tree = "ws/a b -> ../secret\nsecret";
    check(tree, "pi read {\"path\":\"a\u{2003}b\"}", "block outside-workspace");
}

#[test]
fn file_urls_are_followed() {
    check(BASIC, r#"pi read {"path":"file://$ROOT/secret"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"file://$WS/a.txt"}"#, "allow");
    check(BASIC, r#"pi read {"path":"file://$WS/%2E%2E/secret"}"#, "block outside-workspace");
    check(BASIC, r#"pi read {"path":"file://host/etc/passwd"}"#, "block bad-path");
    check(BASIC, r#"pi read {"path":"file://$WS/a%2Fb"}"#, "block bad-path");
}

#[test]
fn nul_byte_empty_and_missing_paths_are_refused() {
    check(BASIC, r#"pi read {"path":"a.txt\u0000x"}"#, "block bad-path");
    check(BASIC, r#"pi read {"path":""}"#, "block bad-path");
    check(BASIC, r#"pi read {}"#, "block bad-path");
    check(BASIC, r#"claude Read {"file_path":"   "}"#, "block bad-path");
    check(BASIC, r#"pi read {"path":7}"#, "block bad-input");
    check(BASIC, r#"pi read ["a.txt"]"#, "block bad-input");
}

#[test]
fn optional_path_defaults_to_the_workspace() {
    check(BASIC, r#"pi ls {}"#, "allow");
    check(BASIC, r#"pi grep {"pattern":"x"}"#, "allow");
    check(BASIC, r#"claude Grep {"pattern":"x"}"#, "allow");
    check(BASIC, r#"pi ls {"path":""}"#, "allow");
}

#[test]
fn claude_trims_and_the_gate_checks_the_trimmed_path() {
    check(BASIC, r#"claude Read {"file_path":" $ROOT/secret"}"#, "block outside-workspace");
    check(BASIC, r#"claude Read {"file_path":"$ROOT/secret\n"}"#, "block outside-workspace");
    check(BASIC, r#"claude Read {"file_path":" ~/notes"}"#, "block outside-workspace");
}

#[test]
fn tools_outside_the_policy_are_blocked() {
    check(BASIC, r#"pi bash {"command":"cat /etc/passwd"}"#, "block tool-not-allowed");
    check(BASIC, r#"claude Bash {"command":"id"}"#, "block tool-not-allowed");
    check(BASIC, r#"claude WebFetch {"url":"http://x"}"#, "block tool-not-allowed");
    check(BASIC, r#"claude read {"file_path":"a.txt"}"#, "block tool-not-allowed");
    check(BASIC, r#"pi Read {"path":"a.txt"}"#, "block tool-not-allowed");
}

#[test]
fn typed_tools_pass_under_their_harness_names() {
    check(BASIC, r#"pi list_tasks {"done":false}"#, "allow");
    check(BASIC, r#"claude mcp__mosaic__list_tasks {}"#, "allow");
    check(BASIC, r#"claude mcp__mosaic__end_run {"role":"x","reason":"y"}"#, "allow");
    check(BASIC, r#"claude list_tasks {}"#, "block tool-not-allowed");
    check(BASIC, r#"claude mcp__other__list_tasks {}"#, "block tool-not-allowed");
    check(BASIC, r#"claude mcp__mosaic__launch {}"#, "block tool-not-allowed");
    check(BASIC, r#"pi mcp__mosaic__list_tasks {}"#, "block tool-not-allowed");
}

/// A policy that lists a built-in the gate has no path table for (one this version's bundle cannot
/// grant) gets it blocked: what such a tool opens is unknown, so guessing at its fields would be
/// a path check on a model of the tool.
#[test]
fn a_listed_tool_the_gate_does_not_know_is_blocked_whatever_its_fields() {
    check(BASIC, r#"pi frobnicate {"target_path":"$ROOT/secret"}"#, "block tool-not-allowed");
    check(BASIC, r#"claude Frobnicate {"notebookPath":"../secret"}"#, "block tool-not-allowed");
    check(BASIC, r#"claude Frobnicate {"url":"$ROOT/secret"}"#, "block tool-not-allowed");
    check(BASIC, r#"claude Frobnicate {"path":"a.txt"}"#, "block tool-not-allowed");
}

#[test]
fn search_paths_are_checked() {
    check(BASIC, r#"pi grep {"pattern":"x","path":".."}"#, "block outside-workspace");
    check(BASIC, r#"pi find {"pattern":"*","path":"out_dir"}"#, "block outside-workspace");
    check(BASIC, r#"claude Grep {"pattern":"x","path":"$ROOT"}"#, "block outside-workspace");
    check(BASIC, r#"claude Glob {"pattern":"*","path":"/etc"}"#, "block outside-workspace");
    check(BASIC, r#"claude Glob {"pattern":"*","path":"$WS/sub"}"#, "allow");
}

#[test]
fn patterns_are_checked() {
    check(BASIC, r#"pi find {"pattern":"**/*.txt"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"sub/*.txt"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"../*"}"#, "block outside-workspace");
    check(BASIC, r#"pi find {"pattern":"/etc/*"}"#, "block outside-workspace");
    check(BASIC, r#"pi find {"pattern":"out_dir/*"}"#, "block outside-workspace");
    check(BASIC, r#"pi find {"pattern":"*/../../secret"}"#, "block bad-pattern");
    check(BASIC, r#"pi find {"pattern":"{..,sub}/*"}"#, "block bad-pattern");
    check(BASIC, r#"pi find {"pattern":"~/*"}"#, "block outside-workspace");
    check(BASIC, r#"claude Glob {"pattern":"$ROOT/*"}"#, "block outside-workspace");
    check(BASIC, r#"claude Glob {"pattern":"$WS/**/*.txt"}"#, "allow");
    check(BASIC, r#"claude Glob {"pattern":"{/etc/passwd,x}"}"#, "block bad-pattern");
    check(BASIC, r#"claude Grep {"pattern":"x","glob":"../**"}"#, "block outside-workspace");
    check(BASIC, r#"claude Grep {"pattern":"../../etc","glob":"*.rs"}"#, "allow");
    check(BASIC, r#"pi find {}"#, "block bad-input");
}

#[test]
fn pattern_is_relative_to_the_search_path() {
    check(BASIC, r#"pi find {"pattern":"../*.txt","path":"sub"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"../../*","path":"sub"}"#, "block outside-workspace");
}

/// The workspace as given leads through a symlink: `wslink -> deep/er/ws`.
const LINKED: &str = "
    @workspace wslink
    wslink -> deep/er/ws
    deep/er/ws/a.txt
    ws/a.txt
";

#[test]
fn workspace_behind_a_symlink_allows_plain_paths() {
    check(LINKED, r#"pi read {"path":"a.txt"}"#, "allow");
    check(LINKED, r#"pi read {"path":"$WS/a.txt"}"#, "allow");
    check(LINKED, r#"claude Read {"file_path":"$ROOT/deep/er/ws/a.txt"}"#, "allow");
}

#[test]
fn climbs_out_and_back_in_through_real_parents() {
    // Inside for Pi (from the real path deep/er/ws), outside from the path as given.
    check(LINKED, r#"pi read {"path":"../../er/ws/a.txt"}"#, "block outside-workspace");
}

#[test]
fn inside_as_given_but_outside_for_pi() {
    // From the path as given this is wslink/a.txt; Pi, in deep/er/ws, opens deep/er/wslink/a.txt.
    check(LINKED, r#"pi read {"path":"../wslink/a.txt"}"#, "block outside-workspace");
    // From the real path this is inside; as given it is the decoy ws/a.txt beside the link.
    check(LINKED, r#"pi read {"path":"../ws/a.txt"}"#, "block outside-workspace");
}

#[test]
fn nfd_spelling_outside_blocks_the_read() {
    let tree = "ws/cafe\u{301}.txt -> ../secret\nsecret";
    check(tree, "pi read {\"path\":\"caf\u{e9}.txt\"}", "block outside-workspace");
    check(tree, "claude Read {\"file_path\":\"$WS/caf\u{e9}.txt\"}", "block outside-workspace");
    // write and edit take the name as given in Pi 0.85.1: a new file "café.txt" inside.
    check(tree, "pi write {\"path\":\"caf\u{e9}.txt\"}", "allow");
}

#[test]
fn am_pm_spelling_outside_blocks_the_read() {
    let tree = "ws/Shot 1.02\u{202F}PM.png -> ../secret\nsecret";
    check(tree, r#"pi read {"path":"Shot 1.02 PM.png"}"#, "block outside-workspace");
    check(tree, r#"pi read {"path":"Shot 1.02 pm.png"}"#, "allow");
}

#[test]
fn claude_reverse_am_pm_swap_is_checked() {
    let tree = "ws/Shot 1.02 PM.png -> ../secret\nsecret";
    check(
        tree,
        "claude Read {\"file_path\":\"$WS/Shot 1.02\u{202F}PM.png\"}",
        "block outside-workspace",
    );
}

#[test]
fn curly_apostrophe_spelling_outside_blocks_the_read() {
    let tree = "ws/jo\u{2019}s.txt -> ../secret\nsecret";
    check(tree, r#"pi read {"path":"jo's.txt"}"#, "block outside-workspace");
}

#[test]
fn nfd_and_curly_together() {
    let tree = "ws/d\u{2019}e\u{301}cran -> ../secret\nsecret";
    check(tree, "pi read {\"path\":\"d'\u{e9}cran\"}", "block outside-workspace");
}

#[test]
fn spelling_outside_blocks_even_when_the_name_as_given_is_inside() {
    let tree = "ws/caf\u{e9}.txt\nws/cafe\u{301}.txt -> ../secret\nsecret";
    check(tree, "pi read {\"path\":\"caf\u{e9}.txt\"}", "block outside-workspace");
}

#[test]
fn spelling_that_dangles_blocks_the_read() {
    let tree = "ws/jo\u{2019}s.txt -> gone";
    check(tree, r#"pi read {"path":"jo's.txt"}"#, "block dangling-symlink");
}

#[test]
fn spelling_inside_or_missing_is_fine() {
    check("ws/jo\u{2019}s.txt", r#"pi read {"path":"jo's.txt"}"#, "allow");
    check("ws/a.txt", r#"pi read {"path":"jo's.txt"}"#, "allow");
}

#[test]
fn sibling_workspace_with_another_spelling_blocks_the_read() {
    // The spec's example: jo’s/ws beside a workspace in jo's/ws.
    let tree = "@workspace jo's/ws\njo's/ws/a.txt\njo\u{2019}s/ws/a.txt";
    check(tree, r#"pi read {"path":"a.txt"}"#, "block outside-workspace");
    check(tree, r#"pi write {"path":"a.txt"}"#, "allow");
}

#[test]
fn non_utf8_link_target_is_handled() {
    use std::os::unix::ffi::OsStrExt;
    let built = super::tree::Tree::build("ws/a.txt");
    let target = std::ffi::OsStr::from_bytes(b"../\xff\xfe");
    std::os::unix::fs::symlink(target, built.root.join("ws/bad")).unwrap();
    assert_eq!(built.decide(r#"pi read {"path":"bad"}"#), "block dangling-symlink");
    std::fs::write(built.root.join("\u{fffd}"), b"x").unwrap();
    std::fs::write(built.root.join(std::ffi::OsStr::from_bytes(b"\xff\xfe")), b"x").unwrap();
    assert_eq!(built.decide(r#"pi read {"path":"bad"}"#), "block outside-workspace");
}

#[test]
fn proc_magic_links_are_refused() {
    // /proc/self is the gate's own process, not the tool's: its fd/N, cwd and root differ.
    check(BASIC, r#"pi read {"path":"/proc/self/cwd/a.txt"}"#, "block through-proc");
    check(BASIC, r#"claude Read {"file_path":"/proc/self/root"}"#, "block through-proc");
    check(BASIC, r#"claude Read {"file_path":"/dev/fd/0"}"#, "block through-proc");
    check("ws/fd -> /proc/self/fd", r#"pi read {"path":"fd/3"}"#, "block through-proc");
}

#[test]
fn claude_tilde_dotdot_through_symlink_escapes_the_kernels_way() {
    // Claude Code expands `~` itself; if it does so as text without folding `..`, the kernel
    // follows `link` first and lands in outside/x.
    let tree = "ws/x\nws/link -> ../outside/d\noutside/d/\noutside/x\nhome/";
    check(tree, r#"claude Read {"file_path":"~/../ws/link/../x"}"#, "block outside-workspace");
}

#[test]
fn nel_after_claude_path_survives_javascript_trim() {
    // JavaScript's trim keeps U+0085, Rust's drops it: Claude Code writes "out/link\u{85}", a
    // new name beside the link, outside, while the path trimmed the Rust way leads inside.
    let tree = "ws/a.txt\nout/link -> ../ws";
    check(tree, r#"claude Write {"file_path":" $ROOT/out/link\u0085"}"#, "block outside-workspace");
}

#[test]
fn file_url_drive_letter_after_first_segment_climbs_out() {
    // WHATWG keeps a drive-letter segment (`C|`, `C:`) only in first position; Node's
    // fileURLToPath lets `..` remove it anywhere else, so these lead to $ROOT/secret.
    check(BASIC, r#"pi read {"path":"file://$WS/C|/../../secret"}"#, "block outside-workspace");
    check(
        BASIC,
        r#"pi write {"path":"file://$WS/sub/z:/../../../new"}"#,
        "block outside-workspace",
    );
    check(
        BASIC,
        r#"pi ls {"path":"file://localhost$WS/C|\\..\\%2e%2E"}"#,
        "block outside-workspace",
    );
    // In first position the letter stays: `/C:/x` is a name under `/`, outside all the same.
    check(BASIC, r#"pi read {"path":"file:///C|/../secret"}"#, "block outside-workspace");
}

#[test]
fn file_url_percent_nul_is_refused() {
    check(BASIC, r#"pi read {"path":"file://$WS/a.txt%00"}"#, "block bad-path");
}

#[test]
fn claude_glob_base_with_trailing_javascript_space_trims_to_dotdot() {
    // Claude Code searches `trim("$WS/..<space>")` = $WS/.. = $ROOT, where the secret lists.
    for space in ["\u{a0}", "\t", " ", "\u{3000}", "\u{feff}", "\u{2028}", "\u{1680}", "\u{b}"] {
        let call = format!(r#"claude Glob {{"pattern":"$WS/..{space}/*"}}"#).replace('\t', "\\t");
        let call = call.replace('\u{b}', "\\u000b");
        check(BASIC, &call, "block outside-workspace");
    }
    // Only the ends are trimmed: the last `..` climbs from $WS once its U+3000 is gone.
    check(
        BASIC,
        "claude Glob {\"pattern\":\"$WS/sub/../..\u{3000}/*.txt\"}",
        "block outside-workspace",
    );
}

#[test]
fn claude_glob_base_trims_to_a_link_out() {
    check(
        BASIC,
        "claude Glob {\"pattern\":\"$WS/out_dir\u{a0}/*.txt\"}",
        "block outside-workspace",
    );
    // Without a wildcard the base is the dirname: `out_dir \u{3000}` trimmed.
    check(
        BASIC,
        "claude Glob {\"pattern\":\"$WS/out_dir \u{3000}/c.txt\"}",
        "block outside-workspace",
    );
    check(BASIC, "claude Glob {\"pattern\":\"$WS/out_dir \"}", "allow");
}

#[test]
fn claude_glob_base_holds_characters_that_are_literal_to_claude() {
    // `! ( ) ] } \` are not where Claude Code cuts the base: `$WS/l!nk` is the directory searched.
    for name in ["l!nk", "a(b", "a)b", "a]b", "a}b", "a\\\\b"] {
        let tree =
            format!("ws/a.txt\noutside/c.txt\nws/{} -> ../outside", name.replace("\\\\", "\\"));
        check(
            &tree,
            &format!(r#"claude Glob {{"pattern":"$WS/{name}/*"}}"#),
            "block outside-workspace",
        );
    }
}

#[test]
fn claude_glob_absolute_patterns_inside_stay_allowed() {
    check(BASIC, r#"claude Glob {"pattern":"$WS/sub/**/*.txt"}"#, "allow");
    check(BASIC, r#"claude Glob {"pattern":"$WS/sub/b.txt"}"#, "allow");
    check("ws/a(b)/x", r#"claude Glob {"pattern":"$WS/a(b)/*"}"#, "allow");
}

#[test]
fn dotdot_inside_a_name_is_not_a_climb() {
    check(BASIC, r#"pi find {"pattern":"*..*"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"**/..foo"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"foo..bar"}"#, "allow");
    check(BASIC, r#"pi grep {"pattern":"x","glob":"*..*"}"#, "allow");
    check(BASIC, r#"claude Glob {"pattern":"**/..foo"}"#, "allow");
    check(BASIC, r#"claude Grep {"pattern":"x","glob":"foo..bar"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"**/../secret"}"#, "block bad-pattern");
}

#[test]
fn brace_group_used_as_a_filter_is_allowed() {
    check(BASIC, r#"pi grep {"pattern":"x","glob":"{sub/**,docs/**}"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"{sub/**,docs/**}"}"#, "allow");
    check(BASIC, r#"claude Grep {"pattern":"x","glob":"{sub/**,docs/**}"}"#, "allow");
    check(BASIC, r#"claude Glob {"pattern":"{sub/**,docs/**}"}"#, "allow");
    check(BASIC, r#"pi find {"pattern":"{sub/..,x}/*"}"#, "block bad-pattern");
    check(BASIC, r#"pi find {"pattern":"*/.{.,}/secret"}"#, "block bad-pattern");
    check(BASIC, r#"pi find {"pattern":"{out_dir/**,sub/**}"}"#, "block outside-workspace");
}

/// A workspace that is a git checkout.
const GIT: &str = "
    ws/a.txt
    ws/.git/config
    ws/.git/hooks/
    ws/g -> .git
    ws/sub/
";

#[test]
fn pi_write_into_git_metadata_is_refused() {
    check(GIT, r#"pi write {"path":".git/config","content":"x"}"#, "block git-metadata");
    check(GIT, r#"pi write {"path":".git/hooks/pre-commit"}"#, "block git-metadata");
    check(GIT, r#"pi edit {"path":"./sub/../.git/config"}"#, "block git-metadata");
    check(GIT, r#"pi write {"path":"g/hooks/post-checkout"}"#, "block git-metadata");
    check(GIT, r#"pi write {"path":"file://$WS/sub/%2e%2e/.git/config"}"#, "block git-metadata");
    check(GIT, r#"pi write {"path":"sub/.git/config"}"#, "block git-metadata");
    check(GIT, r#"pi read {"path":".git/config"}"#, "allow");
    // Linux names are case-sensitive and git opens `.git` exactly: `.GIT` is a plain name.
    check(GIT, r#"pi write {"path":".GIT/config"}"#, "allow");
    check(GIT, r#"pi write {"path":".gitignore"}"#, "allow");
}

#[test]
fn claude_write_into_git_metadata_is_refused() {
    check(GIT, r#"claude Write {"file_path":"$WS/.git/config"}"#, "block git-metadata");
    check(GIT, r#"claude Edit {"file_path":"$WS/g/config"}"#, "block git-metadata");
    check(GIT, r#"claude MultiEdit {"file_path":" $WS/sub/../.git/config"}"#, "block git-metadata");
    check(GIT, r#"claude NotebookEdit {"notebook_path":"$WS/.git/n.ipynb"}"#, "block git-metadata");
    check(GIT, r#"claude Read {"file_path":"$WS/.git/config"}"#, "allow");
    check(GIT, r#"claude Write {"file_path":"$WS/.gitattributes"}"#, "allow");
}

#[test]
fn write_into_a_git_dir_under_another_name_is_refused() {
    // `.git` a link to `gitdata`, or a `gitdir:` file naming it: gitdata is the metadata.
    let linked = "ws/gitdata/config\nws/.git -> gitdata";
    check(linked, r#"pi write {"path":"gitdata/config"}"#, "block git-metadata");
    let pointed = "ws/gitdata/config\nws/.git";
    let built = super::tree::Tree::build(pointed);
    std::fs::write(built.root.join("ws/.git"), b"gitdir: gitdata\n").unwrap();
    assert_eq!(built.decide(r#"pi write {"path":"gitdata/config"}"#), "block git-metadata");
    assert_eq!(built.decide(r#"pi write {"path":"gitdata2/config"}"#), "allow");
}

/// Issue 25: the ignore files ripgrep and fd open on their own in the tree they search. A link
/// named like one of them that leads outside lets the outside file decide what a search lists,
/// and ripgrep prints its unparsable lines to the model; every search that would read it is
/// refused, at any depth, for every name, while a read of the same link was always refused.
#[test]
fn ignore_file_links_out_are_refused_for_every_search() {
    for name in [".ignore", ".rgignore", ".fdignore", ".gitignore"] {
        for at in ["ws", "ws/sub", "ws/sub/deep"] {
            let tree = format!(
                "ws/a.txt\nws/sub/deep/b.txt\n{at}/{name} -> $ROOT/outside/ign\noutside/ign"
            );
            let refused = "block outside-workspace";
            check(&tree, r#"pi grep {"pattern":"findme"}"#, refused);
            check(&tree, r#"pi find {"pattern":"*.txt"}"#, refused);
            check(&tree, r#"claude Grep {"pattern":"findme"}"#, refused);
            check(&tree, r#"claude Grep {"pattern":"findme","path":"$WS"}"#, refused);
            // Claude Code's Glob passes `--no-ignore`: it reads no ignore file.
            check(&tree, r#"claude Glob {"pattern":"**/*.txt"}"#, "allow");
            // The reads were refused before: the link itself leads out.
            check(&tree, &format!(r#"pi read {{"path":"$ROOT/{at}/{name}"}}"#), refused);
        }
    }
}

#[test]
fn ignore_files_inside_are_allowed() {
    let tree =
        "ws/a.txt\nws/.gitignore\nws/sub/.ignore -> ../rules\nws/rules\nws/.git/info/exclude";
    check(tree, r#"pi grep {"pattern":"x"}"#, "allow");
    check(tree, r#"pi find {"pattern":"*"}"#, "allow");
    check(tree, r#"claude Grep {"pattern":"x"}"#, "allow");
    // A search of a subdirectory reads the workspace's own ignore files above it.
    check(tree, r#"pi grep {"pattern":"x","path":"sub"}"#, "allow");
}

#[test]
fn ignore_file_above_the_search_path_is_checked() {
    // rg and fd read the ignore files of every ancestor of the search path.
    let inside = "ws/sub/a.txt\nws/.ignore -> ../outside/ign\noutside/ign";
    check(inside, r#"pi grep {"pattern":"x","path":"sub"}"#, "block outside-workspace");
    check(inside, r#"claude Grep {"pattern":"x","path":"$WS/sub"}"#, "block outside-workspace");
    // Above the workspace itself: outside by definition.
    let above = "ws/a.txt\n.ignore";
    check(above, r#"pi grep {"pattern":"x"}"#, "block outside-workspace");
    check(above, r#"pi find {"pattern":"*"}"#, "block outside-workspace");
    check(above, r#"pi read {"path":"a.txt"}"#, "allow");
}

#[test]
fn git_exclude_files_that_lead_out_are_refused() {
    let exclude = "ws/a.txt\nws/.git/info/exclude -> $ROOT/outside/ign\noutside/ign";
    check(exclude, r#"pi grep {"pattern":"x"}"#, "block outside-workspace");
    let info = "ws/a.txt\nws/sub/.git/info -> $ROOT/outside/info\noutside/info/exclude";
    check(info, r#"pi find {"pattern":"*"}"#, "block outside-workspace");
    let dot_git = "ws/a.txt\nws/sub/.git -> $ROOT/outside/g\noutside/g/info/exclude";
    check(dot_git, r#"claude Grep {"pattern":"x"}"#, "block outside-workspace");
    // A `.git` file: `gitdir:` names a directory whose `commondir` holds the exclude file.
    let built =
        super::tree::Tree::build("ws/a.txt\nws/sub/.git\noutside/wt/x\noutside/info/exclude");
    let gitdir = built.root.join("outside/wt");
    std::fs::write(built.root.join("ws/sub/.git"), format!("gitdir: {}\n", gitdir.display()))
        .unwrap();
    std::fs::write(gitdir.join("commondir"), "..\n").unwrap();
    assert_eq!(built.decide(r#"pi grep {"pattern":"x"}"#), "block outside-workspace");
    std::fs::write(built.root.join("ws/sub/.git"), b"gitdir: ../outside/wt\n").unwrap();
    assert_eq!(built.decide(r#"pi grep {"pattern":"x"}"#), "block cannot-check");
}

#[test]
fn global_ignore_files_under_home_are_refused() {
    for file in [".gitconfig", ".config/git/config", ".config/git/ignore", ".config/fd/ignore"] {
        let tree = format!("ws/a.txt\nhome/{file}");
        check(&tree, r#"pi grep {"pattern":"x"}"#, "block outside-workspace");
        check(&tree, r#"pi find {"pattern":"*"}"#, "block outside-workspace");
        check(&tree, r#"claude Grep {"pattern":"x"}"#, "block outside-workspace");
        check(&tree, r#"claude Read {"file_path":"$WS/a.txt"}"#, "allow");
    }
}

#[test]
fn the_tools_environment_is_checked() {
    use harness_gate::{Harness, ToolCall, ToolEnv, decide};
    let built = super::tree::Tree::build("ws/a.txt\nxdg/git/ignore\nrc");
    let grep = ToolCall { tool: "grep".to_owned(), input: serde_json::json!({"pattern": "x"}) };
    let glob = ToolCall { tool: "Glob".to_owned(), input: serde_json::json!({"pattern": "*"}) };
    let rendered = |harness, env: ToolEnv, call: &ToolCall| {
        super::tree::render(&decide(&built.policy(harness).with_tool_env(env), call))
    };
    let xdg = ToolEnv {
        xdg_config_home: Some(built.root.join("xdg").display().to_string()),
        ..ToolEnv::default()
    };
    assert_eq!(rendered(Harness::Pi, xdg, &grep), "block outside-workspace");
    let rc = ToolEnv {
        ripgrep_config_path: Some(built.root.join("rc").display().to_string()),
        ..ToolEnv::default()
    };
    assert_eq!(rendered(Harness::Pi, rc.clone(), &grep), "block cannot-check");
    assert_eq!(rendered(Harness::ClaudeCode, rc, &glob), "block cannot-check");
    assert_eq!(rendered(Harness::Pi, ToolEnv::default(), &grep), "allow");
}

/// Issue 25, part 2: Claude Code's Read falls back, for a missing `NAME AM.png`, to the path with
/// the FIRST occurrence of ` AM.png` (or `\u{202F}AM.png`) swapped, a directory included.
#[test]
fn claude_read_fallback_swaps_the_first_occurrence_in_the_whole_path() {
    let space_to_nnbsp = "ws/a.txt\nws/d\u{202f}AM.png -> ../outside\noutside/shot AM.png";
    check(
        space_to_nnbsp,
        r#"claude Read {"file_path":"$WS/d AM.png/shot AM.png"}"#,
        "block outside-workspace",
    );
    let nnbsp_to_space = "ws/a.txt\nws/e AM.png -> ../outside/o2\noutside/o2/shot\u{202f}AM.png";
    check(
        nnbsp_to_space,
        "claude Read {\"file_path\":\"$WS/e\u{202f}AM.png/shot\u{202f}AM.png\"}",
        "block outside-workspace",
    );
    // Pi's own fallback is another one (every ` AM.` to U+202F): the same call opens nothing.
    check(space_to_nnbsp, r#"pi read {"path":"d AM.png/shot AM.png"}"#, "allow");
    // No match, no fallback: a lower-case `am`.
    let lower = "ws/a.txt\nws/d\u{202f}am.png -> ../outside\noutside/shot am.png";
    check(lower, r#"claude Read {"file_path":"$WS/d am.png/shot am.png"}"#, "allow");
}

#[test]
fn decisions_for_ignore_files_the_spec_is_silent_on() {
    use harness_gate::{Harness, Policy, PolicyConfig, ToolCall, decide};
    // A dangling ignore-file link opens nothing.
    check("ws/a.txt\nws/sub/.gitignore -> nowhere", r#"pi grep {"pattern":"x"}"#, "allow");
    // A home inside the workspace: its git config is a workspace file, but one naming an
    // excludes file would let that file decide.
    let built = super::tree::Tree::build("ws/a.txt\nhome -> ws\nws/.gitconfig");
    assert_eq!(built.decide(r#"pi grep {"pattern":"x"}"#), "allow");
    std::fs::write(built.root.join("ws/.gitconfig"), "[core]\n\texcludesFile = /etc/x\n").unwrap();
    assert_eq!(built.decide(r#"pi grep {"pattern":"x"}"#), "block cannot-check");
    assert_eq!(built.decide(r#"pi read {"path":"a.txt"}"#), "allow");
    // Without HOME, where the global files are is unknown.
    let policy = Policy::new(PolicyConfig {
        harness: Harness::Pi,
        workspace: built.workspace.clone(),
        tools: vec!["grep".to_owned(), "read".to_owned()],
        typed: Vec::new(),
        home: None,
    })
    .unwrap();
    let grep = ToolCall { tool: "grep".to_owned(), input: serde_json::json!({"pattern": "x"}) };
    assert_eq!(super::tree::render(&decide(&policy, &grep)), "block cannot-check");
}
