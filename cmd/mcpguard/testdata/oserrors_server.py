"""A stdio MCP server that does what its tools are asked with no checks of
its own and answers an OS error as a tool error, as many real servers do:
the L3 denial reaches the client, not the server's stderr. For the tests
of mcpguard's live denial reports (live_test.go)."""
import json
import socket
import sys

TOOLS = [
    {"name": "read_file", "description": "Read a file.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "write_file", "description": "Write a file.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]}},
    {"name": "connect", "description": "Open a TCP connection.",
     "inputSchema": {"type": "object", "properties": {"host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host", "port"]}},
]


def call(name, args):
    if name == "read_file":
        with open(args["path"]) as f:
            return f.read()
    if name == "write_file":
        with open(args["path"], "w") as f:
            f.write(args.get("content", ""))
        return "written"
    if name == "connect":
        s = socket.create_connection((args["host"], args["port"]), timeout=3)
        s.close()
        return "connected"
    raise ValueError("unknown tool " + name)


def result(msg):
    m = msg.get("method")
    if m == "initialize":
        return {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "oserrors", "version": "1"}}
    if m == "tools/list":
        return {"tools": TOOLS}
    if m == "tools/call":
        p = msg["params"]
        try:
            return {"content": [{"type": "text", "text": call(p["name"], p.get("arguments", {}))}]}
        except OSError as e:
            return {"content": [{"type": "text", "text": str(e)}], "isError": True}
    return {}


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg:
        continue
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result(msg)}) + "\n")
    sys.stdout.flush()
