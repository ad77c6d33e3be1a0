"""An MCP server written with the official `mcp` package of the 1.x line (FastMCP), which speaks
only the 2025 era (`initialize`; requests to the client in the middle of a call), for
`agent-eval mcp-proxy --bridge`'s tests. Run it in `scripts/python_venv mcp1`'s environment.

  greet(name)            readOnlyHint: answers "hello, NAME"
  confirm(action, times) asks the client to confirm `times` times (one elicitation/create request
                         each, in the middle of the call) and answers "confirmed ACTION (accept, …)"
"""

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = FastMCP("mcp1-server")


class Confirmation(BaseModel):
    ok: bool


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def greet(name: str) -> str:
    """Greets someone."""
    return f"hello, {name}"


@server.tool()
async def confirm(action: str, ctx: Context, times: int = 1) -> str:
    """Asks the user to confirm an action."""
    answers = []
    for number in range(times):
        result = await ctx.elicit(message=f"Confirm {action} ({number + 1} of {times})?", schema=Confirmation)
        answers.append(result.action)
    return f"confirmed {action} ({', '.join(answers)})"


if __name__ == "__main__":
    server.run("stdio")
