#!/usr/bin/env node
// A minimal host for harness, written against docs/host.md alone: it builds a bundle with
// `harness bundle build`, plays the broker on a Unix socket and a scripted Anthropic Messages API
// on 127.0.0.1, starts `harness-runner` with the capability on stdin, sends one message, waits for
// its RESULT, stops the runner with SIGTERM and checks what came back.
//
// Node 24, plain ESM, no dependencies. Exit 0 when the session did what docs/host.md says it
// does; exit 1 with a message naming what went wrong otherwise.
//
//   node examples/host/host.mjs --prefix PREFIX --cli PATH [--harness PATH] [--runner PATH]
//        [--fixtures DIR] [--timeout SECONDS] [--keep]

import { spawn, execFile } from "node:child_process";
import { once } from "node:events";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SCRIPTED_TEXT = "Hello from the scripted model: the plan is on track.";
const MESSAGE_TEXT = "How is the plan going?";
const MESSAGE_ID = "msg-1";
const SENDER = "acme-cos";
const RUN_ID = "run-example-1";
const MODEL_ID = "scripted-model";
const API_KEY = "sk-example-not-a-real-key";

class HostError extends Error {}

function fail(message) {
  throw new HostError(message);
}

function log(message) {
  process.stdout.write(`host: ${message}\n`);
}

function parseArgs(argv) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const options = {
    fixtures: path.resolve(here, "../../fixtures"),
    timeout: 180,
    keep: false,
  };
  const valued = new Set(["--prefix", "--cli", "--harness", "--runner", "--fixtures", "--timeout"]);
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === "--keep") {
      options.keep = true;
    } else if (valued.has(arg)) {
      const value = argv[i + 1];
      if (value === undefined) fail(`${arg} needs a value`);
      options[arg.slice(2)] = value;
      i += 1;
    } else {
      fail(
        `unknown argument ${JSON.stringify(arg)}; usage: host.mjs --prefix PREFIX --cli PATH ` +
          "[--harness PATH] [--runner PATH] [--fixtures DIR] [--timeout SECONDS] [--keep]",
      );
    }
  }
  if (!options.prefix) fail("--prefix is required (an install made by `cargo xtask dist`)");
  if (!options.cli) fail("--cli is required (the path of pi or claude)");
  options.prefix = path.resolve(options.prefix);
  options.cli = path.resolve(options.cli);
  options.harness = path.resolve(options.harness ?? path.join(options.prefix, "bin/harness"));
  options.runner = path.resolve(options.runner ?? path.join(options.prefix, "bin/harness-runner"));
  options.fixtures = path.resolve(options.fixtures);
  options.timeout = Number(options.timeout);
  if (!(options.timeout > 0)) fail("--timeout must be a positive number of seconds");
  // The harness module follows from the CLI: `pi` runs under the pi module, `claude` under
  // claude-code (docs/host.md, "What each CLI needs from the host").
  const name = path.basename(options.cli);
  if (name === "pi") options.module = "pi";
  else if (name === "claude") options.module = "claude-code";
  else fail(`--cli ${options.cli}: the CLI must be named pi or claude`);
  return options;
}

// The scripted Messages API: every POST /v1/messages gets one text reply as Server-Sent Events,
// the minimal stream docs/clis.md records; anything else gets HTTP 400 so a surprise fails fast.
function startModel() {
  const requests = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const url = new URL(req.url, "http://127.0.0.1");
      if (req.method !== "POST" || url.pathname !== "/v1/messages") {
        const body = JSON.stringify({
          type: "error",
          error: { type: "invalid_request_error", message: `unscripted ${req.method} ${req.url}` },
        });
        res.writeHead(400, {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          connection: "close",
        });
        res.end(body);
        return;
      }
      requests.push({ key: req.headers["x-api-key"], body: Buffer.concat(chunks).toString() });
      const events = [
        ["message_start", {
          type: "message_start",
          message: {
            id: `msg_scripted_${requests.length}`, type: "message", role: "assistant",
            model: MODEL_ID, content: [], stop_reason: null, stop_sequence: null,
            usage: { input_tokens: 10, output_tokens: 1, cache_creation_input_tokens: 0,
              cache_read_input_tokens: 0 },
          },
        }],
        ["content_block_start", {
          type: "content_block_start", index: 0, content_block: { type: "text", text: "" },
        }],
        ["content_block_delta", {
          type: "content_block_delta", index: 0, delta: { type: "text_delta", text: SCRIPTED_TEXT },
        }],
        ["content_block_stop", { type: "content_block_stop", index: 0 }],
        ["message_delta", {
          type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 5 },
        }],
        ["message_stop", { type: "message_stop" }],
      ];
      const body = events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join("");
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "content-length": Buffer.byteLength(body),
        "cache-control": "no-cache",
        connection: "close",
      });
      res.end(body);
    });
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ server, requests, baseUrl: `http://127.0.0.1:${port}` });
    });
  });
}

// The broker (docs/host.md, "The broker"): one JSON line in, one JSON line out, on a Unix socket.
// It holds one message for the runner and records every call.
function startBroker(socketPath, capability) {
  const calls = [];
  const waiters = [];
  let pending = {
    id: MESSAGE_ID,
    from: SENDER,
    kind: "message",
    sentAt: new Date().toISOString(),
    text: MESSAGE_TEXT,
  };
  let claimed = false;
  const read = new Set();

  function answer(request) {
    const { verb, args } = request;
    if (request.cap !== capability) return { code: "capability-invalid" };
    switch (verb) {
      case "role.claim":
        if (args.run !== RUN_ID) return { code: "claim-refused" };
        claimed = true;
        return { result: { run: RUN_ID } };
      case "role.release":
        claimed = false;
        return { result: {} };
      case "message.read": {
        if (!claimed) return { code: "not-claimed" };
        if (typeof args.after === "string") read.add(args.after);
        // The mark-only form: mark `after` read and hand out nothing.
        if (args.limit === 0) return { result: { message: null } };
        if (pending && !read.has(pending.id)) {
          const message = pending;
          return { result: { message } };
        }
        return { result: { message: null } };
      }
      case "state":
        if (!claimed) return { code: "not-claimed" };
        return {
          result: {
            launch: { state: "running", at: new Date().toISOString(), event: "ev-1" },
            tasks: { open: [{ ref: "web-1", title: "Ship the login page" }], total: 1 },
          },
        };
      case "message.send":
        if (!claimed) return { code: "not-claimed" };
        if (pending && args.replyTo === pending.id) pending = null;
        return { result: { id: `sent-${calls.length}` } };
      default:
        return { code: "unknown-verb" };
    }
  }

  const server = net.createServer((socket) => {
    let buffer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk) => {
      buffer += chunk;
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        let request;
        try {
          request = JSON.parse(line);
        } catch {
          socket.destroy();
          return;
        }
        const args = request.args ?? {};
        const reply = answer({ ...request, args });
        // The capability is never recorded or printed.
        calls.push({ verb: request.verb, args, reply });
        const wire = "result" in reply
          ? { id: request.id, ok: true, result: reply.result }
          : { id: request.id, ok: false, code: reply.code, message: `refused ${request.verb}` };
        socket.write(`${JSON.stringify(wire)}\n`);
        for (const waiter of waiters.splice(0)) waiter();
      }
    });
    socket.on("error", () => {});
  });
  const changed = () => new Promise((resolve) => waiters.push(resolve));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve({ server, calls, changed }));
  });
}

function run(program, args, options = {}) {
  return new Promise((resolve) => {
    execFile(program, args, { ...options, encoding: "utf8" }, (error, stdout, stderr) => {
      resolve({ code: error ? (error.code ?? 1) : 0, stdout, stderr, error });
    });
  });
}

function deadline(seconds, what) {
  let timer;
  const promise = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new HostError(`${what}: no answer within ${seconds} s`)), seconds * 1000);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  for (const [what, file] of [["harness", options.harness], ["harness-runner", options.runner],
    ["the CLI", options.cli]]) {
    try {
      fs.accessSync(file, fs.constants.X_OK);
    } catch {
      fail(`${what} is not an executable at ${file}`);
    }
  }
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "harness-host-")));
  log(`working in ${root} (${options.module}, ${options.cli})`);
  const cleanup = [];
  try {
    return await session(options, root, cleanup);
  } finally {
    for (const step of cleanup.reverse()) await step();
    if (!options.keep) fs.rmSync(root, { recursive: true, force: true });
  }
}

async function session(options, root, cleanup) {
  const workspace = path.join(root, "workspace");
  const runDir = path.join(root, "run");
  const stateDir = path.join(root, "runner-state");
  fs.mkdirSync(workspace, { recursive: true });
  fs.writeFileSync(path.join(workspace, "README.md"), "# The sample project\n");
  fs.mkdirSync(runDir, { mode: 0o700 });

  const model = await startModel();
  cleanup.push(() => new Promise((resolve) => model.server.close(resolve)));
  const capability = `cap-${process.pid}-${Date.now()}`;
  const brokerSocket = path.join(root, "broker.sock");
  const broker = await startBroker(brokerSocket, capability);
  cleanup.push(() => new Promise((resolve) => broker.server.close(resolve)));

  // 1. The bundle request (docs/host.md, "Build the bundle"): the pm fixture, routed to this
  // CLI and to the scripted model.
  const resolved = JSON.parse(fs.readFileSync(path.join(options.fixtures, "resolved/pm.json"), "utf8"));
  resolved.vars = {
    harness: options.module,
    model: "scripted",
    thinking: options.module === "pi" ? "off" : "low",
  };
  resolved.launch.models = { scripted: { provider: "scripted", model: MODEL_ID } };
  // A role with services needs a role token per service in the runner's environment (exit 20
  // otherwise); this sample role uses none.
  resolved.services = [];
  resolved.projects = [];
  const request = {
    resolved,
    contract: path.join(options.fixtures, "bundle/contracts/pm.md"),
    session: { run: RUN_ID, launchedBy: "the example host", workspace },
    route: "primary",
    routeReason: "the primary route is healthy",
    skillsDir: path.join(options.fixtures, "bundle/skills-enabled"),
    install: { prefix: options.prefix },
  };
  const requestFile = path.join(root, "request.json");
  fs.writeFileSync(requestFile, JSON.stringify(request, null, 2));
  const bundleDir = path.join(runDir, "bundle");
  const build = await run(options.harness, ["bundle", "build", "--request", requestFile, "--out", bundleDir]);
  if (build.code !== 0) {
    fail(`harness bundle build exited ${build.code}: ${build.stderr.trim() || build.stdout.trim()}`);
  }
  const digest = build.stdout.trim();
  if (!/^[0-9a-f]{64}$/.test(digest)) fail(`harness bundle build printed ${JSON.stringify(digest)}, not a digest`);
  log(`bundle built, digest ${digest}`);

  // 2. run.json (docs/host.md, "Write run.json").
  const passEnv = ["ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "CLAUDE_CODE_MAX_RETRIES"];
  const runJson = {
    broker: brokerSocket,
    workspace,
    cli: options.cli,
    bundleDigest: digest,
    turnTimeout: 120,
    brokerRetries: 10,
    pollInterval: 0.1,
    stateDir,
    passEnv,
  };
  if (options.module === "pi") {
    runJson.sessionFiles = {
      "pi-agent/models.json": JSON.stringify({
        providers: {
          scripted: {
            baseUrl: model.baseUrl,
            api: "anthropic-messages",
            apiKey: "$ANTHROPIC_API_KEY",
            models: [{ id: MODEL_ID, reasoning: false, contextWindow: 200000, maxTokens: 4096 }],
          },
        },
      }),
      "pi-agent/settings.json": JSON.stringify({ retry: { enabled: false } }),
    };
  }
  fs.writeFileSync(path.join(runDir, "run.json"), JSON.stringify(runJson, null, 2), { mode: 0o600 });

  // 3. The runner, with a clean environment: Node 24 first on PATH (Pi's launcher needs it), the
  // variables run.json passes on, and nothing else (no founder credential, exit 20).
  const env = {
    PATH: [path.dirname(process.execPath), path.dirname(options.cli), "/usr/local/bin", "/usr/bin", "/bin"].join(":"),
    ANTHROPIC_BASE_URL: model.baseUrl,
    ANTHROPIC_API_KEY: API_KEY,
    CLAUDE_CODE_MAX_RETRIES: "0",
  };
  const runner = spawn(options.runner, [runDir], { env, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  runner.stdout.setEncoding("utf8").on("data", (text) => { stderr += text; });
  runner.stderr.setEncoding("utf8").on("data", (text) => { stderr += text; });
  const exited = once(runner, "exit");
  cleanup.push(async () => {
    if (runner.exitCode === null && runner.signalCode === null) {
      runner.kill("SIGKILL");
      await exited;
    }
  });
  runner.stdin.end(`${JSON.stringify({ cap: capability })}\n`);
  log(`harness-runner started (pid ${runner.pid})`);

  // 4. Wait for the RESULT of the one message.
  const limit = deadline(options.timeout, "the RESULT");
  const ended = exited.then(([code, signal]) => {
    fail(`harness-runner exited (${code ?? signal}) before the RESULT:\n${stderr}`);
  });
  // Only the race below reports it; once the RESULT is in, the exit is expected.
  ended.catch(() => {});
  let result;
  try {
    while (!(result = broker.calls.find((call) => call.verb === "message.send"))) {
      await Promise.race([broker.changed(), limit.promise, ended]);
    }
  } finally {
    limit.cancel();
  }
  log(`RESULT to ${result.args.to} for ${result.args.replyTo}: ${JSON.stringify(result.args.text)}`);

  // 5. Stop: SIGTERM; the runner releases the role and exits 0.
  runner.kill("SIGTERM");
  const stop = deadline(30, "harness-runner's exit after SIGTERM");
  let code;
  let signal;
  try {
    [code, signal] = await Promise.race([exited, stop.promise]);
  } finally {
    stop.cancel();
  }
  log(`harness-runner exited ${code ?? signal}`);

  const problems = [];
  if (code !== 0) problems.push(`harness-runner exited ${code ?? signal}, not 0`);
  if (result.args.kind !== "result") problems.push(`the RESULT's kind is ${result.args.kind}`);
  if (result.args.to !== SENDER) problems.push(`the RESULT went to ${result.args.to}, not ${SENDER}`);
  if (result.args.replyTo !== MESSAGE_ID) problems.push(`the RESULT answers ${result.args.replyTo}, not ${MESSAGE_ID}`);
  if (typeof result.args.text !== "string" || !result.args.text.includes(SCRIPTED_TEXT)) {
    problems.push(`the RESULT does not hold the scripted text: ${JSON.stringify(result.args.text)}`);
  }
  const verbs = broker.calls.map((call) => call.verb);
  for (const verb of ["role.claim", "state", "message.read", "message.send", "role.release"]) {
    if (!verbs.includes(verb)) problems.push(`the runner never sent ${verb}`);
  }
  const refused = broker.calls.filter((call) => !("result" in call.reply));
  for (const call of refused) problems.push(`the broker refused ${call.verb}: ${call.reply.code}`);
  if (model.requests.length === 0) problems.push("the CLI never called the scripted model");
  if (model.requests.some((req) => req.key !== API_KEY)) problems.push("a model request carried another API key");
  if (stderr.includes(capability)) problems.push("the capability appears in the runner's output");
  if (problems.length > 0) {
    fail(`${problems.join("\n")}\nbroker calls: ${verbs.join(", ")}\nrunner output:\n${stderr}`);
  }
  log(`ok: one message in, one RESULT out, ${model.requests.length} model request(s), exit 0`);
  return 0;
}

try {
  process.exitCode = await main();
} catch (error) {
  const message = error instanceof HostError ? error.message : (error?.stack ?? String(error));
  process.stderr.write(`host: FAILED: ${message}\n`);
  process.exitCode = 1;
}
