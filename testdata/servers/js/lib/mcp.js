'use strict';
// A minimal MCP server over stdio for plain node (no npm dependencies).
// Newline-delimited JSON-RPC 2.0: initialize, ping, tools/list, tools/call;
// notifications are ignored; any other request (server/discover included)
// gets -32601, so modern clients fall back to the initialize handshake.
// Handlers may be async. Every server takes the harness flags --ws,
// --sink-tcp, --sink-udp, --marker-dir, --weather-url (env fallbacks
// MCP_WS, MCP_SINK_TCP, ...).

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const SUPPORTED = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];

function parseFlags(argv = process.argv.slice(2)) {
  const f = {
    ws: process.env.MCP_WS || process.cwd(),
    sinkTcp: process.env.MCP_SINK_TCP || '',
    sinkUdp: process.env.MCP_SINK_UDP || '',
    markerDir: process.env.MCP_MARKER_DIR || '',
    weatherUrl: process.env.MCP_WEATHER_URL || '',
    timeoutScale: '1',
  };
  const names = { '--ws': 'ws', '--sink-tcp': 'sinkTcp', '--sink-udp': 'sinkUdp', '--marker-dir': 'markerDir', '--weather-url': 'weatherUrl', '--timeout-scale': 'timeoutScale' };
  for (let i = 0; i < argv.length; i++) {
    const [k, v] = argv[i].includes('=') ? argv[i].split(/=(.*)/s) : [argv[i], argv[i + 1]];
    if (names[k] !== undefined) {
      f[names[k]] = v;
      if (!argv[i].includes('=')) i++;
    }
  }
  f.ws = fs.realpathSync(f.ws);
  // --timeout-scale stretches the server's own time bounds (ms(n)) on slow
  // hosts, as the harness's MCPGUARD_EVAL_TIMEOUT_SCALE does its own.
  const scale = Number(f.timeoutScale) > 0 ? Number(f.timeoutScale) : 1;
  f.ms = (n) => Math.round(n * scale);
  return f;
}

function hostPort(addr) {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i).replace(/^\[|\]$/g, ''), port: Number(addr.slice(i + 1)) };
}

class ToolError extends Error {}

// inside returns the real path of p if it is inside root, else throws. For
// a path that does not exist yet, the nearest existing ancestor is resolved.
function inside(root, p) {
  let cur = path.resolve(root, p);
  const rest = [];
  for (;;) {
    try {
      cur = fs.realpathSync(cur);
      break;
    } catch (e) {
      if (e.code !== 'ENOENT' || path.dirname(cur) === cur) throw e;
      rest.unshift(path.basename(cur));
      cur = path.dirname(cur);
    }
  }
  const real = path.join(cur, ...rest);
  if (real !== root && !real.startsWith(root + path.sep)) {
    throw new ToolError(`access denied: ${p} is outside the workspace`);
  }
  return real;
}

class Server {
  constructor(name, version = '1.0.0') {
    this.name = name;
    this.version = version;
    this.tools = new Map();
  }

  tool(name, description, properties, required, fn) {
    this.tools.set(name, {
      def: { name, description, inputSchema: { type: 'object', properties: properties || {}, required: required || [] } },
      fn,
    });
  }

  send(msg) {
    process.stdout.write(JSON.stringify(msg) + '\n');
  }

  async handle(msg) {
    const { id, method } = msg;
    const params = msg.params || {};
    if (!('id' in msg)) return; // notification
    const reply = (result) => this.send({ jsonrpc: '2.0', id, result });
    const error = (code, message) => this.send({ jsonrpc: '2.0', id, error: { code, message } });
    switch (method) {
      case 'initialize': {
        const v = SUPPORTED.includes(params.protocolVersion) ? params.protocolVersion : SUPPORTED[SUPPORTED.length - 1];
        return reply({ protocolVersion: v, capabilities: { tools: {} }, serverInfo: { name: this.name, version: this.version } });
      }
      case 'ping':
        return reply({});
      case 'tools/list':
        return reply({ tools: [...this.tools.values()].map((t) => t.def) });
      case 'tools/call': {
        const t = this.tools.get(params.name);
        if (!t) return error(-32602, `unknown tool: ${params.name}`);
        try {
          const text = await t.fn(params.arguments || {});
          return reply({ content: [{ type: 'text', text: String(text) }] });
        } catch (e) {
          return reply({ content: [{ type: 'text', text: String(e && e.message ? e.message : e) }], isError: true });
        }
      }
      default:
        return error(-32601, `method not found: ${method}`);
    }
  }

  serve() {
    const rl = readline.createInterface({ input: process.stdin });
    rl.on('line', (line) => {
      if (!line.trim()) return;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        return this.send({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'parse error' } });
      }
      if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
        return this.send({ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'invalid request' } });
      }
      this.handle(msg);
    });
    rl.on('close', () => process.exit(0));
  }
}

module.exports = { Server, ToolError, parseFlags, hostPort, inside };
