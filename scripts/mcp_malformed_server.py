"""An MCP server with no dependencies whose answers are malformed on purpose, one way per
--mode, for agent-eval's tests that such an answer is never taken as a tool's result. It offers
one tool, `echo(text)`. Over stdio, or with --http over Streamable HTTP (one JSON body per POST,
no sessions): then it prints "PORT <n>" once it listens on 127.0.0.1 and stops when its standard
input closes.

  --mode empty            tools/call answers {} (no content, no structuredContent)
  --mode iserror-string   tools/call answers isError "true" (a string) beside its text
  --mode version          initialize answers protocol version "1999-01-01"
  --mode no-result-type   speaks 2026-07-28 (server/discover), and tools/call answers without resultType
  --mode wrong-id         tools/call is answered for another request id (over stdio too)
  --mode result-and-error tools/call is answered with both a result and an error
  --mode error-null       tools/call is answered with "error": null and no result
  --mode status500        (--http) tools/call is answered HTTP 500 with a result in the body
  --mode struct-mismatch  echo declares an outputSchema ({n: integer}, required) and answers {"n": "not a number"}
  --mode no-struct        echo declares that outputSchema and answers no structuredContent
  --mode task-bogus       speaks 2026-07-28 and answers tools/call with a task whose status, polled, is "bogus"
  --mode probe-400        (--http, well formed) refuses server/discover with HTTP 400 and an error whose id is
                          "server-error", as the mcp SDK 1.x refuses a request before initialize
  --mode nulls            (well formed enough) answers isError null and structuredContent null beside its content
  --mode task-plain       (well formed) speaks 2026-07-28; a task handle without a status, then completed with
                          a result that does not repeat resultType
  --mode stderr           (not malformed) writes "stderr of TEXT" to stderr, then answers the call
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else ""
TOOL = {"name": "echo", "description": "Echoes its text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}


def answer(message):
    """(HTTP status, answer) for one request; None for a notification."""
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None
    if method == "server/discover":
        if mode == "probe-400":
            return 400, {"jsonrpc": "2.0", "id": "server-error", "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
        if mode in ("no-result-type", "task-bogus", "task-plain"):
            return 200, {"jsonrpc": "2.0", "id": ident, "result": {
                "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "malformed", "version": "1"}}}}
        return 200, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "unknown method"}}
    if method == "initialize":
        version = "1999-01-01" if mode == "version" else "2025-06-18"
        return 200, {"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": "malformed", "version": "1"}}}
    if method == "tools/list":
        tool = dict(TOOL)
        if mode in ("struct-mismatch", "no-struct"):
            tool["outputSchema"] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        result = {"tools": [tool]}
        if mode in ("no-result-type", "task-bogus", "task-plain"):
            result["resultType"] = "complete"
        return 200, {"jsonrpc": "2.0", "id": ident, "result": result}
    if method == "tools/call":
        text = (message.get("params") or {}).get("arguments", {}).get("text", "")
        good = {"content": [{"type": "text", "text": text}]}
        if mode == "nulls":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": dict(good, isError=None, structuredContent=None)}
        if mode == "task-plain":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": {"resultType": "task", "taskId": "t-2", "pollIntervalMs": 10}}
        if mode == "task-bogus":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": {
                "resultType": "task", "taskId": "t-1", "status": "working", "pollIntervalMs": 10}}
        if mode == "stderr":
            sys.stderr.write("stderr of %s\n" % text)
            sys.stderr.flush()
        if mode == "struct-mismatch":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": dict(good, structuredContent={"n": "not a number"})}
        if mode == "empty":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": {}}
        if mode == "iserror-string":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "failed badly"}], "isError": "true"}}
        if mode == "error-null":
            return 200, {"jsonrpc": "2.0", "id": ident, "error": None}
        if mode == "result-and-error":
            return 200, {"jsonrpc": "2.0", "id": ident, "result": good, "error": {"code": 1, "message": "it failed"}}
        if mode == "wrong-id":
            return 200, {"jsonrpc": "2.0", "id": "someone-else", "result": good}
        if mode == "status500":
            return 500, {"jsonrpc": "2.0", "id": ident, "result": good}
        return 200, {"jsonrpc": "2.0", "id": ident, "result": good}
    if method == "tasks/get" and mode == "task-plain":
        return 200, {"jsonrpc": "2.0", "id": ident, "result": {
            "resultType": "complete", "taskId": "t-2", "status": "completed",
            "result": {"content": [{"type": "text", "text": "done"}]}}}
    if method == "tasks/get":
        return 200, {"jsonrpc": "2.0", "id": ident, "result": {
            "resultType": "complete", "taskId": "t-1", "status": "bogus", "pollIntervalMs": 10}}
    return 200, {"jsonrpc": "2.0", "id": ident, "result": {}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        answered = answer(json.loads(body))
        if answered is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        status, message = answered
        data = json.dumps(message).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if "--http" in sys.argv:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdout.write("PORT %d\n" % server.server_address[1])
    sys.stdout.flush()
    sys.stdin.read()
    server.shutdown()
else:
    for line in sys.stdin:
        if line.strip():
            answered = answer(json.loads(line))
            if answered is not None:
                sys.stdout.write(json.dumps(answered[1]) + "\n")
                sys.stdout.flush()
