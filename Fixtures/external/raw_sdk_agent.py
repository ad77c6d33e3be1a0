#!/usr/bin/env python3
"""A refund agent written as a plain loop on the official SDKs, with two tools: the kind of agent
`agent-eval record` records without instrumentation. It reads its base URLs and keys from the
environment, as the SDKs do (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, *_API_KEY).

Usage: raw_sdk_agent.py --api chat|responses|anthropic [--stream] [--fail-refund] [--parallel] "request"

--parallel runs a second conversation (another customer's request) at the same time, in a thread,
as an agent with a sub-agent does; the main conversation's answer is printed last.
"""
import argparse
import json
import sys

ORDERS = {"A-1042": {"order_id": "A-1042", "status": "delivered", "total": 25, "currency": "EUR"}}
TOOLS = [
    ("lookup_order", "Look an order up by its id.", {"order_id": {"type": "string"}}),
    ("refund_order", "Refund an order.", {"order_id": {"type": "string"}, "amount": {"type": "number"}}),
]


def run_tool(name, arguments, fail_refund):
    if name == "lookup_order":
        return json.dumps(ORDERS.get(arguments.get("order_id"), {"error": "no such order"}))
    if name == "refund_order":
        if fail_refund:
            return json.dumps({"error": "the payment service is down"})
        return json.dumps({"refund_id": "rf-9", "amount": arguments.get("amount")})
    return json.dumps({"error": "unknown tool " + name})


def schema(properties):
    return {"type": "object", "properties": properties, "required": list(properties)}


def chat(request, stream, fail_refund):
    import openai
    client = openai.OpenAI(max_retries=3)
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": schema(p)}} for n, d, p in TOOLS]
    messages = [{"role": "system", "content": "You are a support agent."}, {"role": "user", "content": request}]
    for _ in range(6):
        if stream:
            calls, text = {}, ""
            for chunk in client.chat.completions.create(model="gpt-test", messages=messages, tools=tools, stream=True):
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for call in delta.tool_calls or []:
                    slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] = call.id or slot["id"]
                    slot["name"] += (call.function.name or "") if call.function else ""
                    slot["arguments"] += (call.function.arguments or "") if call.function else ""
            calls = [calls[i] for i in sorted(calls)]
        else:
            message = client.chat.completions.create(model="gpt-test", messages=messages, tools=tools).choices[0].message
            text = message.content or ""
            calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
        if not calls:
            return text
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]})
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": run_tool(call["name"], json.loads(call["arguments"] or "{}"), fail_refund)})
    return "gave up"


def responses(request, stream, fail_refund):
    import openai
    client = openai.OpenAI(max_retries=3)
    tools = [{"type": "function", "name": n, "description": d, "parameters": schema(p)} for n, d, p in TOOLS]
    items = [{"role": "user", "content": request}]
    for _ in range(6):
        if stream:
            output = None
            with client.responses.stream(model="gpt-test", instructions="You are a support agent.", input=items, tools=tools) as events:
                for _event in events:
                    pass
                output = events.get_final_response().output
        else:
            output = client.responses.create(model="gpt-test", instructions="You are a support agent.", input=items, tools=tools).output
        calls = [item for item in output if item.type == "function_call"]
        if not calls:
            return "".join(part.text for item in output if item.type == "message" for part in item.content if part.type == "output_text")
        for call in calls:
            items.append({"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments})
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": run_tool(call.name, json.loads(call.arguments or "{}"), fail_refund)})
    return "gave up"


def anthropic_loop(request, stream, fail_refund):
    import anthropic
    client = anthropic.Anthropic(max_retries=3)
    tools = [{"name": n, "description": d, "input_schema": schema(p)} for n, d, p in TOOLS]
    messages = [{"role": "user", "content": request}]
    for _ in range(6):
        if stream:
            with client.messages.stream(model="claude-test", max_tokens=512, system="You are a support agent.",
                                        messages=messages, tools=tools) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(model="claude-test", max_tokens=512, system="You are a support agent.",
                                             messages=messages, tools=tools)
        uses = [block for block in message.content if block.type == "tool_use"]
        if not uses:
            return "".join(block.text for block in message.content if block.type == "text")
        messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]})
        results = []
        for use in uses:
            text = run_tool(use.name, use.input, fail_refund)
            results.append({"type": "tool_result", "tool_use_id": use.id, "content": text,
                            "is_error": "error" in json.loads(text)})
        messages.append({"role": "user", "content": results})
    return "gave up"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--api", choices=["chat", "responses", "anthropic"], default="chat")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--fail-refund", action="store_true")
    parser.add_argument("--parallel", action="store_true")
    parser.add_argument("request", nargs="?")
    options = parser.parse_args()
    request = options.request or sys.stdin.read().strip() or "Order A-1042 arrived broken. Refund me."
    loop = {"chat": chat, "responses": responses, "anthropic": anthropic_loop}[options.api]
    if options.parallel:
        import threading
        other = {}
        helper = threading.Thread(target=lambda: other.setdefault("answer", loop(
            "A second customer: order A-1042 was late. Refund me too.", options.stream, options.fail_refund)))
        helper.start()
        answer = loop(request, options.stream, options.fail_refund)
        helper.join()
        print(other.get("answer"))
        print(answer)
        return
    print(loop(request, options.stream, options.fail_refund))


if __name__ == "__main__":
    main()
