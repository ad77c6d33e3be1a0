#!/usr/bin/env python3
"""A refund agent on the official openai SDK whose tools come from an MCP server, through the
official `mcp` package's stdio client: the kind of agent whose model traffic `agent-eval record`
records and whose tool calls `agent-eval mcp-proxy` gates, without a line of instrumentation.

Usage: mcp_sdk_agent.py "request" -- SERVER_COMMAND [ARGS...]

It lists the server's tools, offers them to the model, makes each call the model proposes through
the MCP session (a denied call comes back as a tool error, which goes to the model like any
result) and prints the model's final answer.
"""
import asyncio
import json
import os
import sys

import openai
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    request = sys.argv[1]
    server = sys.argv[sys.argv.index("--") + 1 :]
    parameters = StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listing = await session.list_tools()
            tools = [
                {"type": "function", "function": {"name": tool.name, "description": tool.description or "", "parameters": tool.input_schema}}
                for tool in listing.tools
            ]
            client = openai.AsyncOpenAI(max_retries=3)
            messages = [{"role": "system", "content": "You are a support agent."}, {"role": "user", "content": request}]
            for _ in range(6):
                message = (await client.chat.completions.create(model="gpt-test", messages=messages, tools=tools)).choices[0].message
                calls = message.tool_calls or []
                if not calls:
                    print(message.content)
                    return
                messages.append(
                    {
                        "role": "assistant",
                        "content": message.content,
                        "tool_calls": [
                            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                            for c in calls
                        ],
                    }
                )
                for call in calls:
                    result = await session.call_tool(call.function.name, json.loads(call.function.arguments or "{}"))
                    text = "\n".join(part.text for part in result.content if getattr(part, "text", None) is not None)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            print("gave up after 6 model requests")


asyncio.run(main())
