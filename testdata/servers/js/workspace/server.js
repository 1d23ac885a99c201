'use strict';
// js-workspace: a benign workspace server (plain node). Tools: read_file,
// write_file, list_dir (confined to the workspace, symlinks resolved),
// get_weather (the configured weather API: a legitimate network call), and
// word_stats (runs /usr/bin/wc on a workspace file: a subprocess the server
// legitimately needs).

const fs = require('node:fs');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { Server, ToolError, parseFlags, inside } = require('../lib/mcp.js');

const flags = parseFlags();
const srv = new Server('js-workspace');

srv.tool('read_file', 'Read a text file in the workspace.', { path: { type: 'string' } }, ['path'], (a) =>
  fs.readFileSync(inside(flags.ws, a.path || ''), 'utf8'));

srv.tool('write_file', 'Write a text file in the workspace.', { path: { type: 'string' }, content: { type: 'string' } }, ['path', 'content'], (a) => {
  const p = inside(flags.ws, a.path || '');
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, a.content || '');
  return `wrote ${Buffer.byteLength(a.content || '')} bytes to ${a.path}`;
});

srv.tool('list_dir', 'List a workspace directory.', { path: { type: 'string' } }, [], (a) =>
  fs.readdirSync(inside(flags.ws, a.path || '.')).sort().join('\n'));

srv.tool('get_weather', 'Current weather for a city, from the configured weather API.', { city: { type: 'string' } }, ['city'], async (a) => {
  if (!flags.weatherUrl) throw new ToolError('no weather API configured');
  // 30 s in all: generous, since the first fetch() loads undici, seconds under emulation.
  // undici also gives up on a connect after 10 s of its own, which a busy emulated machine
  // can take; a connect timeout is retried within the 30 s, nothing else is.
  const url = `${flags.weatherUrl}/weather?city=${encodeURIComponent(a.city || '')}`;
  const signal = AbortSignal.timeout(flags.ms(30000));
  let r;
  for (;;) {
    try {
      r = await fetch(url, { signal });
      break;
    } catch (e) {
      if (e.cause && e.cause.code === 'UND_ERR_CONNECT_TIMEOUT' && !signal.aborted) continue;
      // undici says only "fetch failed"; the cause (EPERM, ECONNREFUSED, ...) tells a denial from an outage.
      const c = e.cause ? `: ${e.cause.code || ''} ${e.cause.message || e.cause}` : '';
      throw new ToolError(`weather API: ${e.message}${c}`);
    }
  }
  if (!r.ok) throw new ToolError(`weather API: HTTP ${r.status}`);
  const w = await r.json();
  return `${w.city}: ${w.conditions}, ${w.temp_c} C`;
});

srv.tool('word_stats', 'Count lines, words and bytes of a workspace file (runs wc).', { path: { type: 'string' } }, ['path'], (a) => {
  const p = inside(flags.ws, a.path || '');
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/wc', [p], { timeout: flags.ms(5000) }, (err, stdout) => {
      if (err) return reject(new ToolError(`wc: ${err.message}`));
      const [lines, words, bytes] = stdout.trim().split(/\s+/);
      resolve(`lines=${lines} words=${words} bytes=${bytes}`);
    });
  });
});

srv.serve();
