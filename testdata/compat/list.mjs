// Lists a server's tools, prompts and resources with the official
// TypeScript SDK's client, direct or through mcpguard, for
// TestListingsUnchanged.
//
//   node list.mjs SPEC.json
//
// SPEC: {"command": "...", "args": [...], "cwd": "...", "env": {...}, "timeoutMs": 60000}
// Prints one JSON line {"ok": bool, "error": "...", "tools": [names], "schemas": {name: inputSchema},
// "prompts": [...], "resources": [...], "stderr": "..."}.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const timeout = spec.timeoutMs ?? 60000;
const transport = new StdioClientTransport({
  command: spec.command, args: spec.args ?? [], cwd: spec.cwd,
  env: { ...process.env, ...(spec.env ?? {}) }, stderr: "pipe",
});
let stderr = "";
transport.stderr?.on("data", (b) => (stderr += b.toString()));
const client = new Client({ name: "mcpguard-list", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
const out = { ok: false, tools: [], prompts: [], resources: [] };
try {
  await client.connect(transport, { timeout });
  const caps = client.getServerCapabilities() ?? {};
  const { tools } = await client.listTools(undefined, { timeout });
  out.tools = tools.map((t) => t.name).sort();
  out.schemas = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]));
  if (caps.prompts) out.prompts = (await client.listPrompts(undefined, { timeout })).prompts.map((p) => p.name).sort();
  if (caps.resources) out.resources = (await client.listResources(undefined, { timeout })).resources.map((r) => r.uri).sort();
  out.ok = true;
} catch (e) {
  out.error = String(e?.message ?? e);
} finally {
  try { await client.close(); } catch {}
}
out.stderr = stderr.slice(-3000);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
