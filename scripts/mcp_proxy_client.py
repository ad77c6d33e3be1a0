"""An MCP client written with the official `mcp` package, for agent-eval mcp-proxy's tests.

  python mcp_proxy_client.py PLAN -- COMMAND [ARGS...]

starts COMMAND as a stdio MCP server (agent-eval mcp-proxy … -- SERVER, in the tests), lists its
tools and makes the calls of PLAN, a JSON object:

  {"calls": [{"tool": "echo", "arguments": {"text": "hi"}}, ...],
   "concurrent": false,          # make the calls one after another (default) or all at once
   "timeout": 30,                # seconds each call may take, as the client sees it
   "mode": "session"}            # "session" (default): the 2025-era ClientSession and its
                                 # initialize; "auto", "legacy" or "2026-07-28": the SDK's
                                 # Client in that mode (auto probes server/discover first), which
                                 # accepts a server's elicitations (a form with {"ok": true})

With a Client mode, `"list": false` skips the listing (the first line is then the first call's),
and a call may drive its rounds itself (`"manual": true`): it is sent with the call's
`request_state` and, with `"answer": true`, an accepted `confirm-1` (a retry of a round that never
was), and when the server asks for input it is retried once with `"then"`'s arguments (the same
by default) and the server's `requestState` (with `"x"` appended when `"tamper": true`; or the
state the server gave the plan's call number `"state_of"`, counted from 0). A call that ends
asking for input prints {"tool": …, "input_required": [keys]}.

It prints one JSON object a line: {"tools": [names]}, then per call, in the plan's order,
{"tool": …, "is_error": …, "text": …} or {"tool": …, "exception": …} when the call raised.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult, InputRequiredResult


async def main():
    plan = json.loads(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    timeout = plan.get("timeout", 30)
    if plan.get("mode", "session") != "session":
        await with_client(plan, server, timeout)
        return
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listing = await session.list_tools()
            print(json.dumps({"tools": [tool.name for tool in listing.tools]}), flush=True)

            async def call(item):
                try:
                    result = await session.call_tool(item["tool"], item.get("arguments", {}), read_timeout_seconds=timeout)
                except Exception as error:  # the test reads what the client saw
                    return {"tool": item["tool"], "exception": str(error)}
                text = "\n".join(part.text for part in result.content if getattr(part, "text", None) is not None)
                return {"tool": item["tool"], "is_error": bool(result.is_error), "text": text}

            if plan.get("concurrent"):
                results = await asyncio.gather(*(call(item) for item in plan.get("calls", [])))
            else:
                results = [await call(item) for item in plan.get("calls", [])]
            for result in results:
                print(json.dumps(result), flush=True)


async def confirm(context, params):
    if getattr(params, "mode", "form") == "url":
        return ElicitResult(action="accept")
    return ElicitResult(action="accept", content={"ok": True})


async def with_client(plan, server, timeout):
    async with Client(server, mode=plan["mode"], elicitation_callback=confirm, read_timeout_seconds=timeout) as client:
        if plan.get("list", True):
            listing = await client.list_tools()
            print(json.dumps({"tools": [tool.name for tool in listing.tools]}), flush=True)
        states = {}
        for number, item in enumerate(plan.get("calls", [])):
            try:
                if item.get("manual"):
                    result = await rounds(client, item, number, states)
                else:
                    result = await client.call_tool(item["tool"], item.get("arguments", {}))
            except Exception as error:  # the test reads what the client saw
                print(json.dumps({"tool": item["tool"], "exception": f"{type(error).__name__}: {error}"}), flush=True)
                continue
            if isinstance(result, InputRequiredResult):
                print(json.dumps({"tool": item["tool"], "input_required": sorted(result.input_requests or {})}), flush=True)
                continue
            text = "\n".join(part.text for part in result.content if getattr(part, "text", None) is not None)
            print(json.dumps({"tool": item["tool"], "is_error": bool(result.is_error), "text": text}), flush=True)


def accepted(keys):
    return {key: ElicitResult(action="accept", content={"ok": True}) for key in keys}


async def rounds(client, item, number, states):
    result = await client.session.call_tool(
        item["tool"],
        item.get("arguments", {}),
        input_responses=accepted(["confirm-1"]) if item.get("answer") else None,
        request_state=item.get("request_state"),
        allow_input_required=True,
    )
    if isinstance(result, InputRequiredResult):
        states[number] = result.request_state
    if not isinstance(result, InputRequiredResult) or "then" not in item:
        return result
    then = item["then"]
    state = states[then["state_of"]] if "state_of" in then else result.request_state or ""
    state += "x" if then.get("tamper") else ""
    return await client.session.call_tool(
        item["tool"],
        then.get("arguments", item.get("arguments", {})),
        input_responses=accepted(result.input_requests or {}),
        request_state=state,
        allow_input_required=True,
    )


asyncio.run(main())
