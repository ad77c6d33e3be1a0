"""An MCP server (stdio) of the 2026-07-28 revision only, with no dependencies, that answers calls
with tasks (the `io.modelcontextprotocol/tasks` extension: `resultType: "task"`, then `tasks/get`,
`tasks/update` and `tasks/cancel`), for agent-eval's tests of following them. The `mcp` package
from PyPI defines the extension's types but serves none of it, so this server is written by hand
from the extension's specification.

  report(polls)   a task that is `working` for `polls` polls of tasks/get, then `completed` with
                  the text "report ready after N polls"
  doomed()        a task that `failed` with a JSON-RPC error at its first poll
  asking()        a task that is `input_required` (an elicitation) at its first poll
  stubborn()      a task that is `input_required` (an elicitation) at its first poll, takes no
                  cancel, and is `completed` with the text "done regardless" from its second
  endless()       a task that stays `working`
  sluggish()      a task that stays `working`, whose every tasks/get is answered only after 3.2 s
                  (a poll the client's time runs out on while the server is still there)
  quick()         answers at once, without a task

A call from a client whose envelope does not declare the extension is refused with -32021 (a
task is the only way this server answers report, doomed, asking, stubborn, endless and sluggish). Each task
asks to be polled every 20 ms. Every `tasks/cancel` is appended ("cancel TASK") to the file named by
--journal PATH. `server/discover` is answered; `initialize` is refused (-32601).
"""

import json
import sys
import time

journal = sys.argv[sys.argv.index("--journal") + 1] if "--journal" in sys.argv else None
TASKS = {}
STAMP = "2026-11-28T00:00:00Z"
TOOLS = ["report", "doomed", "asking", "stubborn", "endless", "sluggish", "quick"]
EXTENSION = "io.modelcontextprotocol/tasks"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def task_state(task_id):
    task = TASKS[task_id]
    state = {
        "taskId": task_id,
        "status": "working",
        "createdAt": STAMP,
        "lastUpdatedAt": STAMP,
        "ttlMs": 60000,
        "pollIntervalMs": 20,
    }
    kind = task["kind"]
    if task["cancelled"] and kind != "stubborn":
        state["status"] = "cancelled"
        return state
    if kind == "report" and task["polls"] > task["needed"]:
        state["status"] = "completed"
        text = f"report ready after {task['needed']} polls"
        state["result"] = {"content": [{"type": "text", "text": text}], "isError": False, "resultType": "complete"}
    elif kind == "doomed" and task["polls"] > 0:
        state["status"] = "failed"
        state["error"] = {"code": -32603, "message": "the job crashed"}
    elif kind == "asking" and task["polls"] > 0:
        state["status"] = "input_required"
        question = {"method": "elicitation/create", "params": {"mode": "form", "message": "Go on?", "requestedSchema": {}}}
        state["inputRequests"] = {"go-on": question}
    elif kind == "stubborn" and task["polls"] == 1:
        state["status"] = "input_required"
        state["inputRequests"] = {"go-on": {"method": "elicitation/create", "params": {"mode": "form", "message": "Go on?"}}}
    elif kind == "stubborn" and task["polls"] > 1:
        state["status"] = "completed"
        state["result"] = {"content": [{"type": "text", "text": "done regardless"}], "isError": False, "resultType": "complete"}
    return state


def answer(request):
    method, params = request.get("method"), request.get("params") or {}
    if method == "server/discover":
        capabilities = {"tools": {}, "extensions": {EXTENSION: {}}}
        return {"result": {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": capabilities}}
    if method == "tools/list":
        tools = [{"name": name, "description": f"{name}.", "inputSchema": {"type": "object"}} for name in TOOLS]
        return {"result": {"resultType": "complete", "tools": tools}}
    if method == "tools/call":
        name = params.get("name")
        if name == "quick":
            return {"result": {"resultType": "complete", "content": [{"type": "text", "text": "quick answer"}], "isError": False}}
        if name not in TOOLS:
            return {"error": {"code": -32602, "message": f"Unknown tool: {name}"}}
        capabilities = (params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities") or {}
        if EXTENSION not in (capabilities.get("extensions") or {}):
            data = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
            return {"error": {"code": -32021, "message": "Missing required client capability", "data": data}}
        task_id = f"task-{len(TASKS) + 1}"
        needed = int((params.get("arguments") or {}).get("polls", 1))
        TASKS[task_id] = {"kind": name, "polls": 0, "needed": needed, "cancelled": False}
        return {"result": {"resultType": "task", **task_state(task_id)}}
    if method in ("tasks/get", "tasks/cancel", "tasks/update"):
        task_id = params.get("taskId")
        if task_id not in TASKS:
            return {"error": {"code": -32602, "message": f"Unknown task: {task_id}"}}
        if method == "tasks/get":
            if TASKS[task_id]["kind"] == "sluggish":
                time.sleep(3.2)
            TASKS[task_id]["polls"] += 1
            return {"result": {"resultType": "complete", **task_state(task_id)}}
        if method == "tasks/cancel":
            TASKS[task_id]["cancelled"] = True
            if journal:
                with open(journal, "a") as file:
                    file.write(f"cancel {task_id}\n")
            return {"result": {"resultType": "complete", **task_state(task_id)}}
        return {"result": {"resultType": "complete"}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


INFO = {"io.modelcontextprotocol/serverInfo": {"name": "tasks-server", "version": "1.0"}}

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
