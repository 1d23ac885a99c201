// The same session against a server, direct or through mcpguard, printed
// as the JSON values the official TypeScript SDK's client received, for
// TestSDKValues: every list, a call of every kind of tool (text with
// escapes, numbers, images, resource links and references, structured
// content, progress notifications, a sampling and an elicitation request
// the client answers, the client's roots), prompts, resources and a
// completion.
//
//   node values.mjs SPEC.json
//
// SPEC: {"command": "...", "args": [...], "cwd": "...", "env": {...}, "timeoutMs": 60000}
// Prints one JSON line {"ok": bool, "error": "...", "values": [...]}.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const timeout = spec.timeoutMs ?? 60000;
const transport = new StdioClientTransport({
  command: spec.command,
  args: spec.args ?? [],
  cwd: spec.cwd,
  env: { ...process.env, ...(spec.env ?? {}) },
  stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (b) => (stderr += b.toString()));
const client = new Client(
  { name: "mcpguard-values", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: "file://" + spec.cwd, name: "ws" }] }));
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: "assistant", model: "values-model", content: { type: "text", text: "a fixed answer with \"quotes\", é and <tags>" },
}));
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "decline" }));

const values = [];
const record = (what, v) => values.push({ what, v });
const out = { ok: false, values };
try {
  await client.connect(transport, { timeout });
  record("serverInfo", client.getServerVersion());
  record("capabilities", client.getServerCapabilities());
  record("instructions", client.getInstructions() ?? null);
  record("tools", await client.listTools(undefined, { timeout }));
  record("prompts", await client.listPrompts(undefined, { timeout }));
  record("resources", await client.listResources(undefined, { timeout }));
  record("templates", await client.listResourceTemplates(undefined, { timeout }));
  for (const [name, args] of [
    ["echo", { message: "héllo <b>&amp;</b> \u2028 \"quoted\" \\ back\nslash \u0001 end" }],
    ["get-sum", { a: 1.5, b: 2 }],
    ["get-annotated-message", { messageType: "success", includeImage: true }],
    ["get-resource-reference", { resourceType: "Text", resourceId: 1 }],
    ["get-structured-content", { location: "Chicago" }],
    ["get-tiny-image", {}],
    ["get-resource-links", { count: 2 }],
    ["trigger-sampling-request", { prompt: "hi", maxTokens: 5 }],
    ["trigger-elicitation-request", {}],
    ["get-roots-list", {}],
  ]) {
    record("call " + name, await client.callTool({ name, arguments: args }, undefined, { timeout }));
  }
  const progress = [];
  record("call trigger-long-running-operation", await client.callTool(
    { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 2 } }, undefined,
    { timeout, onprogress: (p) => progress.push(p) }));
  record("progress", progress);
  record("prompt simple", await client.getPrompt({ name: "simple-prompt" }, { timeout }));
  record("prompt args", await client.getPrompt({ name: "args-prompt", arguments: { city: "Paris", state: "Île-de-France" } }, { timeout }));
  record("read static", await client.readResource({ uri: "demo://resource/static/document/architecture.md" }, { timeout }));
  record("read dynamic", await client.readResource({ uri: "demo://resource/dynamic/text/1" }, { timeout }));
  record("complete", await client.complete({ ref: { type: "ref/prompt", name: "completable-prompt" }, argument: { name: "department", value: "E" } }, { timeout }));
  out.ok = true;
} catch (e) {
  out.error = String(e?.message ?? e);
  out.stderr = stderr.slice(-1500);
} finally {
  try {
    await client.close();
  } catch {}
}
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
