"""A local OTLP/HTTP (JSON) traces receiver for the export tests: every request is decoded
with the official OpenTelemetry protobuf definitions (`opentelemetry-proto`,
`google.protobuf.json_format.Parse` into `ExportTraceServiceRequest`), so the payload is checked
by a real parser, not by ours.

    python scripts/otlp_receiver.py PORT_FILE OUT_DIR [--fail-first N] [--drip | --echo-401]

Listens on 127.0.0.1 (a free port, written to PORT_FILE once listening). Each POST to
/v1/traces is parsed strictly (unknown fields are errors); OTLP/JSON writes trace and span ids
as hex where protobuf's JSON mapping expects base64, so ids are converted first, as collectors
do, and their decoded lengths checked (16 and 8 bytes). A request that parses is answered 200 and
summarised in OUT_DIR/request-K.json (spans with name, ids, attributes, events, status, and the
x-* and authorization headers); one that
does not is answered 400 with the parser's message and recorded in OUT_DIR/rejected-K.txt.
--fail-first N answers the first N requests 503 with retry-after: 0, to test retries.
Two hostile collectors, for an exporter's limits: --drip answers 200 and then sends its body a
byte every half second, for as long as the exporter listens; --echo-401 answers 401 with a body
that echoes every header value it was sent (a token included), as careless gateways do.
"""
import base64
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

port_file, out_dir = sys.argv[1], sys.argv[2]
fail_first = int(sys.argv[sys.argv.index("--fail-first") + 1]) if "--fail-first" in sys.argv else 0
drip = "--drip" in sys.argv
echo_401 = "--echo-401" in sys.argv
state = {"count": 0}


def hex_ids_to_base64(value):
    """OTLP/JSON's hex ids as protobuf JSON's base64; everything else as it is."""
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(item, str):
                result[key] = base64.b64encode(bytes.fromhex(item)).decode() if item else ""
            else:
                result[key] = hex_ids_to_base64(item)
        return result
    if isinstance(value, list):
        return [hex_ids_to_base64(item) for item in value]
    return value


def plain(any_value):
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [plain(item) for item in any_value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: plain(item.value) for item in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        state["count"] += 1
        number = state["count"]
        if drip:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "1000000")
            self.end_headers()
            try:
                for _ in range(2000):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.5)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if echo_401:
            sent = ", ".join("%s: %s" % (key, value) for key, value in self.headers.items())
            self.answer(401, json.dumps({"message": "unauthorized; you sent " + sent}))
            return
        if number <= fail_first:
            self.answer(503, '{"message": "warming up"}', [("retry-after", "0")])
            return
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/json":
            self.answer(404, '{"message": "POST application/json to /v1/traces"}')
            return
        try:
            request = ExportTraceServiceRequest()
            json_format.Parse(json.dumps(hex_ids_to_base64(json.loads(body))), request)
            spans = []
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        if len(span.trace_id) != 16 or len(span.span_id) != 8:
                            raise ValueError(f"span {span.name}: ids of {len(span.trace_id)} and {len(span.span_id)} bytes")
                        if span.parent_span_id and len(span.parent_span_id) != 8:
                            raise ValueError(f"span {span.name}: a parent id of {len(span.parent_span_id)} bytes")
                        spans.append({
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "kind": span.kind,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": {item.key: plain(item.value) for item in span.attributes},
                            "events": [{"name": event.name, "attributes": {item.key: plain(item.value) for item in event.attributes}}
                                       for event in span.events],
                            "status": {"code": span.status.code, "message": span.status.message},
                        })
        except Exception as error:  # the parser's message goes back to the exporter
            with open(os.path.join(out_dir, f"rejected-{number}.txt"), "w") as file:
                file.write(str(error))
            self.answer(400, json.dumps({"message": str(error)}))
            return
        with open(os.path.join(out_dir, f"request-{number}.json"), "w") as file:
            # Only the headers an exporter adds (x-*, authorization), lower-cased.
            headers = {key.lower(): value for key, value in self.headers.items()
                       if key.lower().startswith("x-") or key.lower() == "authorization"}
            json.dump({"spans": spans, "headers": headers}, file, indent=1, sort_keys=True)
        self.answer(200, "{}")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as file:
    file.write(str(server.server_address[1]))
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
