"""A stdio MCP server that ignores EOF and SIGTERM and leaves a child
behind that holds its stderr: policy init must stop the whole process
group all the same (TestPolicyInitStopsGroup). Its command line carries a
marker the test looks for in /proc."""
import json
import os
import signal
import sys
import time

signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    sys.stdin.close()
    while True:
        time.sleep(1)

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stubborn", "version": "1"}}
    else:
        result = {"tools": [{"name": "noop", "description": "Does nothing.", "inputSchema": {"type": "object"}}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
while True:  # EOF: ignored
    time.sleep(1)
