"""An MCP server (stdio) whose tool asks its client for input before it acts, written with the
official `mcp` package (2.x), for agent-eval mcp-proxy's tests of multi-round calls (MCP
2026-07-28: a `tools/call` answered `resultType: "input_required"`, retried by the client with
`inputResponses` and the server's `requestState`).

  transfer(account, amount, rounds)  destructiveHint: asks for a confirmation `rounds` times (one
                                     elicitation a round), then transfers
  sign_in(url)                       asks the user to open `url` (a URL elicitation), then answers
  summarize(text)                    asks the client's model (sampling), then answers
  visit(url)                         2025 era: sends the client an elicitation/create request (URL
                                     mode) in the middle of the call, and answers what came back
  balance(account)                   readOnlyHint: answers at once

`requestState` is sealed by the SDK (its default, with keys of this process): a state the client
altered is refused by the server. Every transfer that happens appends a line to the file named by
--journal PATH, so a test can tell which calls reached their end.
"""

import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
)

journal = sys.argv[sys.argv.index("--journal") + 1] if "--journal" in sys.argv else None
server = MCPServer("rounds-server")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
async def transfer(account: str, amount: int, rounds: int, ctx: Context):
    """Transfers money to an account, after the user confirmed it `rounds` times."""
    asked = int(ctx.request_state or "0")
    answers = ctx.input_responses or {}
    if asked > 0:
        answer = answers.get(f"confirm-{asked}")
        if answer is None or getattr(answer, "action", None) != "accept":
            return f"transfer to {account} not confirmed on round {asked}"
    if asked < rounds:
        question = ElicitRequest(
            params=ElicitRequestFormParams(
                message=f"Confirm the transfer of {amount} to {account} ({asked + 1} of {rounds})",
                requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
            )
        )
        return InputRequiredResult(input_requests={f"confirm-{asked + 1}": question}, request_state=str(asked + 1))
    if journal:
        with open(journal, "a") as file:
            file.write(f"transfer {account} {amount}\n")
    return f"transferred {amount} to {account} after {rounds} confirmations"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def sign_in(url: str, ctx: Context):
    """Asks the user to sign in at a URL."""
    if ctx.request_state is None:
        question = ElicitRequest(params=ElicitRequestURLParams(message="Sign in, please", url=url, elicitation_id="sign-in-1"))
        return InputRequiredResult(input_requests={"sign-in": question}, request_state="1")
    return f"signed in at {url}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def summarize(text: str, ctx: Context):
    """Summarizes a text with the client's model."""
    if ctx.request_state is None:
        message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
        question = CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=50))
        return InputRequiredResult(input_requests={"summary": question}, request_state="1")
    return "summarized"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def visit(url: str, ctx: Context) -> str:
    """Sends the user to a URL, asking the client in the middle of the call (2025 era)."""
    try:
        result = await ctx.elicit_url(message="Open this page, please", url=url, elicitation_id="visit-1")
    except Exception as error:  # the client's (or the proxy's) refusal
        return f"not visited: {error}"
    return f"visited: {result.action}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def balance(account: str) -> dict:
    """The balance of an account."""
    return {"account": account, "balance": 1200}


if __name__ == "__main__":
    server.run("stdio")
