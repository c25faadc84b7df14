//! The runner's git never reads what the session wrote (issue 20), end to end: the attack
//! battery. The real Pi, driven by the scripted model, with a gate that allows everything (so no
//! `.git` rule of the gate hides an attempt), plants each attack of [`ATTACKS`] in a clone of its
//! own, then calls `fetch_review` and `push_working` on that clone. Every command an attack
//! plants writes a marker file, named after the attack, outside the workspace, in the workspace,
//! in `RUN/tmp`, in the state directory and in `STATE/git`: the places git's domain reaches, or
//! reached before this change, and one no domain grants. After the session no file named
//! `marker-*` may exist anywhere under the scenario's root.
//!
//! It runs four times: a role with bash that plants with bash (and can make hooks executable),
//! and a role with `write` only that plants with its write tool, each with the default
//! confinement and with `confine: "off"`. The git tools must still work where the attack only
//! planted configuration (the fetch brings the review, the push moves the branch), and refuse
//! where the clone's `.git` sends git elsewhere (`unsafe-git-dir`) or the branch is not one
//! (`bad-branch`, `no-such-branch`).

use std::path::{Path, PathBuf};

use harness_testkit::{Cli, CliPaths, FakeHost, Reply, SessionScenario, git, require_cli};
use serde_json::json;

use super::confined_clis::{Session, allow_all_session};

/// A commit id no repository here has.
const MISSING: &str = "0123456789abcdef0123456789abcdef01234567";

/// What a tool call must answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Outcome {
    /// Success.
    Ok,
    /// `refused: CODE`.
    Refused(&'static str),
    /// Any error (a branch the tool socket or the runner refuses).
    Error,
}

/// What an attack plants and what the git tools must answer afterwards.
struct Attack {
    /// The attack's name, also its project's (and its clone's directory).
    name: &'static str,
    /// Files the session writes: path relative to the clone, content, executable.
    plant: fn(&Ctx) -> Vec<(String, String, bool)>,
    /// True to leave the clone without `.git` (its git directory moved to `real.git`), for the
    /// session to write one.
    no_git: bool,
    /// What `fetch_review` of the attack's review must answer.
    fetch: Outcome,
    /// The branches `push_working` is called with, and what each must answer.
    pushes: &'static [(&'static str, Outcome)],
}

/// What an attack is planted with.
struct Ctx {
    /// The clone.
    clone: PathBuf,
    /// A shell command that writes the attack's markers.
    cmd: String,
    /// The same as a `#!/bin/sh` script.
    script: String,
    /// The same as an `ext::` URL's command (spaces as `% `).
    ext: String,
    /// The clone's configuration as `git init` left it.
    config: String,
    /// The attack's work ref on the host.
    work_ref: String,
}

impl Ctx {
    fn with_config(&self, extra: &str) -> (String, String, bool) {
        (".git/config".to_owned(), format!("{}{extra}", self.config), false)
    }

    /// A promisor remote whose upload-pack is the marker command: a missing object makes git
    /// run it to fetch the object lazily.
    fn promisor(&self) -> String {
        format!(
            "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = evil\n[remote \"evil\"]\n\turl = {}\n\tpromisor = true\n\tuploadpack = \"{}\"\n",
            self.clone.display(),
            self.cmd
        )
    }

    /// Refs to the missing commit: the branch `ghost` and the tracking ref the fetch updates.
    fn missing_refs(&self) -> Vec<(String, String, bool)> {
        vec![
            (".git/refs/heads/ghost".to_owned(), format!("{MISSING}\n"), false),
            (format!(".git/refs/remotes/working/{}", self.work_ref), format!("{MISSING}\n"), false),
        ]
    }

    /// Filter, diff and merge drivers named `evil` that run the marker command.
    fn drivers(&self) -> String {
        let cmd = &self.cmd;
        format!(
            "[filter \"evil\"]\n\tclean = \"{cmd}\"\n\tsmudge = \"{cmd}\"\n\tprocess = \"{cmd}\"\n\trequired = true\n[diff \"evil\"]\n\tcommand = \"{cmd}\"\n\ttextconv = \"{cmd}\"\n[merge \"evil\"]\n\tdriver = \"{cmd}\"\n"
        )
    }

    /// Another repository in the clone, `evil.git`, whose configuration is the promisor attack
    /// and whose `feature` is the missing commit.
    fn evil_repository(&self) -> Vec<(String, String, bool)> {
        vec![
            ("evil.git/HEAD".to_owned(), "ref: refs/heads/feature\n".to_owned(), false),
            ("evil.git/config".to_owned(), self.promisor(), false),
            ("evil.git/refs/heads/feature".to_owned(), format!("{MISSING}\n"), false),
            ("evil.git/objects/info/packs".to_owned(), "\n".to_owned(), false),
        ]
    }
}

const HOOKS: &[&str] =
    &["reference-transaction", "post-index-change", "pre-push", "post-checkout", "post-merge"];

const FEATURE_OK: &[(&str, Outcome)] = &[("feature", Outcome::Ok)];
const GHOST: &[(&str, Outcome)] =
    &[("ghost", Outcome::Refused("no-such-branch")), ("feature", Outcome::Ok)];
const UNSAFE: Outcome = Outcome::Refused("unsafe-git-dir");
const FEATURE_UNSAFE: &[(&str, Outcome)] = &[("feature", UNSAFE)];

/// The battery.
const ATTACKS: &[Attack] = &[
    Attack {
        name: "promisor",
        plant: |c| {
            let mut files = vec![c.with_config(&c.promisor())];
            files.extend(c.missing_refs());
            files
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: GHOST,
    },
    Attack {
        name: "include",
        plant: |c| {
            let include = c.clone.join("evil.inc");
            let mut files = vec![
                c.with_config(&format!("[include]\n\tpath = {}\n", include.display())),
                ("evil.inc".to_owned(), c.promisor(), false),
            ];
            files.extend(c.missing_refs());
            files
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: GHOST,
    },
    Attack {
        name: "includeif",
        plant: |c| {
            let include = c.clone.join("evil.inc");
            let mut files = vec![
                c.with_config(&format!(
                    "[includeIf \"gitdir:/\"]\n\tpath = {}\n[includeIf \"onbranch:**\"]\n\tpath = {}\n",
                    include.display(),
                    include.display()
                )),
                ("evil.inc".to_owned(), c.promisor(), false),
            ];
            files.extend(c.missing_refs());
            files
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: GHOST,
    },
    Attack {
        name: "extensions",
        plant: |c| {
            let mut files = vec![
                c.with_config(
                    "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n",
                ),
                (".git/config.worktree".to_owned(), c.promisor(), false),
            ];
            files.extend(c.missing_refs());
            files
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: GHOST,
    },
    Attack {
        name: "fsmonitor",
        plant: |c| vec![c.with_config(&format!("[core]\n\tfsmonitor = \"{}\"\n", c.cmd))],
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "hookspath",
        plant: |c| {
            let hooks = c.clone.join("hooks");
            let mut files =
                vec![c.with_config(&format!("[core]\n\thooksPath = {}\n", hooks.display()))];
            files
                .extend(HOOKS.iter().map(|hook| (format!("hooks/{hook}"), c.script.clone(), true)));
            files
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "hooks",
        plant: |c| {
            HOOKS
                .iter()
                .map(|hook| (format!(".git/hooks/{hook}"), c.script.clone(), true))
                .collect()
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "gitattributes",
        plant: |c| {
            vec![
                c.with_config(&c.drivers()),
                (
                    ".gitattributes".to_owned(),
                    "* filter=evil diff=evil merge=evil\n".to_owned(),
                    false,
                ),
            ]
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "infoattributes",
        plant: |c| {
            vec![
                c.with_config(&c.drivers()),
                (
                    ".git/info/attributes".to_owned(),
                    "* filter=evil diff=evil merge=evil\n".to_owned(),
                    false,
                ),
            ]
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "worktree",
        plant: |c| {
            let tree = c.clone.join("tree");
            vec![
                c.with_config(&format!("[core]\n\tworktree = {}\n{}", tree.display(), c.drivers())),
                ("tree/.gitattributes".to_owned(), "* filter=evil diff=evil\n".to_owned(), false),
                ("tree/file.txt".to_owned(), "changed\n".to_owned(), false),
            ]
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "sshcommand",
        plant: |c| {
            vec![c.with_config(&format!(
                "[url \"ssh://evil.invalid/x\"]\n\tinsteadOf = /\n[core]\n\tsshCommand = \"{}\"\n[protocol]\n\tallow = always\n",
                c.cmd
            ))]
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "ext",
        plant: |c| {
            vec![c.with_config(&format!(
                "[url \"ext::sh -c {}\"]\n\tinsteadOf = /\n[protocol \"ext\"]\n\tallow = always\n[protocol]\n\tallow = always\n",
                c.ext
            ))]
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: FEATURE_OK,
    },
    Attack {
        name: "alternates",
        plant: |c| {
            let mut files = c.evil_repository();
            let objects = c.clone.join("evil.git/objects");
            files.push((
                ".git/objects/info/alternates".to_owned(),
                format!("{}\n", objects.display()),
                false,
            ));
            files
        },
        no_git: false,
        fetch: UNSAFE,
        pushes: FEATURE_UNSAFE,
    },
    Attack {
        name: "commondir",
        plant: |c| {
            let mut files = c.evil_repository();
            files.push((
                ".git/commondir".to_owned(),
                format!("{}\n", c.clone.join("evil.git").display()),
                false,
            ));
            files
        },
        no_git: false,
        fetch: UNSAFE,
        pushes: FEATURE_UNSAFE,
    },
    Attack {
        name: "gitfile",
        plant: |c| {
            let mut files = c.evil_repository();
            files.push((
                ".git".to_owned(),
                format!("gitdir: {}\n", c.clone.join("evil.git").display()),
                false,
            ));
            files
        },
        no_git: true,
        fetch: UNSAFE,
        pushes: FEATURE_UNSAFE,
    },
    Attack {
        name: "branches",
        plant: |c| {
            vec![
                // A symbolic ref out of refs/, and a packed ref to the missing commit.
                (".git/refs/heads/sym".to_owned(), "ref: ../../config\n".to_owned(), false),
                (".git/packed-refs".to_owned(), format!("{MISSING} refs/heads/packed\n"), false),
                (".git/refs/heads/cmd".to_owned(), format!("$({})\n", c.cmd), false),
            ]
        },
        no_git: false,
        fetch: Outcome::Ok,
        pushes: &[
            ("--upload-pack=touch marker-branches", Outcome::Error),
            ("-c", Outcome::Error),
            ("feature/../../config", Outcome::Error),
            ("feature;touch marker-branches", Outcome::Error),
            ("$(touch marker-branches)", Outcome::Error),
            ("feature\nx", Outcome::Error),
            ("HEAD", Outcome::Refused("no-such-branch")),
            ("feature^{tree}", Outcome::Error),
            ("sym", Outcome::Refused("no-such-branch")),
            ("packed", Outcome::Refused("no-such-branch")),
            ("cmd", Outcome::Refused("no-such-branch")),
            ("feature", Outcome::Ok),
        ],
    },
];

/// Where the markers of attack `name` would be written.
fn markers(s: &SessionScenario, name: &str) -> Vec<PathBuf> {
    let run = s.run_dir();
    let file = format!("marker-{name}");
    vec![
        s.root().join(&file),
        s.workspace().join(&file),
        run.join("tmp").join(&file),
        run.join("state").join(&file),
        run.join("state/git").join(&file),
    ]
}

/// Every file under `dir` whose name starts with `marker-`, links not followed.
fn markers_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with("marker-") {
            found.push(path.clone());
        }
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            markers_under(&path, found);
        }
    }
}

/// The clone of attack `name` (branch `feature`, one commit, also the host's work ref under
/// review `rr-NAME`), and what its attack is planted with.
fn prepare(s: &SessionScenario, host: &FakeHost, attack: &Attack) -> Ctx {
    let clone = s.workspace().join(attack.name);
    std::fs::create_dir_all(&clone).unwrap();
    git(&clone, &["init", "--quiet", "-b", "feature"]).unwrap();
    std::fs::write(clone.join("file.txt"), "one\n").unwrap();
    git(&clone, &["add", "file.txt"]).unwrap();
    git(&clone, &["commit", "--quiet", "-m", "one"]).unwrap();
    let work_ref = format!("work/vikunja-{}-7", attack.name);
    let working = host.working();
    git(
        &clone,
        &["push", "--quiet", working.to_str().unwrap(), &format!("feature:refs/heads/{work_ref}")],
    )
    .unwrap();
    host.review(&format!("rr-{}", attack.name), attack.name, &work_ref);
    let config = std::fs::read_to_string(clone.join(".git/config")).unwrap();
    if attack.no_git {
        std::fs::rename(clone.join(".git"), clone.join("real.git")).unwrap();
    }
    let places: Vec<String> =
        markers(s, attack.name).iter().map(|path| path.display().to_string()).collect();
    let cmd = format!("touch {}; false", places.join(" "));
    let script = format!("#!/bin/sh\n{cmd}\n");
    let ext = format!("touch% {}", places.join("% "));
    Ctx { clone, cmd, script, ext, config, work_ref }
}

/// `text` as a `printf` format that prints it: every byte an octal escape, so no quote, `%` or
/// backslash of it means anything to the shell or to printf.
fn octal(text: &str) -> String {
    text.bytes().map(|byte| format!("\\{byte:03o}")).collect()
}

/// The tool calls that plant `files` in `clone`: one bash command, or one write per file.
fn plant_calls(
    name: &str,
    clone: &Path,
    files: &[(String, String, bool)],
    bash: bool,
) -> Vec<Reply> {
    if bash {
        let steps: Vec<String> = files
            .iter()
            .map(|(relative, content, executable)| {
                let path = clone.join(relative);
                let dir = path.parent().unwrap();
                let mut step = format!(
                    "rm -rf '{}' && mkdir -p '{}' && printf '{}' > '{}'",
                    path.display(),
                    dir.display(),
                    octal(content),
                    path.display()
                );
                if *executable {
                    step.push_str(&format!(" && chmod +x '{}'", path.display()));
                }
                step
            })
            .collect();
        vec![Reply::tool_use(
            format!("{name}-plant-0"),
            "bash",
            json!({"command": steps.join(" && ")}),
        )]
    } else {
        files
            .iter()
            .enumerate()
            .map(|(i, (relative, content, _))| {
                Reply::tool_use(
                    format!("{name}-plant-{i}"),
                    "write",
                    json!({"path": clone.join(relative), "content": content}),
                )
            })
            .collect()
    }
}

/// Runs the battery through the runner and the real Pi, planted with bash or with write, with
/// confinement on (the default) or off, and checks every marker place and every answer.
fn battery(pi: &CliPaths, bash: bool, confine_off: bool) {
    let host = FakeHost::start().unwrap();
    let planted = std::cell::RefCell::new(Vec::new());
    let session: Session = allow_all_session(
        pi,
        |options| {
            let mut limits = vec!["read".to_owned(), "write".to_owned()];
            if bash {
                limits.push("bash".to_owned());
            }
            options.limits = Some(limits);
            options.projects = ATTACKS
                .iter()
                .map(|attack| harness_tools::Project { name: attack.name.into(), clone: true })
                .collect();
            options.actions = vec!["review.verdict".to_owned(), "git.push.working".to_owned()];
            options.run_json.insert("gitSocket".to_owned(), json!(host.git_socket()));
            if confine_off {
                options.run_json.insert("confine".to_owned(), json!("off"));
            }
        },
        |s| {
            let mut replies = Vec::new();
            for attack in ATTACKS {
                let ctx = prepare(s, &host, attack);
                let files = (attack.plant)(&ctx);
                let calls = plant_calls(attack.name, &ctx.clone, &files, bash);
                planted.borrow_mut().push((attack.name, calls.len()));
                replies.extend(calls);
                replies.push(Reply::tool_use(
                    format!("{}-fetch", attack.name),
                    "fetch_review",
                    json!({"request": format!("rr-{}", attack.name)}),
                ));
                for (i, (branch, _)) in attack.pushes.iter().enumerate() {
                    replies.push(Reply::tool_use(
                        format!("{}-push-{i}", attack.name),
                        "push_working",
                        json!({"task_ref": format!("{}-12", attack.name), "project": attack.name, "branch": branch}),
                    ));
                }
            }
            replies.push(Reply::text("done"));
            replies
        },
        |_| {},
    );
    let s = &session.scenario;
    let mut problems = Vec::new();
    for (name, calls) in planted.into_inner() {
        for i in 0..calls {
            let result = session.tool_result(&format!("{name}-plant-{i}"));
            assert!(!result.is_error, "{name}: the session could not plant the attack: {result:?}");
        }
    }
    let mut found = Vec::new();
    markers_under(s.root(), &mut found);
    for attack in ATTACKS {
        let left: Vec<&PathBuf> = found
            .iter()
            .filter(|path| {
                path.file_name()
                    .is_some_and(|file| file == format!("marker-{}", attack.name).as_str())
            })
            .collect();
        if !left.is_empty() {
            problems.push(format!("{}: a planted command ran: {left:?}", attack.name));
        }
        let mut check = |id: String, expected: Outcome| {
            let result = session.tool_result(&id);
            let good = match expected {
                Outcome::Ok => !result.is_error,
                Outcome::Refused(code) => {
                    result.is_error && result.text == format!("refused: {code}")
                }
                Outcome::Error => result.is_error,
            };
            if !good {
                problems.push(format!("{id}: expected {expected:?}, got {:?}", result.text));
            }
        };
        check(format!("{}-fetch", attack.name), attack.fetch);
        for (i, (_, expected)) in attack.pushes.iter().enumerate() {
            check(format!("{}-push-{i}", attack.name), *expected);
        }
    }
    assert!(
        found.is_empty() && problems.is_empty(),
        "markers left: {found:?}\n{}",
        problems.join("\n")
    );
    // The pushes that succeeded reached the host, one each, and each carried the clone's
    // feature, never the missing commit.
    let pushed: Vec<_> =
        host.calls().into_iter().filter(|call| call.op == "working.push").collect();
    let expected = ATTACKS
        .iter()
        .flat_map(|attack| attack.pushes.iter())
        .filter(|(_, outcome)| *outcome == Outcome::Ok)
        .count();
    assert_eq!(pushed.len(), expected, "{pushed:?}");
    for call in &pushed {
        assert_ne!(call.args["commit"], MISSING, "{call:?}");
        assert_eq!(call.args["branch"], "feature", "{call:?}");
    }
    // Each review that was fetched is in its clone, objects and ref, for the clone's own git.
    for attack in ATTACKS.iter().filter(|attack| attack.fetch == Outcome::Ok) {
        let clone = s.workspace().join(attack.name);
        let work_ref = format!("work/vikunja-{}-7", attack.name);
        let reviewed =
            git(&host.working(), &["rev-parse", &format!("refs/heads/{work_ref}")]).unwrap();
        let tracking = format!("refs/remotes/working/{work_ref}^{{commit}}");
        assert_eq!(
            git(&clone, &["rev-parse", "--verify", &tracking]).unwrap(),
            reviewed,
            "{}",
            attack.name
        );
    }
}

#[test]
fn a_bash_role_plants_every_attack_and_the_runners_git_runs_none() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    battery(&pi, true, false);
}

#[test]
fn a_bash_role_with_confine_off_plants_every_attack_and_the_runners_git_runs_none() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    battery(&pi, true, true);
}

#[test]
fn a_write_only_role_plants_every_attack_and_the_runners_git_runs_none() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    battery(&pi, false, false);
}

#[test]
fn a_write_only_role_with_confine_off_plants_every_attack_and_the_runners_git_runs_none() {
    let Some(pi) = require_cli(Cli::Pi) else { return };
    battery(&pi, false, true);
}
