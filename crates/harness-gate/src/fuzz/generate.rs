//! Random trees and random calls, from a seeded generator so that a failure reproduces.

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use unicode_normalization::UnicodeNormalization;

use crate::Harness;
use crate::pi::nfd;

/// SplitMix64: small, fast, and the same sequence on every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator for tree `tree` of a run with `seed`.
    pub fn for_tree(seed: u64, tree: u64) -> Self {
        let mut rng = Self(seed ^ tree.wrapping_add(1).wrapping_mul(0xA076_1D64_78BD_642F));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; `n` must not be 0.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// True with probability `percent` / 100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Where the workspace may live, relative to the tree's root: plain, and under names in the
/// spellings Pi's read rewrites (so a sibling in another spelling may exist).
const WORKSPACES: &[(&str, &str)] = &[
    ("ws", "ws"),
    ("ws", "ws"),
    ("deep/er/ws", "deep/er/ws"),
    ("jo's/ws", "jo\u{2019}s/ws"),
    ("caf\u{e9}/ws", "cafe\u{301}/ws"),
    ("at 1 PM./ws", "at 1\u{202F}PM./ws"),
];

/// Names of entries: plain, and each Unicode spelling Pi normalises or tries.
const NAMES: &[&str] = &[
    "a",
    "b",
    "c",
    "sub",
    "x.txt",
    "new",
    "..foo",
    "~",
    "@x",
    "file:",
    "jo's",
    "jo\u{2019}s",
    "caf\u{e9}",
    "cafe\u{301}",
    "d'\u{e9}cran",
    "d\u{2019}e\u{301}cran",
    "Shot 1.02 PM.png",
    "Shot 1.02\u{202F}PM.png",
    "shot 9 am.x",
    "a b",
    "a\u{a0}b",
    "a\u{2003}b",
    // Git metadata, which no write may reach.
    ".git",
    ".git",
    "config",
    // Characters Claude Code's Glob takes literally in its search base, and `..` in a name.
    "l!nk",
    "a(b)",
    "x]",
    "y}",
    "b\\s",
    "foo..bar",
    // Names shaped like drive letters, which a file URL must not protect.
    "C:",
    "c|",
];

/// Link targets that do not depend on the tree.
const FIXED_TARGETS: &[&str] = &[
    ".",
    "..",
    "../..",
    "../../..",
    "/",
    "/etc",
    "/etc/passwd",
    "/proc/self/cwd",
    "missing",
    "missing/deeper",
    "a/../..",
    "sub/../../out",
    "x.txt/..",
];

/// A generated tree on disk.
#[derive(Debug)]
pub struct Tree {
    /// The tree's root, canonical.
    pub root: PathBuf,
    /// The workspace as the policy gives it.
    pub workspace: String,
    /// What `~` expands to.
    pub home: String,
    /// The tree, one entry per line (`dir/`, `file`, `link -> target`), relative to the root.
    pub listing: Vec<String>,
    /// The workspace's real location, relative to the root.
    ws_rel: String,
    /// Every name created, and some that are not, relative to the root: what calls aim at.
    nodes: Vec<String>,
}

impl Tree {
    /// Builds a random tree in `root`, an existing empty directory.
    pub fn build(root: &Path, rng: &mut Rng) -> io::Result<Self> {
        let root = root.canonicalize()?;
        let (ws_rel, sibling) = *rng.pick(WORKSPACES);
        let mut tree = Tree {
            root: root.clone(),
            workspace: String::new(),
            home: String::new(),
            listing: Vec::new(),
            ws_rel: ws_rel.to_owned(),
            nodes: Vec::new(),
        };
        tree.dir(ws_rel)?;
        tree.dir("out")?;
        tree.file("out/secret")?;
        tree.dir("home")?;
        tree.file("home/notes")?;
        if sibling != ws_rel && rng.chance(30) {
            if rng.chance(50) {
                tree.dir(sibling)?;
                tree.file(&format!("{sibling}/x.txt"))?;
            } else {
                let parent = sibling.rsplit_once('/').map_or("", |(parent, _)| parent);
                if !parent.is_empty() {
                    tree.dir(parent)?;
                }
                let up = "../".repeat(sibling.matches('/').count());
                tree.link(sibling, &format!("{up}out"))?;
            }
        }
        tree.workspace = if rng.chance(25) {
            let target = if rng.chance(50) {
                ws_rel.to_owned()
            } else {
                format!("{}/{ws_rel}", root.display())
            };
            tree.link("wslink", &target)?;
            format!("{}/wslink", root.display())
        } else {
            format!("{}/{ws_rel}", root.display())
        };
        tree.home = if rng.chance(10) {
            format!("{}/{ws_rel}", root.display())
        } else {
            format!("{}/home", root.display())
        };
        let mut dirs = vec![ws_rel.to_owned(), "out".to_owned(), "home".to_owned()];
        let count = 4 + rng.below(26);
        for _ in 0..count {
            let parent = if rng.chance(70) { dirs[0].clone() } else { rng.pick(&dirs).clone() };
            let parent = if rng.chance(60) {
                parent
            } else {
                let nested: Vec<&String> =
                    dirs.iter().filter(|dir| dir.starts_with(&parent)).collect();
                (*rng.pick(&nested)).clone()
            };
            let path = format!("{parent}/{}", rng.pick(NAMES));
            if std::fs::symlink_metadata(root.join(&path)).is_ok() {
                continue;
            }
            match rng.below(20) {
                0..=5 => tree.file(&path)?,
                6..=10 => {
                    tree.dir(&path)?;
                    dirs.push(path.clone());
                }
                _ => {
                    let target = tree.link_target(&path, rng);
                    tree.link(&path, &target)?;
                }
            }
        }
        for _ in 0..4 {
            let dir = rng.pick(&dirs).clone();
            tree.nodes.push(format!("{dir}/{}", rng.pick(&["missing", "new.txt", "n/e/w"])));
        }
        tree.nodes.push(String::new());
        Ok(tree)
    }

    fn dir(&mut self, path: &str) -> io::Result<()> {
        std::fs::create_dir_all(self.root.join(path))?;
        self.listing.push(format!("{path}/"));
        self.nodes.push(path.to_owned());
        Ok(())
    }

    fn file(&mut self, path: &str) -> io::Result<()> {
        std::fs::write(self.root.join(path), b"x")?;
        self.listing.push(path.to_owned());
        self.nodes.push(path.to_owned());
        Ok(())
    }

    fn link(&mut self, path: &str, target: &str) -> io::Result<()> {
        std::os::unix::fs::symlink(target, self.root.join(path))?;
        self.listing.push(format!("{path} -> {target}"));
        self.nodes.push(path.to_owned());
        Ok(())
    }

    /// A target for a link at `path`: another node (relative or absolute), a fixed target, a
    /// climb through another link, a name that does not exist, or the link itself (a loop).
    fn link_target(&self, path: &str, rng: &mut Rng) -> String {
        let parent = path.rsplit_once('/').map_or("", |(parent, _)| parent);
        match rng.below(11) {
            10 => path.rsplit_once('/').map_or(path, |(_, name)| name).to_owned(),
            0..=3 => relative(parent, rng.pick(self.nodes.as_slice()).as_str()),
            4..=5 => format!("{}/{}", self.root.display(), rng.pick(&self.nodes)),
            6..=7 => (*rng.pick(FIXED_TARGETS)).to_owned(),
            8 => format!(
                "{}/../{}",
                relative(parent, rng.pick(self.nodes.as_slice()).as_str()),
                rng.pick(NAMES)
            ),
            _ => format!(
                "{}/{}",
                relative(parent, rng.pick(self.nodes.as_slice()).as_str()),
                rng.pick(NAMES)
            ),
        }
    }

    /// The tree as text in the notation of harness-gate's `tests/suite/tree.rs` (`dir/`,
    /// `file`, `link -> target`, `@workspace`, the root as `$ROOT`), non-ASCII escaped as Rust
    /// escapes, so that it can be pasted into a case.
    pub fn describe(&self) -> String {
        let root = self.root.display().to_string();
        let relative = |path: &str| path.replace(&root, "$ROOT");
        let workspace = self.workspace.strip_prefix(&format!("{root}/")).unwrap_or(&self.workspace);
        let mut text = format!(
            "root {root}\nhome {}\n@workspace {}\n",
            relative(&self.home),
            escape(workspace)
        );
        for line in &self.listing {
            text.push_str(&escape(&relative(line)));
            text.push('\n');
        }
        text
    }

    /// A random call for `harness`: the tool's name and its input.
    pub fn call(&self, harness: Harness, rng: &mut Rng) -> (String, Value) {
        let tools: &[&str] = match harness {
            Harness::Pi => &["read", "read", "read", "write", "edit", "grep", "find", "find", "ls"],
            Harness::ClaudeCode => {
                &["Read", "Read", "Read", "Write", "Edit", "MultiEdit", "Grep", "Glob", "Glob"]
            }
        };
        if rng.chance(2) {
            let odd = match harness {
                Harness::Pi => {
                    *rng.pick(&["bash", "list_tasks", "Read", "mcp__mosaic__list_tasks"])
                }
                Harness::ClaudeCode => {
                    *rng.pick(&["Bash", "mcp__mosaic__list_tasks", "read", "list_tasks"])
                }
            };
            return (odd.to_owned(), json!({"path": self.path_arg(harness, rng)}));
        }
        let tool = *rng.pick(tools);
        let mut input = Map::new();
        match tool {
            "read" | "write" | "edit" => {
                input.insert("path".to_owned(), self.path_arg(harness, rng).into());
            }
            "Read" | "Write" | "Edit" | "MultiEdit" => {
                input.insert("file_path".to_owned(), self.path_arg(harness, rng).into());
            }
            _ => {
                if rng.chance(75) {
                    input.insert("path".to_owned(), self.path_arg(harness, rng).into());
                }
                let pattern = self.pattern(harness, rng);
                match tool {
                    "grep" | "Grep" => {
                        input.insert("pattern".to_owned(), "x".into());
                        if rng.chance(70) {
                            input.insert("glob".to_owned(), pattern.into());
                        }
                    }
                    _ => {
                        input.insert("pattern".to_owned(), pattern.into());
                    }
                }
            }
        }
        if matches!(tool, "write" | "Write") {
            input.insert("content".to_owned(), "x".into());
        }
        (tool.to_owned(), Value::Object(input))
    }

    /// A random path argument aimed at a node of the tree, in one of the forms each harness
    /// takes, with the Unicode spellings and the noise the harness normalises.
    fn path_arg(&self, harness: Harness, rng: &mut Rng) -> String {
        if rng.chance(3) {
            return (*rng.pick(&["", " ", "\0", "~", ".", "..", "/", "a\0b", "~/", "@", "//"]))
                .to_owned();
        }
        let mut target = rng.pick(&self.nodes).clone();
        if rng.chance(25) {
            let extra = *rng.pick(&[
                "..",
                "../..",
                "../x",
                "./a",
                "new.txt",
                "..foo",
                "a/../..",
                ".git/config",
                "x/../.git/hooks/pre-commit",
                ".GIT/config",
            ]);
            target = if target.is_empty() { extra.to_owned() } else { format!("{target}/{extra}") };
        }
        let root = self.root.display();
        let mut path = match rng.below(12) {
            0..=3 => relative(&self.ws_rel, &target),
            4..=5 => format!("{root}/{target}"),
            6 => format!("{}/{}", self.workspace, relative(&self.ws_rel, &target)),
            7 => format!("~/{}", relative("home", &target)),
            8 => format!("{}{}", "../".repeat(rng.below(5)), rng.pick(NAMES)),
            9 => format!("{}/{}", relative(&self.ws_rel, &target), rng.pick(NAMES)),
            10 if rng.chance(50) => file_url(&format!("{root}/{target}"), rng),
            10 => quirky_file_url(&format!("{root}/{target}"), rng),
            _ => format!("{}/../{}", relative(&self.ws_rel, &target), rng.pick(NAMES)),
        };
        if rng.chance(10) {
            path.push('/');
        }
        if rng.chance(20) {
            path = respell(&path, rng);
        }
        match harness {
            Harness::Pi => {
                if rng.chance(8) {
                    path.insert(0, '@');
                }
            }
            Harness::ClaudeCode => {
                const SPACES: &[&str] =
                    &[" ", "  ", "\n", "\t", "\u{feff}", "\u{a0}", "\u{2003}", "\u{85}", "\r\n"];
                if rng.chance(15) {
                    path.insert_str(0, rng.pick::<&str>(SPACES));
                }
                if rng.chance(15) {
                    path.push_str(rng.pick::<&str>(SPACES));
                }
            }
        }
        path
    }

    /// A random find/Glob pattern or grep glob: a literal prefix aimed at the tree, then
    /// wildcards, braces and climbs.
    fn pattern(&self, harness: Harness, rng: &mut Rng) -> String {
        const TAILS: &[&str] = &[
            "*",
            "**/*",
            "*.txt",
            "**",
            "{a,b}/*",
            "{..,a}/*",
            "*/..",
            "*/../x",
            "[a-z]*",
            "**/..",
            "{a,sub}",
            "x{,/..}",
            "{/etc,a}/*",
            "{~,a}/*",
            "a{b",
            "..*",
            "*.{txt,png}",
            "*..*",
            "**/..foo",
            "foo..bar",
            "{sub/**,a/**}",
            "{a/**,..}",
            ".{.,}/x",
            "a!(b)/*",
            "x]/*",
            "y}/**",
        ];
        let tail = *rng.pick(TAILS);
        if harness == Harness::ClaudeCode && rng.chance(20) {
            return self.claude_glob_base(rng, tail);
        }
        match rng.below(6) {
            0 => tail.to_owned(),
            1 => {
                let path = self.path_arg(harness, rng);
                let path = path.trim_end_matches('/');
                format!("{path}/{tail}")
            }
            2 => format!("{}/{tail}", self.path_arg(harness, rng).trim_matches(is_ascii_ws)),
            3 => {
                let target = rng.pick(&self.nodes);
                format!("{}/{target}/{tail}", self.root.display())
            }
            4 => self.path_arg(harness, rng),
            _ => format!("{}{tail}", "../".repeat(rng.below(3))),
        }
    }
}

impl Tree {
    /// An absolute pattern aimed at Claude Code's Glob base: a node, maybe a `..`, then white
    /// space JavaScript's `trim` removes (or U+0085, which it keeps), then the tail.
    fn claude_glob_base(&self, rng: &mut Rng, tail: &str) -> String {
        const JS_SPACES: &[&str] =
            &[" ", "\t", "\u{a0}", "\u{3000}", "\u{feff}", "\u{2028}", "\u{b}", "\u{85}", " \t"];
        let root = self.root.display();
        let target = rng.pick(&self.nodes);
        let climb = *rng.pick(&["", "/..", "/../..", "/x/.."]);
        let space = if rng.chance(80) { *rng.pick(JS_SPACES) } else { "" };
        let tail = if rng.chance(20) { "" } else { tail };
        format!("{root}/{target}{climb}{space}/{tail}")
    }
}

fn is_ascii_ws(c: char) -> bool {
    c.is_ascii_whitespace()
}

/// The relative path from directory `from` to `to` (both relative to the tree's root).
fn relative(from: &str, to: &str) -> String {
    let from: Vec<&str> = from.split('/').filter(|s| !s.is_empty()).collect();
    let to: Vec<&str> = to.split('/').filter(|s| !s.is_empty()).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; from.len() - common];
    parts.extend(&to[common..]);
    if parts.is_empty() { ".".to_owned() } else { parts.join("/") }
}

/// A `file://` URL for `path`, percent-encoded in one of several ways Pi accepts or rejects.
fn file_url(path: &str, rng: &mut Rng) -> String {
    let mut url =
        String::from(*rng.pick(&["file://", "file://", "file://localhost", "file://host"]));
    for c in path.chars() {
        let encode = !c.is_ascii_alphanumeric() && c != '/' && (c != '.' || rng.chance(20));
        if encode && (rng.chance(70) || c == ' ' || c == '%' || c == '#' || c == '?') {
            let mut bytes = [0; 4];
            for byte in c.encode_utf8(&mut bytes).bytes() {
                url.push_str(&format!("%{byte:02X}"));
            }
        } else if c == '/' && rng.chance(2) {
            url.push_str("%2F");
        } else {
            url.push(c);
        }
    }
    url
}

/// A `file://` URL for `path` with the WHATWG quirks Node's parser applies: a segment shaped
/// like a drive letter (`C:`, `c|`) in any position followed by climbs, percent-encoded dots,
/// backslashes for slashes, a `localhost` host in other spellings, tabs and newlines the parser
/// removes, trailing spaces it strips, a query or fragment it drops, `%00`.
fn quirky_file_url(path: &str, rng: &mut Rng) -> String {
    const DRIVES: &[&str] = &["C:", "c|", "Z|", "a:", "%43:", "C%7C"];
    const DOTS: &[&str] = &["..", "%2e%2e", ".%2E", "%2E.", ".", "%2e"];
    let mut segments: Vec<String> =
        path.split('/').filter(|segment| !segment.is_empty()).map(str::to_owned).collect();
    for _ in 0..=rng.below(3) {
        let at = rng.below(segments.len() + 1);
        let mut insert = Vec::new();
        if rng.chance(60) {
            insert.push((*rng.pick(DRIVES)).to_owned());
        }
        for _ in 0..rng.below(4) {
            insert.push((*rng.pick(DOTS)).to_owned());
        }
        segments.splice(at..at, insert);
    }
    let host = *rng.pick(&["", "", "localhost", "LOCALHOST", "%6Cocalhost", "C:", "c|", "host"]);
    let mut url = format!("file://{host}");
    for segment in &segments {
        url.push(if rng.chance(15) { '\\' } else { '/' });
        url.push_str(segment);
    }
    if rng.chance(10) {
        url.push('/');
    }
    if rng.chance(10) {
        let at = 7 + rng.below(url.len() - 6);
        if url.is_char_boundary(at) {
            url.insert(at, *rng.pick(&['\t', '\n', '\r']));
        }
    }
    match rng.below(12) {
        0 => url.push_str("?q=/../.."),
        1 => url.push_str("#/../.."),
        2 => url.push_str("  "),
        3 => url.push_str("%00"),
        _ => {}
    }
    url
}

/// Another spelling of `path`: Unicode spaces for spaces, U+2019 for `'` and back, NFD and NFC.
fn respell(path: &str, rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => path.replace(" ", rng.pick::<&str>(&["\u{202F}", "\u{2003}", "\u{a0}", "\u{3000}"])),
        1 => path.replace('\'', "\u{2019}"),
        2 => path.replace('\u{2019}', "'"),
        3 => nfd(path),
        4 => path.nfc().collect(),
        _ => path.replace("PM.", "pm.").replace(' ', "\u{202F}"),
    }
}

/// A line with its control characters escaped, for a report.
pub(crate) fn escape(line: &str) -> String {
    line.chars()
        .map(|c| {
            if c.is_control() || !c.is_ascii() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
