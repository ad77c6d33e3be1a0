"""Writes agent traces made by the official OpenTelemetry Python SDK (`opentelemetry-sdk`),
encoded by the official OTLP encoder (`opentelemetry-exporter-otlp-proto-common`), for the import
tests: the spans an instrumented agent emits, with the traps real traces have.

    python scripts/otel_traces.py OUT_DIR

Writes, from the same spans:
  OUT_DIR/genai.otlp.json       OTLP/JSON (hex ids), the GenAI semantic conventions
  OUT_DIR/genai.proto.json      protobuf's JSON mapping of the same request (base64 ids)
  OUT_DIR/genai.otlp.pb         the same request in protobuf's binary encoding, as OTLP/HTTP exporters send it
  OUT_DIR/genai.tempo.json      Grafana Tempo's `batches` shape
  OUT_DIR/genai.jaeger.json     a Jaeger JSON export
  OUT_DIR/openllmetry.otlp.json OTLP/JSON with OpenLLMetry's older gen_ai.prompt/completion attributes
  OUT_DIR/truncated.otlp.json   the GenAI traces again, made with the SDK's attribute length limit
                                (SpanLimits(max_span_attribute_length=80)): long message attributes cut

Trace 1 (GenAI conventions): invoke_agent → two layers of chat spans for the first model call
(a framework span around a client-library span: one call), two parallel execute_tool spans whose
clock is skewed before their chat span, a tool whose failure is only in its result, and a final
answer; the agent span and every model call declare four tools in gen_ai.tool.definitions, one of
which (web_search) is never called. Trace 2: content capture off (no messages): tool calls known
from execute_tool spans only, and a span whose parent is missing from the export. The OpenLLMetry
trace: chats that declare get_weather and web_search in llm.request.functions.N.*, a tool call in
gen_ai.completion.0.tool_calls.0.*, a tool span, and a final completion.
"""
import base64
import json
import os
import sys

from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
T0 = 1_790_000_000_000_000_000  # ns: fixed times, so the files are the same every time
MS = 1_000_000


def provider(service, limits=None):
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": service}), span_limits=limits)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider.get_tracer("agent-demo", "1.0"), exporter


def messages(items):
    return json.dumps(items)


def schema(**properties):
    return {"type": "object", "properties": {name: {"type": kind} for name, kind in properties.items()}, "required": list(properties)}


# The refund agent's tools, as the conventions' gen_ai.tool.definitions: web_search is never called.
REFUND_TOOLS = json.dumps([
    {"type": "function", "name": "lookup_order", "description": "Look up an order.", "parameters": schema(order_id="string")},
    {"type": "function", "name": "get_policy", "description": "Read a policy.", "parameters": schema(topic="string")},
    {"type": "function", "name": "refund_order", "description": "Refund an order.",
     "parameters": schema(order_id="string", amount_cents="integer")},
    {"type": "function", "name": "web_search", "description": "Search the web.", "parameters": schema(query="string")},
])
# The weather agent's tools, as OpenLLMetry records a request's functions: web_search is never called.
WEATHER_FUNCTIONS = {
    "llm.request.functions.0.name": "get_weather", "llm.request.functions.0.description": "Current weather in a city.",
    "llm.request.functions.0.parameters": json.dumps(schema(city="string")),
    "llm.request.functions.1.name": "web_search", "llm.request.functions.1.description": "Search the web.",
    "llm.request.functions.1.parameters": json.dumps(schema(query="string")),
}


def genai_traces(limits=None):
    tracer, exporter = provider("refund-agent", limits)
    with tracer.start_as_current_span("invoke_agent refund-agent", start_time=T0, end_on_exit=False) as root:
        root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "refund-agent",
                             "gen_ai.tool.definitions": REFUND_TOOLS,
                             "gen_ai.input.messages": messages([{"role": "user", "parts": [{"type": "text", "content": "Refund order A-1"}]}])})
        # One model call, two layers: the framework's span and the client library's inside it.
        with tracer.start_as_current_span("chat gpt-4o-mini", start_time=T0 + 1 * MS, end_on_exit=False) as outer:
            outer.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"})
            with tracer.start_as_current_span("chat gpt-4o-mini", start_time=T0 + 2 * MS, end_on_exit=False) as inner:
                inner.set_attributes({
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.tool.definitions": REFUND_TOOLS,
                    "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.response.id": "chatcmpl-1",
                    "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30,
                    "gen_ai.response.finish_reasons": ["tool_calls"],
                    "gen_ai.output.messages": messages([{"role": "assistant", "finish_reason": "tool_call", "parts": [
                        {"type": "text", "content": "Looking it up."},
                        {"type": "tool_call", "id": "call_a", "name": "lookup_order", "arguments": {"order_id": "A-1"}},
                        {"type": "tool_call", "id": "call_b", "name": "get_policy", "arguments": "{\"topic\": \"refunds\"}"}]}])})
                inner.end(end_time=T0 + 40 * MS)
            outer.end(end_time=T0 + 41 * MS)
        # Parallel tools; their clock runs behind the model call's (skew).
        for call_id, name, result, start in (("call_b", "get_policy", {"window_days": 30}, 0), ("call_a", "lookup_order", {"total": 1999}, 1)):
            span = tracer.start_span(f"execute_tool {name}", start_time=T0 + start * MS)
            span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                                 "gen_ai.tool.call.result": json.dumps(result)})
            span.end(end_time=T0 + (start + 5) * MS)
        with tracer.start_as_current_span("chat gpt-4o-mini", start_time=T0 + 50 * MS, end_on_exit=False) as chat:
            chat.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.tool.definitions": REFUND_TOOLS,
                "gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 20,
                "gen_ai.output.messages": messages([{"role": "assistant", "finish_reason": "tool_call", "parts": [
                    {"type": "tool_call", "id": "call_c", "name": "refund_order", "arguments": {"order_id": "A-1", "amount_cents": 1999}}]}])})
            chat.end(end_time=T0 + 60 * MS)
        span = tracer.start_span("execute_tool refund_order", start_time=T0 + 61 * MS)
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund_order", "gen_ai.tool.call.id": "call_c",
                             "gen_ai.tool.call.result": "{\"error\": \"refunds are closed today\"}"})
        span.end(end_time=T0 + 70 * MS)
        with tracer.start_as_current_span("chat gpt-4o-mini", start_time=T0 + 80 * MS, end_on_exit=False) as chat:
            chat.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.tool.definitions": REFUND_TOOLS,
                "gen_ai.response.finish_reasons": ["stop"],
                "gen_ai.output.messages": messages([{"role": "assistant", "finish_reason": "stop", "parts": [
                    {"type": "text", "content": "Refunds are closed today; try tomorrow."}]}])})
            chat.end(end_time=T0 + 90 * MS)
        root.end(end_time=T0 + 95 * MS)

    # Trace 2: content capture off; the agent span's parent was not exported.
    parent = trace.NonRecordingSpan(trace.SpanContext(0x1234, 0xABCDEF, is_remote=True, trace_flags=trace.TraceFlags(1)))
    with tracer.start_as_current_span("invoke_agent search-agent", context=trace.set_span_in_context(parent), start_time=T0,
                                      end_on_exit=False) as root:
        root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "search-agent"})
        with tracer.start_as_current_span("chat claude", start_time=T0 + 1 * MS, end_on_exit=False) as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-x",
                                 "gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 10})
            chat.end(end_time=T0 + 10 * MS)
        span = tracer.start_span("execute_tool web_search", start_time=T0 + 11 * MS)
        span.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search", "gen_ai.tool.call.id": "toolu_1"})
        span.end(end_time=T0 + 20 * MS)
        with tracer.start_as_current_span("chat claude", start_time=T0 + 21 * MS, end_on_exit=False) as chat:
            chat.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-x",
                                 "gen_ai.response.finish_reasons": ["max_tokens"]})
            chat.end(end_time=T0 + 30 * MS)
        root.set_status(Status(StatusCode.ERROR, "MaxTokensExceeded"))
        root.end(end_time=T0 + 31 * MS)
    return exporter.get_finished_spans()


def openllmetry_traces():
    tracer, exporter = provider("legacy-agent")
    with tracer.start_as_current_span("agent.workflow", start_time=T0, end_on_exit=False) as root:
        root.set_attributes({"traceloop.span.kind": "workflow", "traceloop.entity.name": "weather"})
        with tracer.start_as_current_span("openai.chat", start_time=T0 + 1 * MS, end_on_exit=False) as chat:
            chat.set_attributes({
                "llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", **WEATHER_FUNCTIONS,
                "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "You answer weather questions.",
                "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Weather in Paris?",
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
                "gen_ai.completion.0.tool_calls.0.id": "call_w", "gen_ai.completion.0.tool_calls.0.name": "get_weather",
                "gen_ai.completion.0.tool_calls.0.arguments": "{\"city\": \"Paris\"}",
                "gen_ai.usage.prompt_tokens": 40, "gen_ai.usage.completion_tokens": 12})
            chat.end(end_time=T0 + 9 * MS)
        with tracer.start_as_current_span("get_weather.tool", start_time=T0 + 10 * MS, end_on_exit=False) as tool:
            tool.set_attributes({"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
                                 "traceloop.entity.input": "{\"city\": \"Paris\"}", "traceloop.entity.output": "{\"celsius\": 18}"})
            tool.end(end_time=T0 + 12 * MS)
        with tracer.start_as_current_span("openai.chat", start_time=T0 + 13 * MS, end_on_exit=False) as chat:
            chat.set_attributes({
                "llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", **WEATHER_FUNCTIONS,
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.completion.0.content": "It is 18 °C in Paris."})
            chat.end(end_time=T0 + 20 * MS)
        root.end(end_time=T0 + 21 * MS)
    return exporter.get_finished_spans()


def otlp_json(spans):
    """The official encoder's request, in OTLP/JSON: protobuf's JSON mapping with hex ids."""
    mapped = json.loads(json_format.MessageToJson(encode_spans(spans)))

    def hexed(value):
        if isinstance(value, dict):
            return {key: (base64.b64decode(item).hex() if key in ("traceId", "spanId", "parentSpanId") else hexed(item))
                    for key, item in value.items()}
        if isinstance(value, list):
            return [hexed(item) for item in value]
        return value
    return mapped, hexed(mapped)


def jaeger(request):
    traces = {}
    for batch in request["resourceSpans"]:
        service = next(item["value"]["stringValue"] for item in batch["resource"]["attributes"] if item["key"] == "service.name")
        for scope in batch["scopeSpans"]:
            for span in scope["spans"]:
                def tag(item):
                    value = item["value"]
                    kind, raw = next(iter(value.items()))
                    if kind == "arrayValue":
                        return {"key": item["key"], "type": "string", "value": json.dumps([next(iter(v.values())) for v in raw["values"]])}
                    return {"key": item["key"], "type": {"stringValue": "string", "intValue": "int64", "boolValue": "bool"}.get(kind, "float64"),
                            "value": int(raw) if kind == "intValue" else raw}
                tags = [tag(item) for item in span.get("attributes", [])]
                if span.get("status", {}).get("code") == "STATUS_CODE_ERROR":
                    tags += [{"key": "error", "type": "bool", "value": True},
                             {"key": "otel.status_description", "type": "string", "value": span["status"].get("message", "")}]
                entry = traces.setdefault(span["traceId"], {"traceID": span["traceId"], "spans": [], "processes": {"p1": {"serviceName": service}}})
                entry["spans"].append({
                    "traceID": span["traceId"], "spanID": span["spanId"], "operationName": span["name"],
                    "references": [{"refType": "CHILD_OF", "traceID": span["traceId"], "spanID": span["parentSpanId"]}] if span.get("parentSpanId") else [],
                    "startTime": int(span["startTimeUnixNano"]) // 1000,
                    "duration": (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) // 1000,
                    "tags": tags, "logs": [], "processID": "p1"})
    return {"data": list(traces.values())}


def write(name, value):
    with open(os.path.join(out, name), "w") as file:
        json.dump(value, file, indent=1)


genai = genai_traces()
proto, otlp = otlp_json(genai)
write("genai.otlp.json", otlp)
with open(os.path.join(out, "genai.otlp.pb"), "wb") as file:
    file.write(encode_spans(genai).SerializeToString())
write("genai.proto.json", proto)
write("genai.tempo.json", {"batches": otlp["resourceSpans"]})
write("genai.jaeger.json", jaeger(otlp))
write("openllmetry.otlp.json", otlp_json(openllmetry_traces())[1])
write("truncated.otlp.json", otlp_json(genai_traces(SpanLimits(max_span_attribute_length=80)))[1])
