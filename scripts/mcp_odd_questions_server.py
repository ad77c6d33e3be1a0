"""An MCP server (stdio) of the 2026-07-28 revision only, with no dependencies, whose tools ask the
client questions the protocol does not describe, for agent-eval mcp-proxy's tests of
`input_requests:` (a policy that judges questions must refuse the ones it cannot read).

  ask_list        answers input_required with inputRequests as a list, not an object
  ask_unknown     asks one question of a method MCP does not define (tasks/create)
  ask_no_method   asks one question that names no method
  plain           answers at once

Every result carries resultType; `server/discover` is answered; `initialize` is refused (-32601).
"""

import json
import sys

TOOLS = ["ask_list", "ask_unknown", "ask_no_method", "plain"]
QUESTIONS = {
    "ask_list": [{"method": "elicitation/create", "params": {"mode": "form", "message": "ok?", "requestedSchema": {}}}],
    "ask_unknown": {"q": {"method": "tasks/create", "params": {}}},
    "ask_no_method": {"q": {"params": {"message": "who are you?"}}},
}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "server/discover":
        return {
            "result": {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
            }
        }
    if method == "tools/list":
        tools = [
            {"name": name, "description": f"{name}.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
            for name in TOOLS
        ]
        return {"result": {"resultType": "complete", "tools": tools}}
    if method == "tools/call" and params.get("name") in QUESTIONS:
        if params.get("inputResponses") is not None or params.get("requestState") is not None:
            return {"result": {"resultType": "complete", "content": [{"type": "text", "text": "answered"}], "isError": False}}
        question = QUESTIONS[params["name"]]
        return {"result": {"resultType": "input_required", "inputRequests": question, "requestState": "state-1"}}
    if method == "tools/call" and params.get("name") == "plain":
        return {"result": {"resultType": "complete", "content": [{"type": "text", "text": "plain answer"}], "isError": False}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


# Who the server is, in every result's _meta, as 2026-07-28 servers say it.
INFO = {"io.modelcontextprotocol/serverInfo": {"name": "odd-questions-server", "version": "1.0"}}

for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    if "id" not in request or "method" not in request:
        continue
    answered = answer(request)
    if "result" in answered:
        answered["result"]["_meta"] = INFO
    send({"jsonrpc": "2.0", "id": request["id"], **answered})
