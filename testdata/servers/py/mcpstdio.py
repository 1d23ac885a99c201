"""A minimal MCP server over stdio, standard library only.

Speaks newline-delimited JSON-RPC 2.0 by hand: initialize, ping,
tools/list, tools/call; notifications are accepted and ignored; any other
request (server/discover included) gets -32601, which makes modern clients
fall back to the initialize handshake.

Every server takes the harness flags --ws, --sink-tcp, --sink-udp,
--marker-dir, --weather-url (env fallbacks MCP_WS, MCP_SINK_TCP, ...).
"""

import argparse
import json
import os
import sys

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def parse_flags(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--ws", default=os.environ.get("MCP_WS", os.getcwd()))
    p.add_argument("--sink-tcp", default=os.environ.get("MCP_SINK_TCP", ""))
    p.add_argument("--sink-udp", default=os.environ.get("MCP_SINK_UDP", ""))
    p.add_argument("--marker-dir", default=os.environ.get("MCP_MARKER_DIR", ""))
    p.add_argument("--weather-url", default=os.environ.get("MCP_WEATHER_URL", ""))
    # Stretches the server's own time bounds on slow hosts (args.scale(s)).
    p.add_argument("--timeout-scale", type=float, default=1.0)
    args, _ = p.parse_known_args(argv)
    args.ws = os.path.realpath(args.ws)
    factor = args.timeout_scale if args.timeout_scale > 0 else 1.0
    args.scale = lambda seconds: seconds * factor
    return args


def host_port(addr):
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class ToolError(Exception):
    """Raised by a tool handler: the call returns isError with the message."""


class Server:
    def __init__(self, name, version="1.0.0"):
        self.name = name
        self.version = version
        self.tools = {}

    def tool(self, name, description, properties=None, required=None):
        def register(fn):
            self.tools[name] = {
                "def": {
                    "name": name,
                    "description": description,
                    "inputSchema": {
                        "type": "object",
                        "properties": properties or {},
                        "required": required or [],
                    },
                },
                "fn": fn,
            }
            return fn

        return register

    def _send(self, msg):
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    def _error(self, mid, code, message):
        self._send({"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}})

    def _handle(self, msg):
        method = msg.get("method")
        mid = msg.get("id")
        params = msg.get("params") or {}
        if "id" not in msg:
            return  # a notification (initialized, cancelled): nothing to answer
        if method == "initialize":
            asked = params.get("protocolVersion", "")
            version = asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[-1]
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": self.name, "version": self.version},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [t["def"] for t in self.tools.values()]}
        elif method == "tools/call":
            name = params.get("name")
            tool = self.tools.get(name)
            if tool is None:
                self._error(mid, -32602, "unknown tool: %s" % name)
                return
            try:
                text = tool["fn"](params.get("arguments") or {})
                result = {"content": [{"type": "text", "text": str(text)}]}
            except ToolError as e:
                result = {"content": [{"type": "text", "text": str(e)}], "isError": True}
            except Exception as e:  # a tool bug is the tool's error, not the session's
                result = {"content": [{"type": "text", "text": "%s: %s" % (type(e).__name__, e)}], "isError": True}
        else:
            self._error(mid, -32601, "method not found: %s" % method)
            return
        self._send({"jsonrpc": "2.0", "id": mid, "result": result})

    def serve(self):
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                self._error(None, -32700, "parse error")
                continue
            if not isinstance(msg, dict):
                self._error(None, -32600, "invalid request")
                continue
            self._handle(msg)


def inside(root, path):
    """The real path of path if it is inside root, else ToolError."""
    p = os.path.realpath(os.path.join(root, path))
    if p != root and not p.startswith(root + os.sep):
        raise ToolError("access denied: %s is outside the workspace" % path)
    return p
