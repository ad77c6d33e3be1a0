"""An MCP server (stdio) of the 2025 era only, with no dependencies: it speaks `initialize`
(answering protocol 2025-06-18) and nothing of 2026-07-28, for agent-eval's tests of both eras.

  greet(name)   readOnlyHint: answers "hello, NAME"

A request before `initialize` (such as the 2026-07-28 `server/discover` probe) is answered with
JSON-RPC error -32601, as an older server answers a method it does not know; with
--exit-before-initialize the server exits with status 1 instead, as some servers do.
"""

import json
import sys

exits_early = "--exit-before-initialize" in sys.argv
initialized = False


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    global initialized
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        initialized = True
        return {
            "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy-server", "version": "1.0"},
            }
        }
    if not initialized:
        if exits_early:
            print(f"legacy server: {method} before initialize; exiting", file=sys.stderr, flush=True)
            sys.exit(1)
        return {"error": {"code": -32601, "message": f"Method not found: {method}"}}
    if method == "ping":
        return {"result": {}}
    if method == "tools/list":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        tool = {"name": "greet", "description": "Greets someone.", "inputSchema": schema, "annotations": {"readOnlyHint": True}}
        return {"result": {"tools": [tool]}}
    if method == "tools/call" and params.get("name") == "greet":
        name = (params.get("arguments") or {}).get("name", "")
        return {"result": {"content": [{"type": "text", "text": f"hello, {name}"}], "isError": False}}
    if method == "tools/call":
        return {"result": {"content": [{"type": "text", "text": f"no tool {params.get('name')}"}], "isError": True}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    if "id" not in request or "method" not in request:
        continue  # notifications, and answers to requests this server never makes
    send({"jsonrpc": "2.0", "id": request["id"], **answer(request)})
