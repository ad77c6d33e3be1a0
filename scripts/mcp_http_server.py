"""An MCP server over Streamable HTTP, written with the official `mcp` package (2.x), for
agent-eval's tests of MCP tools at a URL. It answers both eras on one endpoint (/mcp): the
2026-07-28 revision (each POST alone, the envelope in `_meta`) and the 2025 era (`initialize`,
then a session).

  add(a, b)              readOnlyHint: a + b
  route(region, query)   readOnlyHint: `region` is mirrored into the Mcp-Param-Region header
                         (x-mcp-header), which the server checks in the 2026-07-28 era
  chatty(text)           readOnlyHint: sends two log messages before it answers, so the answer
                         comes as an event stream
  visit(url)             2025 era: asks the client to open a URL (elicitation/create) in the middle
                         of the call, and answers what came back
  slow(ms)               readOnlyHint: answers after `ms` milliseconds

Usage: python scripts/mcp_http_server.py [--json-response] [--token T]
Prints "PORT <n>" once it listens on 127.0.0.1 (an ephemeral port), and stops when its standard
input closes, so a test that dies takes the server with it. --json-response answers with one
JSON object where it can (no event stream); --token T refuses, with 401, a request without
`Authorization: Bearer T`. Each request's method, headers and path are appended as a JSON line
to the file named by MCP_HTTP_SERVER_REQUESTS, when set.
"""

import asyncio
import json
import os
import socket
import sys
import threading
from typing import Annotated

import uvicorn
from pydantic import Field

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

json_response = "--json-response" in sys.argv
token = sys.argv[sys.argv.index("--token") + 1] if "--token" in sys.argv else None
requests_log = os.environ.get("MCP_HTTP_SERVER_REQUESTS")
server = MCPServer("http-test-server")
read_only = ToolAnnotations(readOnlyHint=True)


@server.tool(annotations=read_only)
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@server.tool(annotations=read_only)
def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], query: str) -> str:
    """Answers a query in a region."""
    return f"{query} in {region}"


@server.tool(annotations=read_only)
async def chatty(text: str, ctx: Context) -> str:
    """Says two things on the way, then echoes the text."""
    await ctx.info("working on it")
    await ctx.info("almost there")
    return f"echo: {text}"


@server.tool(annotations=read_only)
async def visit(url: str, ctx: Context) -> str:
    """Sends the user to a URL, asking the client in the middle of the call (2025 era)."""
    try:
        result = await ctx.elicit_url(message="Open this page, please", url=url, elicitation_id="visit-1")
    except Exception as error:  # the client's refusal
        return f"not visited: {error}"
    return f"visited: {result.action}"


@server.tool(annotations=read_only)
async def slow(ms: int) -> str:
    """Answers after a while."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms} ms"


app = server.streamable_http_app(json_response=json_response)


async def guarded(scope, receive, send):
    """The app, behind the token check and the request log."""
    if scope["type"] == "http":
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        if requests_log:
            with open(requests_log, "a") as log:
                log.write(json.dumps({"method": scope["method"], "path": scope["path"], "headers": headers}) + "\n")
        if token is not None and headers.get("authorization") != f"Bearer {token}":
            body = b'{"error": "unauthorized"}'
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
    await app(scope, receive, send)


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)

    def watch_stdin():
        sys.stdin.read()
        web.should_exit = True

    threading.Thread(target=watch_stdin, daemon=True).start()
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    web.run(sockets=[listener])


if __name__ == "__main__":
    main()
