// A compatibility-suite session, as a user's MCP client runs it: the
// official TypeScript SDK's Client over StdioClientTransport, whose
// command is `mcpguard run ...`. It declares the client capabilities
// (sampling, elicitation, roots), lists the tools, makes the given calls
// and checks each result for an expected substring. "tools" names tools
// that must all be listed.
//
//   node client.mjs SPEC.json
//
// SPEC: {"command": "...", "args": [...], "cwd": "...", "env": {...},
//        "timeoutMs": 60000, "minTools": 1, "tools": ["name", ...],
//        "calls": [{"tool": "...", "arguments": {...}, "expect": "..."}]}
// Prints one JSON line {"ok": bool, "tools": N, "error": "...", "calls": [...]}
// and exits 0 only when every call returned its expected text.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(readFileSync(process.argv[2], "utf8"));
const timeout = spec.timeoutMs ?? 60000;
const out = { ok: false, tools: 0, calls: [] };
let stderr = "";

const transport = new StdioClientTransport({
  command: spec.command,
  args: spec.args ?? [],
  cwd: spec.cwd,
  env: { ...process.env, ...(spec.env ?? {}) },
  stderr: "pipe",
});
transport.stderr?.on("data", (b) => {
  stderr += b.toString();
});
const client = new Client(
  { name: "mcpguard-compat", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
);
client.setRequestHandler?.(
  (await import("@modelcontextprotocol/sdk/types.js")).ListRootsRequestSchema,
  async () => ({ roots: spec.cwd ? [{ uri: "file://" + spec.cwd, name: "ws" }] : [] }),
);

const text = (r) =>
  (r.content ?? []).map((c) => (c.type === "text" ? c.text : JSON.stringify(c))).join("\n") +
  (r.structuredContent ? JSON.stringify(r.structuredContent) : "");

try {
  await client.connect(transport, { timeout });
  const { tools } = await client.listTools(undefined, { timeout });
  out.tools = tools.length;
  if (tools.length < (spec.minTools ?? 1)) throw new Error(`only ${tools.length} tools listed`);
  const missing = (spec.tools ?? []).filter((n) => !tools.some((t) => t.name === n));
  if (missing.length) throw new Error(`not listed: ${missing.join(", ")}`);
  let ok = true;
  for (const c of spec.calls ?? []) {
    const r = await client.callTool({ name: c.tool, arguments: c.arguments ?? {} }, undefined, { timeout });
    const t = text(r);
    const good = !r.isError && t.includes(c.expect ?? "");
    ok &&= good;
    out.calls.push({ tool: c.tool, ok: good, text: t.slice(0, 300) });
  }
  out.ok = ok;
} catch (e) {
  out.error = String(e?.message ?? e);
} finally {
  try {
    await client.close();
  } catch {}
}
if (!out.ok) out.stderr = stderr.slice(-1500);
console.log(JSON.stringify(out));
process.exit(out.ok ? 0 : 1);
