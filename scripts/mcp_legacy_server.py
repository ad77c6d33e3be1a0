"""An MCP server of the 2025 era only, with no dependencies: it speaks `initialize` (answering
protocol 2025-06-18) and nothing of 2026-07-28, for agent-eval's tests of both eras. Over stdio,
or with --http over Streamable HTTP as 2025 servers serve it (sessions).

  greet(name)   readOnlyHint: answers "hello, NAME"
  forget()      --http only: the server forgets the caller's session (its next request gets 404)
  confirm(action, times)  with --asks (stdio only): pings the client, then asks it `times` times (one
                elicitation/create request each, in the middle of the call, as 2025 servers ask) and
                answers what came back: "confirmed ACTION (accept, accept)", or the client's error

A request before `initialize` (such as the 2026-07-28 `server/discover` probe) is answered with
JSON-RPC error -32601, as an older server answers a method it does not know; with
--exit-before-initialize the server exits with status 1 instead, as some servers do.

With --http it prints "PORT <n>" once it listens on 127.0.0.1 and stops when its standard input
closes. `initialize` opens a session (the answer's Mcp-Session-Id); a request without a known
session is refused as the 2025 SDKs refuse it (400, or 404 for a session it no longer knows).
"""

import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

exits_early = "--exit-before-initialize" in sys.argv
asks_client = "--asks" in sys.argv
initialized = False
sessions = set()


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


asked = 0


def ask(method, params):
    """Sends the client a request and waits for its answer; requests that come meanwhile are
    answered as usual. The answer's result, or {"error": ...}."""
    global asked
    asked += 1
    request_id = f"legacy-{asked}"
    send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            return message.get("result", {"error": message.get("error")})
        if "id" in message and "method" in message:
            send({"jsonrpc": "2.0", "id": message["id"], **answer(message, None)})


def confirm(arguments, ask):
    if ask is None:
        return {"result": {"content": [{"type": "text", "text": "confirm needs stdio"}], "isError": True}}
    pong = ask("ping", {})
    if "error" in pong:
        return {"result": {"content": [{"type": "text", "text": f"ping failed: {pong['error']}"}], "isError": True}}
    action, actions = arguments.get("action", ""), []
    for number in range(int(arguments.get("times", 1))):
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        result = ask("elicitation/create", {"message": f"Confirm {action} ({number + 1})?", "requestedSchema": schema})
        if "error" in result:
            text = f"not confirmed: {(result['error'] or {}).get('message')}"
            return {"result": {"content": [{"type": "text", "text": text}], "isError": True}}
        actions.append(result.get("action", "?"))
    return {"result": {"content": [{"type": "text", "text": f"confirmed {action} ({', '.join(actions)})"}], "isError": False}}


def answer(request, ask=ask):
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
        asks = {
            "type": "object",
            "properties": {"action": {"type": "string"}, "times": {"type": "integer"}},
            "required": ["action"],
        }
        confirming = {"name": "confirm", "description": "Asks the user to confirm an action.", "inputSchema": asks}
        return {"result": {"tools": [tool, confirming] if asks_client else [tool]}}
    if method == "tools/call" and params.get("name") == "confirm" and asks_client:
        return confirm(params.get("arguments") or {}, ask)
    if method == "tools/call" and params.get("name") == "forget":
        return {"result": {"content": [{"type": "text", "text": "forgotten"}], "isError": False}, "forget": True}
    if method == "tools/call" and params.get("name") == "greet":
        name = (params.get("arguments") or {}).get("name", "")
        return {"result": {"content": [{"type": "text", "text": f"hello, {name}"}], "isError": False}}
    if method == "tools/call":
        return {"result": {"content": [{"type": "text", "text": f"no tool {params.get('name')}"}], "isError": True}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_DELETE(self):
        sessions.discard(self.headers.get("Mcp-Session-Id"))
        self.reply(200)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        session = self.headers.get("Mcp-Session-Id")
        if request.get("method") == "initialize":
            session = uuid.uuid4().hex
            sessions.add(session)
            self.reply(200, {"jsonrpc": "2.0", "id": request["id"], **answer(request)}, [("Mcp-Session-Id", session)])
            return
        if session is None:
            error = {"code": -32000, "message": "Bad Request: No valid session ID provided"}
            self.reply(400, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        if session not in sessions:
            self.reply(404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}})
            return
        if "id" not in request or "method" not in request:
            self.reply(202)
            return
        result = answer(request, None)
        if result.pop("forget", False):
            sessions.discard(session)
        self.reply(200, {"jsonrpc": "2.0", "id": request["id"], **result})


if "--http" in sys.argv:
    initialized = True  # each session begins with its own initialize
    web = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {web.server_address[1]}", flush=True)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    sys.stdin.read()
    web.shutdown()
    sys.exit(0)

while True:
    line = sys.stdin.readline()
    if not line:
        break
    if not line.strip():
        continue
    request = json.loads(line)
    if "id" not in request or "method" not in request:
        continue  # notifications, and answers to requests this server never makes
    send({"jsonrpc": "2.0", "id": request["id"], **answer(request)})
