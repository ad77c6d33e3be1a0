#!/usr/bin/env python3
"""A support agent that holds a conversation, written with smolagents (from PyPI): a
ToolCallingAgent whose memory is kept from turn to turn (`run(..., reset=False)`). Each line of
standard input is the user's next turn; the answer (through smolagents' `final_answer` tool) is
printed, and the next line read, until the input ends (docs/conversations.md, "Command agents").
"""
import json
import os
import sys

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its id.

    Args:
        order_id: The order's id.
    """
    return json.dumps({"order_id": order_id, "item": "espresso mug set", "total": 49.99})


@tool
def refund_order(order_id: str) -> str:
    """Refund an order in full.

    Args:
        order_id: The order's id.
    """
    return json.dumps({"refund_id": "rf-9", "order_id": order_id, "amount": 49.99})


def main():
    model = OpenAIServerModel(model_id="gpt-test", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ.get("OPENAI_API_KEY"))
    agent = ToolCallingAgent(tools=[lookup_order, refund_order], model=model, max_steps=6, verbosity_level=0)
    first = True
    for line in sys.stdin:
        print(agent.run(line.rstrip("\n"), reset=first), flush=True)
        first = False


main()
