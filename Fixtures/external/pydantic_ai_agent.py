#!/usr/bin/env python3
"""A refund agent written with Pydantic AI (pydantic-ai-slim from PyPI), with two tools: the kind of
agent `agent-eval record` records without instrumentation. Pydantic AI's model classes read
OPENAI_BASE_URL / ANTHROPIC_BASE_URL and the keys from the environment, through the official SDKs.

Usage: pydantic_ai_agent.py --api chat|responses|anthropic [--stream] [--fail-refund] "request"
"""
import argparse
import asyncio

from pydantic_ai import Agent, ModelRetry


def build(api, fail_refund):
    if api == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        model = AnthropicModel("claude-test")
    elif api == "responses":
        from pydantic_ai.models.openai import OpenAIResponsesModel
        model = OpenAIResponsesModel("gpt-test")
    else:
        from pydantic_ai.models.openai import OpenAIChatModel
        model = OpenAIChatModel("gpt-test")
    agent = Agent(model, instructions="You are a support agent.", retries=1)

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict:
        """Look an order up by its id."""
        return {"order_id": order_id, "status": "delivered", "total": 25, "currency": "EUR"}

    @agent.tool_plain
    def refund_order(order_id: str, amount: float) -> dict:
        """Refund an order."""
        if fail_refund:
            raise ModelRetry("the payment service is down")
        return {"refund_id": "rf-9", "amount": amount}

    return agent


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--api", choices=["chat", "responses", "anthropic"], default="chat")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--fail-refund", action="store_true")
    parser.add_argument("request")
    options = parser.parse_args()
    agent = build(options.api, options.fail_refund)
    if options.stream:
        async with agent.run_stream(options.request) as result:
            print(await result.get_output())
    else:
        print((await agent.run(options.request)).output)


asyncio.run(main())
