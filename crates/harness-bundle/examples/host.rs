//! A host in Rust: builds a launch bundle through this library, writes run.json, starts
//! harness-runner on it with the capability on stdin, sends one message, waits for the RESULT,
//! and stops the runner.
//!
//! `cargo run -p harness-bundle --example host -- [--cli pi|claude] [--prefix P]`
//!
//! The broker and the model are the testkit's scripted ones (a real host talks to its own broker,
//! and the CLI to a real Messages API). The CLI is the one under `.tools/bin` (`cargo xtask
//! setup`). The binaries and assets are those `cargo xtask dist --prefix P` installed, or, without
//! `--prefix`, the checkout's: the binaries beside this example's directory (`target/debug`, built
//! by `cargo build --workspace`) and the assets from the sources.
//!
//! It prints the bundle's digest, the RESULT the runner sent and the runner's exit status, and
//! exits non-zero when any step fails or the RESULT is not the model's reply.

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use harness_bundle::{
    BundleRequest, Harness, InstallLayout, LaunchModel, ResolvedInstance, Route, SessionInfo,
    build_bundle, module, utf8_path,
};
use harness_testkit::{
    BrokerAnswer, Cli, Reply, Script, ScriptedBroker, ScriptedModel, require_cli, tools_bin_dir,
};
use serde_json::json;

/// The capability this host hands the runner; a real host gets it from its broker.
const CAP: &str = "cap-example-host-7d1e";
/// The message the host sends and the reply the scripted model gives to it.
const MESSAGE: &str = "What is the plan for today?";
const REPLY: &str = "Ship the login page, then fix the footer.";
/// How long the whole session may take before the host gives up.
const DEADLINE: Duration = Duration::from_secs(240);

type Failure = Box<dyn Error>;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("host: failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What the command line asks for.
struct Args {
    harness: Harness,
    prefix: Option<PathBuf>,
}

fn parse_args() -> Result<Args, Failure> {
    let mut args = Args { harness: Harness::Pi, prefix: None };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--cli" => {
                args.harness = match given.next().as_deref() {
                    Some("pi") => Harness::Pi,
                    Some("claude") => Harness::ClaudeCode,
                    other => return Err(format!("--cli takes pi or claude, not {other:?}").into()),
                }
            }
            "--prefix" => {
                let prefix = given.next().ok_or("--prefix takes a directory")?;
                args.prefix = Some(PathBuf::from(prefix));
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: host [--cli pi|claude] [--prefix P]"
                )
                .into());
            }
        }
    }
    Ok(args)
}

fn run() -> Result<(), Failure> {
    let args = parse_args()?;
    // The paths a bundle records are text: a path from the system becomes UTF-8 here, or the
    // error names it (`path-not-utf8`).
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize()?;
    let workspace_root = utf8_path("the checkout", checkout)?;
    let fixtures = workspace_root.join("fixtures");
    let cli = match args.harness {
        Harness::Pi => Cli::Pi,
        Harness::ClaudeCode => Cli::Claude,
    };
    let cli = require_cli(cli).ok_or_else(|| format!("{cli} is not installed under .tools/bin"))?;
    let install = match &args.prefix {
        Some(prefix) => InstallLayout::under(&utf8_path("--prefix", prefix.clone())?),
        None => {
            // target/debug/examples/host -> target/debug, where `cargo build` puts the binaries.
            let exe = std::env::current_exe()?;
            let bin_dir = exe.parent().and_then(Path::parent).ok_or("no target directory")?;
            InstallLayout::from_checkout(&workspace_root, &utf8_path("target", bin_dir.into())?)
        }
    };
    for (file, _mode) in install.files() {
        if !file.is_file() {
            return Err(format!(
                "{} is missing: build the workspace (`cargo build --workspace`) or pass the \
                 --prefix `cargo xtask dist` installed into",
                file
            )
            .into());
        }
    }

    // The peers: the scripted model answers the one message; the scripted broker claims the role,
    // serves the state and the message, and takes the RESULT.
    let model = ScriptedModel::start(Script::new([Reply::text(REPLY)]))?;
    let broker = ScriptedBroker::start()?;
    broker
        .answer("role.claim", BrokerAnswer::result(json!({"run": "run-example-1"})))
        .answer("role.release", BrokerAnswer::result(json!({})))
        .answer("message.read", BrokerAnswer::result(json!({"message": null})))
        .answer("message.send", BrokerAnswer::result(json!({"id": "result-1"})))
        .answer(
            "state",
            BrokerAnswer::result(json!({
                "launch": {"state": "running", "at": "2026-11-30T09:00:00Z", "event": "ev-1"},
                "tasks": {"open": [{"ref": "web-1", "title": "Ship the login page"}], "total": 1}
            })),
        )
        .answer_once(
            "message.read",
            BrokerAnswer::result(json!({"message": {
                "id": "m1", "from": "acme-cos", "kind": "message",
                "sentAt": "2026-11-30T09:00:00Z", "text": MESSAGE
            }})),
        );

    // The launch's directories: a workspace and a run directory the bundle goes into.
    let root = tempfile::Builder::new().prefix("harness-example-host-").tempdir()?;
    let root_path = utf8_path("the temporary directory", root.path().canonicalize()?)?;
    let workspace = root_path.join("workspace");
    std::fs::create_dir(&workspace)?;
    std::fs::write(workspace.join("README.md"), "# The sample project\n")?;
    let run_dir = root_path.join("run");
    std::fs::create_dir(&run_dir)?;

    // 1. Build the bundle: the pm role, routed to the chosen harness and the scripted model.
    let text = std::fs::read_to_string(fixtures.join("resolved/pm.json"))?;
    let mut resolved: ResolvedInstance = serde_json::from_str(&text)?;
    let thinking = match args.harness {
        Harness::Pi => "off",
        Harness::ClaudeCode => "low",
    };
    resolved.vars = BTreeMap::from([
        ("harness".to_owned(), args.harness.name().to_owned()),
        ("model".to_owned(), "scripted".to_owned()),
        ("thinking".to_owned(), thinking.to_owned()),
    ]);
    resolved.launch.models = BTreeMap::from([(
        "scripted".to_owned(),
        LaunchModel { provider: "scripted".to_owned(), model: "scripted-model".to_owned() },
    )]);
    resolved.services.clear();
    resolved.skills.clear();
    let harness = module(args.harness.name()).ok_or("no harness module")?;
    let built = build_bundle(&BundleRequest {
        dir: run_dir.join("bundle"),
        resolved: &resolved,
        contract: std::fs::read_to_string(fixtures.join("bundle/contracts/pm.md"))?,
        arbiter: BTreeMap::new(),
        tracker: resolved.tracker.clone(),
        credentials: Vec::new(),
        session: SessionInfo {
            run: "run-example-1".to_owned(),
            launched_by: "the example host".to_owned(),
            workspace: workspace.clone(),
        },
        harness,
        route: Route::Primary,
        route_reason: "the primary route is healthy".to_owned(),
        harness_version: harness.version().to_owned(),
        cli_version: harness.cli_version().to_owned(),
        models: resolved.launch.models.clone(),
        land: None,
        skills_dir: fixtures.join("bundle/skills-enabled"),
        install: install.clone(),
        network: "host".to_owned(),
    })?;
    println!("bundle: {}", built.dir);
    println!("digest: {}", built.digest);

    // 2. Write run.json: the broker, the workspace, the digest, the CLI, and what each CLI needs
    // from the host (Pi's models.json naming the provider the launch models use; Claude Code's
    // endpoint and key passed through the environment).
    let models = json!({"providers": {"scripted": {
        "baseUrl": model.base_url(),
        "api": "anthropic-messages",
        "apiKey": "$SCRIPTED_API_KEY",
        "models": [{"id": "scripted-model", "reasoning": false, "contextWindow": 200000,
                    "maxTokens": 4096}],
    }}});
    let run_json = json!({
        "broker": broker.socket(),
        "workspace": workspace,
        "bundleDigest": built.digest,
        "cli": cli.program(),
        "turnTimeout": 120,
        "passEnv": ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "SCRIPTED_API_KEY",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY",
                    "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING", "CLAUDE_CODE_MAX_RETRIES",
                    "PI_OFFLINE"],
        "sessionFiles": {
            "pi-agent/models.json": models.to_string(),
            "pi-agent/settings.json": json!({"retry": {"enabled": false}}).to_string(),
        },
    });
    std::fs::write(run_dir.join("run.json"), run_json.to_string())?;

    // 3. Start the runner with the capability on stdin.
    let mut runner =
        start_runner(install.runner.as_std_path(), run_dir.as_std_path(), model.base_url())?;
    println!("runner: started, pid {}", runner.id());

    // 4. Wait for the RESULT, then stop the runner with SIGTERM.
    let started = Instant::now();
    let outcome = loop {
        if let Some(call) = broker.calls_of("message.send").first() {
            break Ok(call.args.clone());
        }
        if let Some(status) = runner.try_wait()? {
            break Err(format!("the runner exited ({status}) before sending a RESULT"));
        }
        if started.elapsed() > DEADLINE {
            break Err(format!("no RESULT within {} s", DEADLINE.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = stop(&mut runner)?;
    println!("runner: stopped, {status}");
    let sent = outcome?;
    let result = sent["text"].as_str().ok_or("the RESULT has no text")?;
    println!("RESULT to {}: {result}", sent["to"].as_str().unwrap_or("?"));

    if result != REPLY {
        return Err(format!("the RESULT is not the model's reply {REPLY:?}").into());
    }
    // The model saw the message the broker handed the runner: the turn really ran.
    if !model.messages_calls().iter().any(|call| call.all_text().contains(MESSAGE)) {
        return Err("the model never saw the message".into());
    }
    if status.code() != Some(0) {
        return Err(format!("the runner exited with {status}").into());
    }
    if broker.calls_of("role.release").len() != 1 {
        return Err("the runner did not release the role".into());
    }
    println!("host: done");
    Ok(())
}

/// Starts `runner` on `run_dir` with nothing of this process's environment but what the CLIs
/// need, and writes the capability on its stdin.
#[expect(clippy::disallowed_methods, reason = "the example host starts the runner, as a host does")]
fn start_runner(runner: &Path, run_dir: &Path, base_url: &str) -> Result<Child, Failure> {
    // Node 24 (which Pi runs on) comes first on the runner's PATH.
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tools_bin_dir().display());
    let mut child = Command::new(runner)
        .arg(run_dir)
        .env_clear()
        .env("PATH", path)
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-example")
        .env("SCRIPTED_API_KEY", "sk-ant-example")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .env("PI_OFFLINE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| format!("cannot start {}: {error}", runner.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(format!("{{\"cap\": \"{CAP}\"}}\n").as_bytes())?;
    Ok(child)
}

/// Sends the runner SIGTERM and waits up to 20 s for it to exit; kills it after that.
fn stop(runner: &mut Child) -> Result<std::process::ExitStatus, Failure> {
    let pid = rustix::process::Pid::from_child(runner);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
    let started = Instant::now();
    loop {
        if let Some(status) = runner.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            runner.kill()?;
            return Err("the runner did not stop within 20 s of SIGTERM".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
