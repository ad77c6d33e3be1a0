"""An MCP server (stdio) of a small shop, written with the official `mcp` package, for
agent-eval mcp-proxy's tests: its tools carry the annotations the proxy reads side effects from.

  lookup_order(order_id)            readOnlyHint: the order's status
  refund_order(order_id, amount)    destructiveHint: refunds (answers what it refunded)
  add_note(order_id, text)          destructiveHint false: a note, nothing lost
  delete_customer(customer)         no annotations

The names and arguments are those of the local model server's refund agent
(scripts/model_server.py, REFUND_STEPS), so an agent recorded with `agent-eval record` can serve
its model's calls from this server.

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
def lookup_order(order_id: str) -> dict:
    """The status of an order."""
    return {"order_id": order_id, "status": "delivered", "total": 129}


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def refund_order(order_id: str, amount: int) -> dict:
    """Refunds part or all of an order."""
    note(f"refund {order_id} {amount}")
    return {"order_id": order_id, "refunded": amount, "refund_id": "rf-9"}


@server.tool(annotations=ToolAnnotations(destructiveHint=False))
def add_note(order_id: str, text: str) -> str:
    """Adds a note to an order."""
    note(f"note {order_id} {text}")
    return "noted"


@server.tool()
def delete_customer(customer: str) -> str:
    """Deletes a customer and their data."""
    note(f"delete {customer}")
    return "deleted"


if __name__ == "__main__":
    server.run("stdio")
