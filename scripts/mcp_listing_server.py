"""An MCP server (stdio) whose tool list changes while a client listens, written with the official
`mcp` package (2.x), for agent-eval mcp-proxy's test of `subscriptions/listen` (MCP 2026-07-28):
a tool that appears after the proxy listed the tools must be judged with what the server says of it.

  unlock()      readOnlyHint: adds the tool `inventory` and tells the listening clients that the
                tool list changed (`notifications/tools/list_changed` on their listen stream)
  inventory()   readOnlyHint, only after unlock: "3 widgets"
"""

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("listing-server")
read_only = ToolAnnotations(readOnlyHint=True)


def inventory() -> str:
    """What is in stock."""
    return "3 widgets"


@server.tool(annotations=read_only)
async def unlock(ctx: Context) -> str:
    """Makes the inventory tool available."""
    server.add_tool(inventory, annotations=read_only)
    await ctx.notify_tools_changed()
    return "unlocked"


if __name__ == "__main__":
    server.run("stdio")
