#!/usr/bin/env python3
"""A support agent that holds a conversation, written with Pydantic AI (pydantic-ai-slim from PyPI):
each line of standard input is the user's next turn, run with the conversation so far
(`message_history`); the answer is printed, and the next line read, until the input ends
(docs/conversations.md, "Command agents").
"""
import asyncio
import sys

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel


def build():
    agent = Agent(OpenAIChatModel("gpt-test"), instructions="You are a support agent. Refund only after the customer confirms.")

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict:
        """Look an order up by its id."""
        return {"order_id": order_id, "item": "espresso mug set", "total": 49.99}

    @agent.tool_plain
    def refund_order(order_id: str) -> dict:
        """Refund an order in full."""
        return {"refund_id": "rf-9", "order_id": order_id, "amount": 49.99}

    return agent


async def main():
    agent = build()
    history = None
    for line in sys.stdin:
        result = await agent.run(line.rstrip("\n"), message_history=history)
        history = result.all_messages()
        print(result.output, flush=True)


asyncio.run(main())
