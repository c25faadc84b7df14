//! `cargo xtask verify-pi`: the mechanical recheck the spec asks for on a Pi upgrade.
//!
//! harness-gate ports Pi 0.85.1's path handling. This command proves the port still matches the
//! installed Pi, three ways:
//! 1. the sha256 of every Pi file the port follows (`verify-pi/pi-0.85.1.sha256`), and the set of
//!    files that call `resolveReadPath*`; any difference fails with "Pi changed: review FILE";
//! 2. Pi's own `normalizePath`, `resolveToCwd` and `resolveReadPathAsync`, run by Node on a
//!    generated corpus in a real temporary tree (with 100,000 generated `file://` URLs, which
//!    `normalizePath` hands to Node's `fileURLToPath`), and Node's `path.normalize` and
//!    `path.dirname`, which the gate copies for Claude Code, against the port, answer for answer;
//! 3. the port's NFD against Node's `normalize("NFD")`, and the gate's JavaScript white space
//!    against Node's `String.prototype.trim`, for every Unicode scalar value.

use harness_gate::fuzz::{file_url_corpus, reaches_file_url_to_path};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use harness_gate::node;
use harness_gate::pi::{self, NormalizeOptions, PiPathError};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::{process, setup};

const PI_PACKAGE: &str = ".tools/node_modules/@earendil-works/pi-coding-agent";
const PI_VERSION: &str = "0.85.1";
const NODE_TIMEOUT: Duration = Duration::from_secs(300);
/// How many generated `file://` URLs each run compares through Pi's `normalizePath` (which
/// calls Node's `fileURLToPath`) against the port.
const FILE_URLS: usize = 100_000;

pub(crate) fn run(root: &Path) -> Result<()> {
    let started = Instant::now();
    let tools = setup::run(root)?;
    let pi_dir = root.join(PI_PACKAGE);
    check_version(&pi_dir)?;
    let hashed = check_hashes(root, &pi_dir)?;
    eprintln!("verify-pi: {hashed} Pi files unchanged since the port was written");

    let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
    let (mismatches, count) = compare_corpus(root, &tools, &pi_dir, scratch.path())?;
    if !mismatches.is_empty() {
        bail!(
            "the port disagrees with Pi {PI_VERSION} on {} of {count} calls:\n{}",
            mismatches.len(),
            mismatches.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
        );
    }
    eprintln!(
        "verify-pi: {count} calls of Pi's normalizePath, resolveToCwd and resolveReadPathAsync \
         and Node's path.normalize and path.dirname: no disagreement"
    );

    let scalars = compare_nfd(root, &tools, scratch.path())?;
    eprintln!("verify-pi: NFD agrees with Node on all {scalars} Unicode scalar values");
    let scalars = compare_trim(root, &tools, scratch.path())?;
    eprintln!(
        "verify-pi: the gate's JavaScript white space agrees with Node's String.prototype.trim \
         on all {scalars} Unicode scalar values"
    );
    eprintln!("verify-pi: passed in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn check_version(pi_dir: &Path) -> Result<()> {
    let manifest = pi_dir.join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("cannot read {}", manifest.display()))?;
    let package: Value = serde_json::from_str(&text)?;
    ensure!(
        package["version"] == PI_VERSION,
        "Pi changed: review the port; the installed Pi is {} but the port follows {PI_VERSION}",
        package["version"]
    );
    Ok(())
}

/// Checks the recorded hashes; returns how many files were checked.
fn check_hashes(root: &Path, pi_dir: &Path) -> Result<usize> {
    let record = root.join("xtask/verify-pi/pi-0.85.1.sha256");
    let text = std::fs::read_to_string(&record)
        .with_context(|| format!("cannot read {}", record.display()))?;
    check_recorded(&text, pi_dir)
}

/// Checks the hashes recorded in `text` against the package in `pi_dir`.
fn check_recorded(text: &str, pi_dir: &Path) -> Result<usize> {
    let mut recorded = BTreeSet::new();
    for line in text.lines().filter(|line| !line.starts_with('#') && !line.trim().is_empty()) {
        let (hash, file) = line
            .split_once("  ")
            .with_context(|| format!("bad line in the hash record: {line}"))?;
        let path = pi_dir.join(file);
        let bytes = std::fs::read(&path)
            .map_err(|_| anyhow::anyhow!("Pi changed: review {file} (it is gone)"))?;
        let actual = hex(&Sha256::digest(&bytes));
        ensure!(actual == hash, "Pi changed: review {file} (sha256 {actual}, recorded {hash})");
        recorded.insert(file.to_owned());
    }
    // A file that starts calling resolveReadPath* (another tool, another bundle chunk) is new
    // ground for the spelling check, even if every recorded file is unchanged.
    for dir in ["dist/core/tools", "dist/bundle", "dist/bundle/chunks"] {
        let entries = std::fs::read_dir(pi_dir.join(dir))
            .map_err(|_| anyhow::anyhow!("Pi changed: review {dir} (it is gone)"))?;
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_none_or(|ext| ext != "js") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let relative = path.strip_prefix(pi_dir)?.to_string_lossy().into_owned();
            if text.contains("resolveReadPath") && !recorded.contains(&relative) {
                bail!("Pi changed: review {relative} (it now calls resolveReadPath*)");
            }
        }
    }
    Ok(recorded.len())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(64), |mut out, byte| {
        let _ = write!(out, "{byte:02x}");
        out
    })
}

/// A small deterministic generator, so that a disagreement can be reproduced.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap_or(0)
    }
}

/// Prefixes, middles and suffixes that exercise every branch of Pi's normalisation.
const PREFIXES: &[&str] = &[
    "",
    "@",
    "@@",
    "~",
    "~/",
    "~user/",
    "@~/",
    "file://",
    "file:///",
    "file://localhost/",
    "file://host/",
    "file:////",
    "file://localhost//",
    "FILE:///",
    "/",
    "./",
    "../",
    " ",
    "\u{a0}",
    "\u{3000}",
    "\u{2000}@",
];
const MIDDLES: &[&str] = &[
    "a",
    "a/b",
    "..",
    ".",
    "a/../b",
    "x y",
    "caf\u{e9}",
    "cafe\u{301}",
    "jo's",
    "Shot 1.02 PM.png",
    "Shot 1.02\u{202f}pm.png",
    "%2F",
    "%2f",
    "%41",
    "%zz",
    "%C3%A9",
    "%C3",
    "a//b",
    "a/./b/",
    "\u{2009}x",
    "#frag",
    "?q",
    "a\\b",
    "\t",
    "",
    "d'\u{e9}cran",
    "\u{1100}\u{1161}",
    "\u{ac00}",
];
const SUFFIXES: &[&str] = &["", "/", "/..", "/.", " AM.", "'", " am.png", "\u{205f}"];
const TOKENS: &[&str] = &[
    "a",
    "/",
    "..",
    ".",
    "~",
    "@",
    " ",
    "\u{a0}",
    "\u{2003}",
    "\u{202f}",
    "'",
    "\u{2019}",
    "\u{e9}",
    "e\u{301}",
    "%",
    "2F",
    "%2f",
    "%e9",
    "file://",
    "AM.",
    "pm.",
    "\\",
    "#",
    "?",
    ":",
    "//",
    "\u{fb01}",
    "\u{212b}",
    "\u{1e0a}\u{323}",
];

/// Files in the tree the read spellings can find.
const TREE_FILES: &[&str] = &[
    "ws/cafe\u{301}.txt",
    "ws/jo\u{2019}s.txt",
    "ws/Shot 1.02\u{202f}PM.png",
    "ws/d\u{2019}e\u{301}cran",
    "ws/plain.txt",
    "ws/x y",
    "ws/a/b",
    "ws/na\u{ef}ve",
];
const READ_NAMES: &[&str] = &[
    "caf\u{e9}.txt",
    "jo's.txt",
    "Shot 1.02 PM.png",
    "Shot 1.02 pm.png",
    "d'\u{e9}cran",
    "plain.txt",
    "dangling",
    "lnk",
    "missing",
    "x\u{a0}y",
    "@plain.txt",
    "a/../plain.txt",
    "na\u{ef}ve",
    "a/b",
];

fn corpus(tree: &Path) -> Result<Vec<Value>> {
    let ws = tree.join("ws").to_str().context("the scratch path is not UTF-8")?.to_owned();
    let mut cases = Vec::new();
    let mut inputs = Vec::new();
    for prefix in PREFIXES {
        for middle in MIDDLES {
            for suffix in SUFFIXES {
                inputs.push(format!("{prefix}{middle}{suffix}"));
            }
        }
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..6000 {
        let len = 1 + rng.below(8);
        inputs.push((0..len).map(|_| TOKENS[rng.below(TOKENS.len())]).collect());
    }
    for input in &inputs {
        cases.push(json!({"fn": "normalize", "input": input}));
        cases.push(json!({"fn": "normalizeTool", "input": input}));
    }
    let cwds = [
        ws.clone(),
        format!("{ws}/"),
        "~".to_owned(),
        "~/sub".to_owned(),
        format!("file://{ws}"),
        "/".to_owned(),
    ];
    for (index, input) in inputs.iter().enumerate() {
        let cwd = &cwds[index % cwds.len()];
        cases.push(json!({"fn": "resolveToCwd", "input": input, "cwd": cwd}));
    }
    // Node's path.normalize and path.dirname, as the gate copies them for Claude Code, on the
    // generated paths and on absolute forms of them (Glob bases with white space around).
    for input in &inputs {
        for form in [input.clone(), format!("/{input}"), format!("/x/{input}\u{a0}/..")] {
            cases.push(json!({"fn": "pathNormalize", "input": form}));
            cases.push(json!({"fn": "pathDirname", "input": form}));
        }
    }
    for (index, url) in file_url_corpus(FILE_URLS).iter().enumerate() {
        cases.push(json!({"fn": "normalizeTool", "input": url}));
        if index % 10 == 0 {
            cases.push(json!({"fn": "resolveToCwd", "input": url, "cwd": ws}));
        }
    }
    for name in READ_NAMES {
        for form in [
            (*name).to_owned(),
            format!("{ws}/{name}"),
            format!("./{name}"),
            format!("file://{ws}/{name}"),
        ] {
            for cwd in [&ws, &format!("{ws}/a/..")] {
                cases.push(json!({"fn": "resolveReadPath", "input": form, "cwd": cwd}));
            }
        }
    }
    Ok(cases)
}

fn build_tree(tree: &Path) -> Result<()> {
    for file in TREE_FILES {
        let path = tree.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, b"x")?;
    }
    std::os::unix::fs::symlink("nowhere", tree.join("ws/dangling"))?;
    std::os::unix::fs::symlink("plain.txt", tree.join("ws/lnk"))?;
    Ok(())
}

/// The port's answer to one case, in the Node script's shape.
fn port_answer(case: &Value, home: &str) -> Value {
    let input = case["input"].as_str().unwrap_or_default();
    let cwd = case["cwd"].as_str().unwrap_or_default();
    let home = Some(home);
    let answer = match case["fn"].as_str() {
        Some("normalize") => pi::normalize_path(input, NormalizeOptions::default(), home),
        Some("normalizeTool") => pi::normalize_path(input, NormalizeOptions::TOOL, home),
        Some("resolveToCwd") => pi::resolve_to_cwd(input, cwd, home),
        Some("resolveReadPath") => pi::resolve_read_path(input, cwd, home),
        Some("pathNormalize") => Ok(node::normalize(input)),
        Some("pathDirname") => Ok(node::dirname(input)),
        other => return json!({"error": format!("unknown function {other:?}")}),
    };
    match answer {
        Ok(path) => json!({"ok": path}),
        Err(error) => json!({"error": node_code(&error)}),
    }
}

/// The Node error each port error stands for.
fn node_code(error: &PiPathError) -> &'static str {
    match error {
        PiPathError::InvalidUrl(_) => "ERR_INVALID_URL",
        PiPathError::FileUrlHost => "ERR_INVALID_FILE_URL_HOST",
        PiPathError::FileUrlEncodedSlash => "ERR_INVALID_FILE_URL_PATH",
        PiPathError::FileUrlDecode => "URIError",
        PiPathError::NoHome => "no-home",
        PiPathError::RelativeBase(_) => "relative-base",
    }
}

fn compare_corpus(
    root: &Path,
    tools: &setup::Tools,
    pi_dir: &Path,
    scratch: &Path,
) -> Result<(Vec<String>, usize)> {
    let tree = scratch.join("tree");
    build_tree(&tree)?;
    let tree = tree.canonicalize()?;
    let node_scratch = scratch.join("node");
    let mut command = tools.isolated("node", &node_scratch)?;
    let home = node_scratch.join("home").canonicalize()?;
    let home = home.to_str().context("the scratch path is not UTF-8")?.to_owned();
    let cases = corpus(&tree)?;
    let cases_file = scratch.join("cases.json");
    std::fs::write(&cases_file, serde_json::to_vec(&cases)?)?;
    command.arg(script(root)).arg("cases").arg(pi_dir).arg(&cases_file).current_dir(&tree);
    let output = process::run_captured(&mut command, NODE_TIMEOUT)?;
    let answers: Vec<Value> =
        serde_json::from_str(&output.stdout).context("Node's answers are not a JSON array")?;
    ensure!(
        answers.len() == cases.len(),
        "Node answered {} of {} cases",
        answers.len(),
        cases.len()
    );
    let mut mismatches = Vec::new();
    let (mut url_paths, mut url_errors) = (0, 0);
    for (case, pi_answer) in cases.iter().zip(&answers) {
        if case["fn"] == "normalizeTool"
            && case["input"].as_str().is_some_and(reaches_file_url_to_path)
        {
            if pi_answer.get("ok").is_some() { url_paths += 1 } else { url_errors += 1 }
        }
        let port = port_answer(case, &home);
        if &port != pi_answer {
            mismatches.push(format!("  {case}\n    pi:   {pi_answer}\n    port: {port}"));
        }
    }
    eprintln!(
        "verify-pi: of the {} file URLs Pi hands to Node's fileURLToPath, {url_paths} became a \
         path and {url_errors} threw",
        url_paths + url_errors
    );
    Ok((mismatches, cases.len()))
}

fn script(root: &Path) -> PathBuf {
    root.join("xtask/verify-pi/pi-paths.mjs")
}

/// Compares NFD for every scalar value; returns how many were compared.
fn compare_nfd(root: &Path, tools: &setup::Tools, scratch: &Path) -> Result<usize> {
    let mut command = tools.isolated("node", &scratch.join("nfd"))?;
    command.arg(script(root)).arg("nfd");
    let output = process::run_captured(&mut command, NODE_TIMEOUT)?;
    let mut port = String::new();
    let mut scalars = 0;
    for scalar in (0..=0x10_FFFF_u32).filter_map(char::from_u32) {
        scalars += 1;
        let text = scalar.to_string();
        let decomposed = pi::nfd(&text);
        if decomposed != text {
            let parts: Vec<String> =
                decomposed.chars().map(|c| format!("{:X}", u32::from(c))).collect();
            let _ = writeln!(port, "{:X}:{}", u32::from(scalar), parts.join(" "));
        }
    }
    if port != output.stdout {
        let node: BTreeSet<&str> = output.stdout.lines().collect();
        let ours: BTreeSet<&str> = port.lines().collect();
        let only_node: Vec<_> = node.difference(&ours).take(20).collect();
        let only_port: Vec<_> = ours.difference(&node).take(20).collect();
        bail!(
            "NFD differs from Node's:\n  only Node: {only_node:?}\n  only the port: {only_port:?}"
        );
    }
    Ok(scalars)
}

/// Compares the gate's JavaScript white space with Node's `trim` for every scalar value;
/// returns how many were compared.
fn compare_trim(root: &Path, tools: &setup::Tools, scratch: &Path) -> Result<usize> {
    let mut command = tools.isolated("node", &scratch.join("trim"))?;
    command.arg(script(root)).arg("trim");
    let output = process::run_captured(&mut command, NODE_TIMEOUT)?;
    let mut port = String::new();
    let mut scalars = 0;
    for scalar in (0..=0x10_FFFF_u32).filter_map(char::from_u32) {
        scalars += 1;
        if harness_gate::claude::is_js_space(scalar) {
            let _ = writeln!(port, "{:X}", u32::from(scalar));
        }
    }
    ensure!(
        port == output.stdout,
        "JavaScript white space differs from Node's trim:\n  Node: {}\n  port: {}",
        output.stdout.lines().collect::<Vec<_>>().join(" "),
        port.lines().collect::<Vec<_>>().join(" ")
    );
    Ok(scalars)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake package with one recorded file and one tool.
    fn package() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in [
            ("dist/utils/paths.js", "export function normalizePath() {}"),
            ("dist/core/tools/read.js", "resolveReadPathAsync()"),
            ("dist/core/tools/write.js", "resolveToCwd()"),
            ("dist/bundle/cli.js", ""),
        ] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("dist/bundle/chunks")).unwrap();
        dir
    }

    fn record(dir: &Path, files: &[&str]) -> String {
        let mut text = String::from("# comment\n");
        for file in files {
            let bytes = std::fs::read(dir.join(file)).unwrap();
            text.push_str(&format!("{}  {file}\n", hex(&Sha256::digest(&bytes))));
        }
        text
    }

    #[test]
    fn unchanged_files_pass() {
        let dir = package();
        let text = record(dir.path(), &["dist/utils/paths.js", "dist/core/tools/read.js"]);
        assert_eq!(check_recorded(&text, dir.path()).unwrap(), 2);
    }

    #[test]
    fn a_changed_file_names_itself() {
        let dir = package();
        let text = record(dir.path(), &["dist/utils/paths.js", "dist/core/tools/read.js"]);
        std::fs::write(dir.path().join("dist/utils/paths.js"), "changed").unwrap();
        let error = check_recorded(&text, dir.path()).unwrap_err().to_string();
        assert!(error.starts_with("Pi changed: review dist/utils/paths.js"), "{error}");
    }

    #[test]
    fn a_new_caller_of_resolve_read_path_names_itself() {
        let dir = package();
        let text = record(dir.path(), &["dist/utils/paths.js", "dist/core/tools/read.js"]);
        std::fs::write(dir.path().join("dist/core/tools/write.js"), "resolveReadPath()").unwrap();
        let error = check_recorded(&text, dir.path()).unwrap_err().to_string();
        assert!(error.contains("review dist/core/tools/write.js"), "{error}");
    }
}
