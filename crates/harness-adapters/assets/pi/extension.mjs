// The bundle's Pi extension (Pi 0.85.1), loaded by the Pi adapter with -e:
//   1. every tool_call goes through `harness-gate check --policy $MOSAIC_BUNDLE/policy.json`;
//      anything but a clean exit 0 blocks, and a throw blocks too (S0 lines 1 and 2);
//   2. the bundle's typed tools (tools.json) are registered, each calling the runner's tool
//      socket with {"tool", "args"}; the capability stays with the runner;
//   3. at agent_end the turn marker is written, so the runner counts the turn (S0 line 4).
// A missing setting makes the factory throw, and Pi then refuses to start (S0 line 3).
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";

const GATE_TIMEOUT_MS = 10_000;
const TOOL_TIMEOUT_MS = 60_000;

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`harness extension: ${name} is not set`);
  return value;
}

// Sends one request line to the tool socket and resolves with the reply object.
function callToolSocket(socketPath, tool, args, signal) {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath);
    let buffer = "";
    const timer = setTimeout(() => fail(new Error(`${tool}: the tool socket did not answer in time`)), TOOL_TIMEOUT_MS);
    const onAbort = () => fail(new Error(`${tool}: aborted`));
    function fail(error) {
      clearTimeout(timer);
      signal?.removeEventListener?.("abort", onAbort);
      socket.destroy();
      reject(error);
    }
    signal?.addEventListener?.("abort", onAbort, { once: true });
    socket.setEncoding("utf8");
    socket.on("error", (error) => fail(new Error(`${tool}: the tool socket failed: ${error.message}`)));
    socket.on("data", (chunk) => {
      buffer += chunk;
      const end = buffer.indexOf("\n");
      if (end === -1) return;
      clearTimeout(timer);
      signal?.removeEventListener?.("abort", onAbort);
      socket.end();
      try {
        resolve(JSON.parse(buffer.slice(0, end)));
      } catch (error) {
        reject(new Error(`${tool}: the tool socket's reply is not JSON: ${error.message}`));
      }
    });
    socket.on("end", () => {
      if (!buffer.includes("\n")) fail(new Error(`${tool}: the tool socket closed without a reply`));
    });
    socket.write(JSON.stringify({ tool, args: args ?? {} }) + "\n");
  });
}

export default function harnessExtension(pi) {
  const gate = required("MOSAIC_GATE");
  const bundle = required("MOSAIC_BUNDLE");
  const toolsSocket = required("MOSAIC_TOOLS_SOCK");
  const marker = required("MOSAIC_TURN_MARKER");
  const policy = join(bundle, "policy.json");
  const { tools } = JSON.parse(readFileSync(join(bundle, "tools.json"), "utf8"));

  pi.on("tool_call", async (event) => {
    const run = spawnSync(gate, ["check", "--policy", policy], {
      input: JSON.stringify({ tool: event.toolName, input: event.input }),
      encoding: "utf8",
      timeout: GATE_TIMEOUT_MS,
      killSignal: "SIGKILL",
      stdio: ["pipe", "ignore", "pipe"],
    });
    if (run.error) throw new Error(`harness-gate could not run: ${run.error.message}`);
    if (run.status === 0) return undefined;
    const reason = (run.stderr || "").trim();
    return { block: true, reason: reason || `harness-gate ended with ${run.status ?? run.signal}` };
  });

  for (const tool of tools) {
    pi.registerTool({
      name: tool.name,
      label: tool.name,
      description: tool.description,
      parameters: tool.inputSchema,
      async execute(_toolCallId, params, signal) {
        const reply = await callToolSocket(toolsSocket, tool.name, params, signal);
        if (!reply || reply.ok !== true) {
          throw new Error(reply?.text || `${tool.name}: the tool socket refused the call`);
        }
        return { content: [{ type: "text", text: reply.text }], details: {} };
      },
    });
  }

  pi.on("agent_end", (event) => {
    writeFileSync(marker, JSON.stringify({ messages: event.messages?.length ?? 0 }) + "\n", { mode: 0o600 });
  });
}
