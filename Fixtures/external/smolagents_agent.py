#!/usr/bin/env python3
"""A refund agent written with smolagents (from PyPI): a ToolCallingAgent with two tools, on
smolagents' OpenAIServerModel pointed at OPENAI_BASE_URL. smolagents writes each tool call and its
result back to the model as text, and answers through its `final_answer` tool: the gateway reads
both (docs/record.md).

Usage: smolagents_agent.py [--stream] [--fail-refund] "request"
"""
import argparse
import json
import os

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


def build(stream, fail_refund):
    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up by its id.

        Args:
            order_id: The order's id.
        """
        return json.dumps({"order_id": order_id, "status": "delivered", "total": 25, "currency": "EUR"})

    @tool
    def refund_order(order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            order_id: The order's id.
            amount: How much to refund.
        """
        if fail_refund:
            raise RuntimeError("the payment service is down")
        return json.dumps({"refund_id": "rf-9", "amount": amount})

    model = OpenAIServerModel(model_id="gpt-test", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ.get("OPENAI_API_KEY"))
    return ToolCallingAgent(tools=[lookup_order, refund_order], model=model, max_steps=4, verbosity_level=0, stream_outputs=stream)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--fail-refund", action="store_true")
    parser.add_argument("request")
    options = parser.parse_args()
    print(build(options.stream, options.fail_refund).run(options.request))


main()
