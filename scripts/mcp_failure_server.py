"""An MCP server (stdio) that misbehaves on request, for agent-eval's tests of MCP tools.

Written with the official `mcp` package (scripts/mcp_venv installs it). Its tools:

  echo(text)        answers {"echoed": text}
  getenv(name)      answers {"value": the server's environment variable name, or null}
  fail(message)     the tool raises: an isError result with the message
  crash()           the process exits with status 3 in the middle of the call
  hang()            never answers
  garbage()         writes a line that is not JSON-RPC to stdout, then answers
  slow(ms)          answers after ms milliseconds
  counter()         1, 2, 3… per process: shows when the server was started again
  ping_client()     pings the client, and answers when the client answered

Flags: --exit-at-start (exits with status 2 before answering anything), --banner (prints a
line that is not JSON-RPC before answering), --silent (never answers initialize),
--pid-file PATH (writes its pid to PATH at start), --orphan-pid-file PATH (starts `sleep 600`
in a session of its own, as a daemon would, and writes that process's pid to PATH),
--hang-file PATH (`hang` writes its pid to PATH when it is called).
"""

import os
import subprocess
import sys
import time


def flag_value(name):
    """The value after `name` on the command line, or None."""
    if name in sys.argv and sys.argv.index(name) + 1 < len(sys.argv):
        return sys.argv[sys.argv.index(name) + 1]
    return None


def write_atomically(path, text):
    """Writes `text` to `path` so that a reader sees all of it or nothing."""
    with open(path + ".tmp", "w") as file:
        file.write(text)
    os.rename(path + ".tmp", path)


if flag_value("--orphan-pid-file"):
    # setsid: out of the server's process group, so killing the group does not reach it.
    orphan = subprocess.Popen(
        ["sleep", "600"], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    write_atomically(flag_value("--orphan-pid-file"), f"{orphan.pid}\n")
if flag_value("--pid-file"):
    write_atomically(flag_value("--pid-file"), f"{os.getpid()}\n")

# The protocol's stdout, before the SDK moves it away from fd 1 (where a stray print would
# corrupt it): `garbage` writes here on purpose.
WIRE = os.dup(1)

if "--exit-at-start" in sys.argv:
    print("failure server: refusing to start (--exit-at-start)", file=sys.stderr, flush=True)
    sys.exit(2)
if "--silent" in sys.argv:
    time.sleep(3600)
if "--banner" in sys.argv:
    os.write(1, b"Welcome to the failure server!\n")

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

server = MCPServer("failure-server")
calls = {"count": 0}


@server.tool()
def echo(text: str) -> dict:
    """Answers with the text it was given."""
    return {"echoed": text}


@server.tool()
def getenv(name: str) -> dict:
    """Answers with the value of an environment variable the server was started with."""
    return {"value": os.environ.get(name)}


@server.tool()
def fail(message: str) -> str:
    """Raises an error with the message."""
    raise ToolError(message)


@server.tool()
def crash() -> str:
    """Exits the process in the middle of the call."""
    print("failure server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def hang() -> str:
    """Never answers."""
    if flag_value("--hang-file"):
        write_atomically(flag_value("--hang-file"), f"{os.getpid()}\n")
    time.sleep(3600)
    return "unreachable"


@server.tool()
def garbage() -> str:
    """Writes a line that is not JSON-RPC to stdout, then answers."""
    os.write(WIRE, b"this is not json\n")
    return "done"


@server.tool()
def json_not_rpc() -> str:
    """Writes a line that is JSON but not JSON-RPC to stdout, then answers."""
    os.write(WIRE, b'{"hello": "not json-rpc"}\n')
    return "done"


@server.tool()
def slow(ms: int) -> str:
    """Answers after ms milliseconds."""
    time.sleep(ms / 1000)
    return f"slept {ms} ms"


@server.tool()
def counter() -> int:
    """Counts the calls this process has answered."""
    calls["count"] += 1
    return calls["count"]


@server.tool()
async def ping_client(ctx: Context) -> str:
    """Pings the client, and answers when the client answered."""
    await ctx.session.send_ping()
    return "the client answered the ping"


if __name__ == "__main__":
    server.run("stdio")
