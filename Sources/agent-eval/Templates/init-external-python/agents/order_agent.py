#!/usr/bin/env python3
"""An order-status agent written as a plain loop on the OpenAI Chat Completions API, with two
tools. Standard library only; replace it with your own agent (any framework, any language):
agent-eval records it through its model gateway, without a line of instrumentation.

It reads OPENAI_BASE_URL and OPENAI_API_KEY as the official SDKs do (agent-eval points the base
URL at its gateway), the model from AGENT_MODEL (default gpt-4o-mini), and the request from its
first argument.
"""
import json
import os
import sys
import urllib.error
import urllib.request

ORDERS = {
    "A-1001": {"order_id": "A-1001", "status": "shipped", "carrier": "DHL", "eta": "2 days"},
    "A-1002": {"order_id": "A-1002", "status": "processing"},
}

TOOLS = [
    {"type": "function", "function": {
        "name": "order_status", "description": "Look an order up by its id.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "cancel_order", "description": "Cancel an order that has not shipped.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
]


def run_tool(name, arguments):
    order = ORDERS.get(arguments.get("order_id"))
    if order is None:
        return {"error": "no such order"}
    if name == "order_status":
        return order
    if name == "cancel_order":
        if order["status"] == "shipped":
            return {"error": "the order has shipped and cannot be cancelled"}
        return {"cancelled": order["order_id"]}
    return {"error": "unknown tool " + name}


def complete(messages):
    base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
    body = {"model": os.environ.get("AGENT_MODEL", "gpt-4o-mini"), "messages": messages, "tools": TOOLS}
    request = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), method="POST", headers={
        "content-type": "application/json", "authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.load(response)["choices"][0]["message"]
    except urllib.error.HTTPError as error:
        sys.exit("the model answered HTTP %d: %s" % (error.code, error.read().decode(errors="replace")[:500]))


def main():
    request = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("AGENT_EVAL_INPUT", "")
    messages = [
        {"role": "system", "content": "You are a support agent. Look orders up before answering; cancel only what has not shipped."},
        {"role": "user", "content": request},
    ]
    for _ in range(8):
        message = complete(messages)
        calls = message.get("tool_calls") or []
        if not calls:
            print(message.get("content") or "")
            return
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
        for call in calls:
            result = run_tool(call["function"]["name"], json.loads(call["function"]["arguments"] or "{}"))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    sys.exit("gave up after 8 model requests")


main()
