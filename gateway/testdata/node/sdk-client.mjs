// Drives a server through the official TypeScript SDK's Streamable HTTP
// client: node sdk-client.mjs URL [BEARER]. Prints one JSON object with what
// came back, for gateway/node_test.go to check.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, bearer] = process.argv.slice(2);
const out = { served: {} };
const client = new Client(
  { name: "gateway-sdk-test", version: "1" },
  { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: false } } },
);
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  out.served.sampling = (out.served.sampling ?? 0) + 1;
  return { role: "assistant", content: { type: "text", text: "sampled-by-sdk" }, model: "test" };
});
client.setRequestHandler(ElicitRequestSchema, async () => {
  out.served.elicitation = (out.served.elicitation ?? 0) + 1;
  return { action: "decline" };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  out.served.roots = (out.served.roots ?? 0) + 1;
  return { roots: [{ uri: "file:///tmp", name: "tmp" }] };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, () => {
  out.served.logs = (out.served.logs ?? 0) + 1;
});
const opts = bearer ? { requestInit: { headers: { Authorization: `Bearer ${bearer}` } } } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), opts);
await client.connect(transport);
out.sessionId = transport.sessionId;
out.server = client.getServerVersion();
const tools = (await client.listTools()).tools.map((t) => t.name);
out.tools = tools;
const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const find = (suffix) => tools.find((t) => t === suffix || t.endsWith("__" + suffix));
out.echo = text(await client.callTool({ name: find("echo"), arguments: { message: "hello over http" } }));
out.sum = text(await client.callTool({ name: find("get-sum"), arguments: { a: 2, b: 3 } }));
let progress = 0;
const long = find("trigger-long-running-operation");
if (long) {
  await client.callTool({ name: long, arguments: { duration: 1, steps: 3 } }, undefined, {
    onprogress: () => { progress++; },
  });
}
out.progress = progress;
const sampling = find("trigger-sampling-request");
if (sampling) {
  out.sampling = text(await client.callTool({ name: sampling, arguments: { prompt: "2+2?", maxTokens: 5 } }));
}
if (client.getServerCapabilities()?.resources) {
  out.resources = (await client.listResources()).resources.length;
}
if (client.getServerCapabilities()?.prompts) {
  out.prompts = (await client.listPrompts()).prompts.length;
}
try {
  await client.callTool({ name: "no-such-tool", arguments: {} });
  out.unknownTool = "answered";
} catch (e) {
  out.unknownTool = "error";
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
