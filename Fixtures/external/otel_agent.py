#!/usr/bin/env python3
"""The refund agent as a plain loop on the official openai SDK, instrumented the way teams
instrument agents with OpenTelemetry: a real instrumentation library from PyPI traces the model
calls, and the agent's own code opens an `invoke_agent` span around the run and an
`execute_tool` span around each tool (the GenAI semantic conventions' names and attributes).
Spans go out over OTLP/HTTP protobuf, to wherever the standard variables say
(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT), through the SDK's batch
processor, flushed at exit.

Usage: otel_agent.py --instrumentation openai-v2|openinference [--fail-refund] [--slow-tool S]
                     [--no-tool-spans] [--no-root] [--own-tool] [--tool-first] [--exit-after-tools N]
                     [--otlp-json] "request"

--fail-refund: refund_order raises, and its span ends with an error status.
--slow-tool S: each tool takes S seconds (its span's duration tells it).
--no-tool-spans: only the instrumentation's model spans (no spans of the agent's own).
--own-tool: after the answer, the agent's own code runs notify_customer (no model proposed it),
            in an execute_tool span of its own.
--exit-after-tools N: exit right after running the N-th tool, without sending its result back.
--no-root: no invoke_agent span around the run: every model call is a trace of its own (as with
           a model client's instrumentation alone).
--tool-first: before asking the model anything, the agent's own code looks the order up (an
              execute_tool span that comes before the first model request).
--otlp-json: the exporter sends OTLP/JSON instead of protobuf (a hand-rolled exporter on the SDK's
        own encoder, as collectors' JSON receivers see it).
"""
import argparse
import json
import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode

ORDERS = {"A-1042": {"order_id": "A-1042", "status": "delivered", "total": 25, "currency": "EUR"}}
TOOLS = [
    ("lookup_order", "Look an order up by its id.", {"order_id": {"type": "string"}}),
    ("refund_order", "Refund an order.", {"order_id": {"type": "string"}, "amount": {"type": "number"}}),
]


class ToolFailed(Exception):
    pass


def run_tool(name, arguments, options):
    time.sleep(options.slow_tool)
    if name == "lookup_order":
        return ORDERS.get(arguments.get("order_id"), {"error": "no such order"})
    if name == "refund_order":
        if options.fail_refund:
            raise ToolFailed("the payment service is down")
        return {"refund_id": "rf-9", "amount": arguments.get("amount")}
    raise ToolFailed("unknown tool " + name)


def json_exporter():
    """An OTLP/HTTP JSON exporter: the SDK's own protobuf encoding, mapped to JSON by protobuf's
    official json_format (as the OTLP spec's JSON encoding is defined), posted with requests."""
    import os

    import requests
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JSONExporter(SpanExporter):
        def __init__(self):
            base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
            self.url = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or base.rstrip("/") + "/v1/traces"

        def export(self, spans):
            body = json_format.MessageToJson(encode_spans(spans))
            answer = requests.post(self.url, data=body, headers={"content-type": "application/json"}, timeout=10)
            return SpanExportResult.SUCCESS if answer.ok else SpanExportResult.FAILURE

        def shutdown(self):
            pass

    return JSONExporter()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--instrumentation", choices=["openai-v2", "openinference"], default="openai-v2")
    parser.add_argument("--fail-refund", action="store_true")
    parser.add_argument("--slow-tool", type=float, default=0)
    parser.add_argument("--no-tool-spans", action="store_true")
    parser.add_argument("--otlp-json", action="store_true")
    parser.add_argument("--own-tool", action="store_true")
    parser.add_argument("--tool-first", action="store_true")
    parser.add_argument("--no-root", action="store_true")
    parser.add_argument("--exit-after-tools", type=int, default=0)
    parser.add_argument("request", nargs="?")
    options = parser.parse_args()
    request = options.request or "Order A-1042 arrived broken. Refund me."

    provider = TracerProvider(resource=Resource.create({"service.name": "otel-refund-agent"}))
    if options.otlp_json:
        exporter = json_exporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if options.instrumentation == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        OpenAIInstrumentor().instrument()
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor
        OpenAIInstrumentor().instrument()
    tracer = trace.get_tracer("otel-refund-agent", "1.0")

    import openai
    client = openai.OpenAI(max_retries=0)
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": {
        "type": "object", "properties": p, "required": list(p)}}} for n, d, p in TOOLS]
    messages = [{"role": "system", "content": "You are a support agent."}, {"role": "user", "content": request}]
    answer = "gave up"
    tools_run = 0
    import contextlib
    root = contextlib.nullcontext() if options.no_root else tracer.start_as_current_span("invoke_agent refund-agent")
    with root as agent_span:
        if agent_span is not None:
            agent_span.set_attribute("gen_ai.operation.name", "invoke_agent")
            agent_span.set_attribute("gen_ai.agent.name", "refund-agent")
        if options.tool_first:
            with tracer.start_as_current_span("execute_tool lookup_order") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "lookup_order")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": "A-1042"}))
                span.set_attribute("gen_ai.tool.call.result", json.dumps(run_tool("lookup_order", {"order_id": "A-1042"}, options)))
            provider.force_flush()
        for _ in range(6):
            message = client.chat.completions.create(model="gpt-test", messages=messages, tools=tools).choices[0].message
            calls = message.tool_calls or []
            if not calls:
                answer = message.content or ""
                break
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                for c in calls]})
            for call in calls:
                arguments = json.loads(call.function.arguments or "{}")
                if options.no_tool_spans:
                    try:
                        content = json.dumps(run_tool(call.function.name, arguments, options))
                    except ToolFailed as failure:
                        content = "Error: " + str(failure)
                else:
                    with tracer.start_as_current_span("execute_tool " + call.function.name) as span:
                        span.set_attribute("gen_ai.operation.name", "execute_tool")
                        span.set_attribute("gen_ai.tool.name", call.function.name)
                        span.set_attribute("gen_ai.tool.call.id", call.id)
                        span.set_attribute("gen_ai.tool.call.arguments", call.function.arguments or "{}")
                        try:
                            content = json.dumps(run_tool(call.function.name, arguments, options))
                            span.set_attribute("gen_ai.tool.call.result", content)
                        except ToolFailed as failure:
                            span.set_status(Status(StatusCode.ERROR, str(failure)))
                            span.set_attribute("error.type", "ToolFailed")
                            content = "Error: " + str(failure)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
                tools_run += 1
                if tools_run == options.exit_after_tools:
                    provider.shutdown()
                    print("stopped after " + call.function.name)
                    return
        if options.own_tool:
            with tracer.start_as_current_span("execute_tool notify_customer") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "notify_customer")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"order_id": "A-1042", "text": answer}))
                time.sleep(options.slow_tool)
                span.set_attribute("gen_ai.tool.call.result", json.dumps({"sent": True}))
    provider.shutdown()
    print(answer)


if __name__ == "__main__":
    main()
