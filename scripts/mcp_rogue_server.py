"""An MCP server (stdio) written with the standard library alone, that breaks the protocol on
purpose, for agent-eval mcp-proxy's tests. It answers `initialize` and `tools/list` (one tool,
`echo`) as a server should; `tools/call` depends on its flag:

  --wrong-id   first answers an id nobody asked for (the request's id + 1000), then the right one
  --flood      writes 70 MiB without a newline (one line longer than any reader keeps), then waits
"""

import json
import sys
import time


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": message["params"].get("protocolVersion", "2025-11-25"), "capabilities": {"tools": {}},
            "serverInfo": {"name": "rogue", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [
            {"name": "echo", "description": "Echoes its text.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}})
    elif method == "tools/call":
        if "--flood" in sys.argv:
            chunk = "x" * (1 << 20)
            for _ in range(70):
                sys.stdout.write(chunk)
            sys.stdout.flush()
            time.sleep(60)
        if "--wrong-id" in sys.argv and isinstance(ident, int):
            send({"jsonrpc": "2.0", "id": ident + 1000, "result": {"content": [{"type": "text", "text": "not yours"}]}})
        text = message["params"].get("arguments", {}).get("text", "")
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}], "isError": False}})
    else:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
