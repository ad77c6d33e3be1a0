"""An MCP client written with the official `mcp` package, for agent-eval mcp-proxy's tests.

  python mcp_proxy_client.py PLAN -- COMMAND [ARGS...]

starts COMMAND as a stdio MCP server (agent-eval mcp-proxy … -- SERVER, in the tests), lists its
tools and makes the calls of PLAN, a JSON object:

  {"calls": [{"tool": "echo", "arguments": {"text": "hi"}}, ...],
   "concurrent": false,          # make the calls one after another (default) or all at once
   "timeout": 30}                # seconds each call may take, as the client sees it

It prints one JSON object a line: {"tools": [names]}, then per call, in the plan's order,
{"tool": …, "is_error": …, "text": …} or {"tool": …, "exception": …} when the call raised.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    plan = json.loads(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    timeout = plan.get("timeout", 30)
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


asyncio.run(main())
