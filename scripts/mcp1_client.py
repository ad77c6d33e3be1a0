"""An MCP client written with the official `mcp` package of the 1.x line, which speaks only the 2025
era (`initialize`, and the server's requests answered mid-call), for `agent-eval mcp-proxy
--bridge`'s tests. Run it in `scripts/python_venv mcp1`'s environment:

  python mcp1_client.py PLAN -- COMMAND [ARGS...]

starts COMMAND as a stdio MCP server, lists its tools and makes the calls of PLAN, a JSON object
{"calls": [{"tool": …, "arguments": {…}}, …]}, one after another. An elicitation is accepted with
{"ok": true}. It prints one JSON object a line: {"protocol_version": …} (what `initialize` agreed),
{"tools": [names]}, then per call {"tool": …, "is_error": …, "text": …} or {"tool": …, "exception": …}.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ElicitResult


async def confirm(context, params):
    return ElicitResult(action="accept", content={"ok": True})


async def main():
    plan = json.loads(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, elicitation_callback=confirm) as session:
            opened = await session.initialize()
            print(json.dumps({"protocol_version": opened.protocolVersion}), flush=True)
            listing = await session.list_tools()
            print(json.dumps({"tools": [tool.name for tool in listing.tools]}), flush=True)
            for item in plan.get("calls", []):
                try:
                    result = await session.call_tool(item["tool"], item.get("arguments", {}))
                except Exception as error:  # the test reads what the client saw
                    print(json.dumps({"tool": item["tool"], "exception": str(error)}), flush=True)
                    continue
                text = "\n".join(part.text for part in result.content if getattr(part, "text", None) is not None)
                print(json.dumps({"tool": item["tool"], "is_error": bool(result.isError), "text": text}), flush=True)


asyncio.run(main())
