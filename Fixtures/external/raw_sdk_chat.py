#!/usr/bin/env python3
"""A support agent that holds a conversation, written as a plain loop on the official openai SDK:
the shape `agent-eval run` talks to as a conversation case's `command:` (docs/conversations.md,
"Command agents"). Each line of standard input is the user's next turn; the agent answers it
(calling its tools as its model asks), prints the answer, and reads the next line, until its input
ends.
"""
import json
import sys

import openai

TOOLS = [
    {"type": "function", "function": {"name": "lookup_order", "description": "Look an order up by its id.",
                                      "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                                                     "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "refund_order", "description": "Refund an order in full.",
                                      "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                                                     "required": ["order_id"]}}},
]


def run_tool(name, arguments):
    if name == "lookup_order":
        return json.dumps({"order_id": arguments.get("order_id"), "item": "espresso mug set", "total": 49.99})
    return json.dumps({"refund_id": "rf-9", "order_id": arguments.get("order_id"), "amount": 49.99})


def main():
    client = openai.OpenAI(max_retries=2)
    messages = [{"role": "system", "content": "You are a support agent. Refund only after the customer confirms."}]
    for line in sys.stdin:
        messages.append({"role": "user", "content": line.rstrip("\n")})
        for _ in range(8):
            message = client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS).choices[0].message
            if not message.tool_calls:
                messages.append({"role": "assistant", "content": message.content or ""})
                print(message.content, flush=True)
                break
            messages.append({"role": "assistant", "content": message.content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in message.tool_calls]})
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id,
                                 "content": run_tool(call.function.name, json.loads(call.function.arguments or "{}"))})


main()
