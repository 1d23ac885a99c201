// The official TypeScript SDK client's own resumption: node sdk-resume.mjs
// URL. It calls a long-running tool with progress and prints what came
// back; when the connection that carries the call's stream breaks (the
// test cuts it), the SDK's StreamableHTTPClientTransport reconnects with
// Last-Event-ID, as it does on its own, and the rest of the stream must
// come on the new connection.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url] = process.argv.slice(2);
const out = { progress: [], tokens: 0, errors: [] };
const client = new Client({ name: "gateway-sdk-resume", version: "1" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 2000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
});
transport.onerror = (e) => out.errors.push(String(e));
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const long = tools.find((t) => t === "trigger-long-running-operation" || t.endsWith("__trigger-long-running-operation"));
const res = await client.callTool({ name: long, arguments: { duration: 4, steps: 4 } }, undefined, {
  timeout: 60000,
  onprogress: (p) => out.progress.push(p.progress),
  onresumptiontoken: () => { out.tokens++; },
});
out.result = res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
