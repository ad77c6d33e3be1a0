"""An MCP server (stdio) of a small shop, written with the official `mcp` package, for
agent-eval mcp-proxy's tests: its tools carry the annotations the proxy reads side effects from.

  lookup_order(order)              readOnlyHint: the order's status
  refund_order(order, amount_cents) destructiveHint: refunds (answers what it refunded)
  add_note(order, text)            destructiveHint false: a note, nothing lost
  delete_customer(customer)        no annotations

Every call that changes something appends a line to the file named by --journal PATH, so a
test can tell which calls reached the server.
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

journal = sys.argv[sys.argv.index("--journal") + 1] if "--journal" in sys.argv else None
server = MCPServer("shop-server")


def note(line):
    if journal:
        with open(journal, "a") as file:
            file.write(line + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup_order(order: str) -> dict:
    """The status of an order."""
    return {"order": order, "status": "delivered", "total_cents": 12900}


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def refund_order(order: str, amount_cents: int) -> dict:
    """Refunds part or all of an order."""
    note(f"refund {order} {amount_cents}")
    return {"order": order, "refunded_cents": amount_cents}


@server.tool(annotations=ToolAnnotations(destructiveHint=False))
def add_note(order: str, text: str) -> str:
    """Adds a note to an order."""
    note(f"note {order} {text}")
    return "noted"


@server.tool()
def delete_customer(customer: str) -> str:
    """Deletes a customer and their data."""
    note(f"delete {customer}")
    return "deleted"


if __name__ == "__main__":
    server.run("stdio")
