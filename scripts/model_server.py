#!/usr/bin/env python3
"""A local model server for agent-eval's tests: OpenAI Chat Completions and Anthropic
Messages, streamed field by field as the providers' API references describe them.

Usage: python3 scripts/model_server.py
Prints "PORT <n>" once it listens on 127.0.0.1 (an ephemeral port), and stops when its
standard input closes, so a test that dies takes the server with it.

The first path segment names a scenario: POST /<scenario>/v1/chat/completions or
/<scenario>/v1/messages. Each request received (path, headers, body) is appended as a JSON
line to the file named by MODEL_SERVER_REQUESTS, when set.
Scenarios that fail first and then succeed count attempts per scenario.
The hostile scenarios (drip, sse-comments, pings, byte-per-second, huge-stream, huge-line,
huge-json) never stop sending on their own, or send far more than a client should read: they
end when the client goes away.
Standard library only.
"""
import itertools
import json
import re
import os
import socket
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {}
LOCK = threading.Lock()


def openai_chunk(delta=None, finish=None, usage=None, choices=True):
    chunk = {"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": 1, "model": "local-model"}
    chunk["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        chunk["usage"] = usage
    return ("data: " + json.dumps(chunk, ensure_ascii=False) + "\n\n").encode()


def anthropic_event(name, data):
    data = dict(data, type=name)
    return ("event: " + name + "\ndata: " + json.dumps(data) + "\n\n").encode()


DONE = b"data: [DONE]\n\n"
USAGE = {"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}


def openai_answer(text):
    return [openai_chunk({"role": "assistant", "content": ""}), openai_chunk({"content": text}),
            openai_chunk({}, "stop"), openai_chunk(choices=False, usage=USAGE), DONE]


def openai_call(name, arguments, pieces=4, call_id="call_abc"):
    size = max(1, len(arguments) // pieces + 1)
    parts = [arguments[i:i + size] for i in range(0, len(arguments), size)]
    chunks = [openai_chunk({"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]})]
    chunks += [openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts]
    return chunks + [openai_chunk({}, "tool_calls"), openai_chunk(choices=False, usage=USAGE), DONE]


def tool_results(body):
    """How many tool results the conversation holds, for any of the three APIs."""
    count = 0
    if isinstance(body.get("input"), list):
        count += sum(1 for item in body["input"] if isinstance(item, dict) and item.get("type") == "function_call_output")
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            count += 1
        content = message.get("content")
        if isinstance(content, list):
            count += sum(1 for block in content if isinstance(block, dict) and block.get("type") == "tool_result")
    return count


def echoed_results(body):
    """How many tool results a framework wrote back as text (smolagents): assistant messages
    without tool calls that a user message follows."""
    messages = body.get("messages", [])
    return sum(1 for message, following in zip(messages, messages[1:])
               if message.get("role") == "assistant" and not message.get("tool_calls") and following.get("role") == "user")


def tool_names(body):
    """The names of the tools a request declares, for any of the three APIs."""
    names = []
    for tool in body.get("tools", []):
        names.append(tool.get("name") or (tool.get("function") or {}).get("name"))
    return names


def user_text(body):
    """The text of the conversation's user messages, for either provider."""
    texts = []
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [block.get("text", "") for block in content if isinstance(block, dict)]
    return "\n".join(texts)


def last_turn(body):
    """What the newest turn of a conversation holds, for either provider: the text of the last
    user message, and the tool whose result came back after it (None when none did)."""
    names = {}
    user, result = "", None
    # smolagents writes a call back as text ("Calling tools: [{... 'name': 'lookup_order' ...}]")
    # and its result as the next user message ("Observation: ..."), a new turn after it ("New task: ...").
    echoed = None
    for message in body.get("messages", []):
        role, content = message.get("role"), message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        blocks = [block for block in blocks if isinstance(block, dict)]
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                names[call.get("id")] = call["function"]["name"]
            for block in blocks:
                if block.get("type") == "tool_use":
                    names[block.get("id")] = block.get("name")
                elif "Calling tools:" in (block.get("text") or ""):
                    echoed = (re.findall(r"'name': '(\w+)'", block["text"]) or [None])[-1]
        elif role == "user" and echoed and any((block.get("text") or "").startswith("Observation:") for block in blocks):
            text = "\n".join(block.get("text") or "" for block in blocks)
            if "New task:\n" in text:
                user, result = text.rsplit("New task:\n", 1)[1], None
            else:
                result = echoed
            echoed = None
        elif role == "tool":
            result = names.get(message.get("tool_call_id"))
        elif role == "user":
            for block in blocks:
                if block.get("type") == "tool_result":
                    result = names.get(block.get("tool_use_id"))
                elif block.get("type") == "text" and block.get("text"):
                    user, result = block["text"], None
    return {"user": user, "result": result}


def anthropic_stream(blocks, stop_reason, split=3):
    events = [anthropic_event("message_start", {"message": {
        "id": "msg_local", "type": "message", "role": "assistant", "model": "local-model", "content": [],
        "stop_reason": None, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        anthropic_event("ping", {})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(anthropic_event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}))
            events.append(anthropic_event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(anthropic_event("content_block_start", {"index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            text = json.dumps(block["input"])
            size = max(1, len(text) // split + 1)
            for i in range(0, len(text), size):
                events.append(anthropic_event("content_block_delta", {"index": index, "delta": {
                    "type": "input_json_delta", "partial_json": text[i:i + size]}}))
        events.append(anthropic_event("content_block_stop", {"index": index}))
    events.append(anthropic_event("message_delta", {"delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                                    "usage": {"output_tokens": 17}}))
    events.append(anthropic_event("message_stop", {}))
    return events


def new_call_id(prefix):
    """A fresh id per reply, as providers make them: a recording must not depend on it."""
    return prefix + uuid.uuid4().hex[:12]


def chat_whole(call=None, text=None):
    message = {"role": "assistant", "content": text}
    if call:
        message["tool_calls"] = [{"id": call[2], "type": "function",
                                  "function": {"name": call[0], "arguments": json.dumps(call[1])}}]
    return {"id": "chatcmpl-local", "object": "chat.completion", "created": 1, "model": "local-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}], "usage": USAGE}


def anthropic_whole(blocks, stop_reason):
    return {"id": "msg_local", "type": "message", "role": "assistant", "model": "local-model", "content": blocks,
            "stop_reason": stop_reason, "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 17}}


def responses_item(call=None, text=None):
    if call:
        return {"type": "function_call", "id": "fc_" + call[2], "call_id": call[2], "name": call[0],
                "arguments": json.dumps(call[1]), "status": "completed"}
    return {"type": "message", "id": "msg_local", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def responses_whole(item, status="completed"):
    return {"id": "resp_local", "object": "response", "created_at": 1, "status": status, "model": "local-model",
            "output": [item] if item else [], "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None,
            "usage": {"input_tokens": 31, "output_tokens": 12, "total_tokens": 43,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}


def responses_stream(call=None, text=None):
    """The Responses API's streamed events for one output item, as the API reference lists them."""
    number = itertools.count()

    def event(name, data):
        data = dict(data, type=name, sequence_number=next(number))
        return ("event: " + name + "\ndata: " + json.dumps(data) + "\n\n").encode()
    item = responses_item(call, text)
    started = dict(item, status="in_progress")
    events = [event("response.created", {"response": responses_whole(None, "in_progress")}),
              event("response.output_item.added", {"output_index": 0, "item": dict(started, arguments="") if call
                                                   else dict(started, content=[])})]
    if call:
        arguments = item["arguments"]
        for i in range(0, len(arguments), 7):
            events.append(event("response.function_call_arguments.delta",
                                {"item_id": item["id"], "output_index": 0, "delta": arguments[i:i + 7]}))
        events.append(event("response.function_call_arguments.done",
                            {"item_id": item["id"], "output_index": 0, "arguments": arguments}))
    else:
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append(event("response.content_part.added", {"item_id": item["id"], "output_index": 0, "content_index": 0, "part": part}))
        for i in range(0, len(text), 9):
            events.append(event("response.output_text.delta", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                                               "delta": text[i:i + 9], "logprobs": []}))
        events.append(event("response.output_text.done", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                                          "text": text, "logprobs": []}))
        events.append(event("response.content_part.done", {"item_id": item["id"], "output_index": 0, "content_index": 0,
                                                           "part": dict(part, text=text)}))
    events.append(event("response.output_item.done", {"output_index": 0, "item": item}))
    events.append(event("response.completed", {"response": responses_whole(item)}))
    return events


REFUND_STEPS = [("lookup_order", {"order_id": "A-1042"}), ("refund_order", {"order_id": "A-1042", "amount": 25})]
REFUND_ANSWER = "Refunded 25 EUR for order A-1042."


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def plain(self, status, content_type, payload, headers=()):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def stream(self, chunks, close_after=None):
        """Sends each chunk in its own write, chunked transfer encoding, a pause between."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for index, chunk in enumerate(chunks):
            if close_after is not None and index == close_after:
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(("%x\r\n" % len(chunk)).encode() + chunk + b"\r\n")
            self.wfile.flush()
            time.sleep(0.002)
        ending = getattr(self, "ending", None)
        if ending == "reset":
            # The whole reply, end marker included, then the connection reset before the body's end.
            time.sleep(0.05)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if ending == "late":
            # The whole reply, end marker included; the body's end comes 5 s later (or never,
            # when the client has gone).
            time.sleep(5)
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def open_stream(self, content_type="text/event-stream"):
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def send_until_gone(self, chunks, pause=0.0):
        """Sends each chunk of an iterator (chunked transfer encoding), `pause` seconds apart,
        until the iterator ends or the client goes away."""
        try:
            for chunk in chunks:
                self.wfile.write(("%x\r\n" % len(chunk)).encode() + chunk + b"\r\n")
                self.wfile.flush()
                if pause:
                    time.sleep(pause)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        parts = self.path.strip("/").split("/")
        scenario = parts[0]
        body = json.loads(raw or b"{}")
        with LOCK:
            record = {"path": self.path, "headers": dict(self.headers.items()), "body": body}
            if os.environ.get("MODEL_SERVER_REQUESTS"):
                with open(os.environ["MODEL_SERVER_REQUESTS"], "a") as log:
                    log.write(json.dumps(record) + "\n")
            COUNTS[scenario] = COUNTS.get(scenario, 0) + 1
            attempt = COUNTS[scenario]
        anthropic = self.path.endswith("/messages")
        handler = getattr(self, "scenario_" + scenario.replace("-", "_"), None)
        if handler is None:
            self.plain(404, "application/json", json.dumps({"error": {"message": "no scenario " + scenario}}).encode())
            return
        handler(body, attempt, anthropic)

    # --- OpenAI scenarios ---
    def scenario_answer(self, body, attempt, anthropic):
        if anthropic:
            self.stream(anthropic_stream([{"type": "text", "text": "All done: ok."}], "end_turn"))
        else:
            self.stream(openai_answer("All done: ok."))

    def scenario_echo(self, body, attempt, anthropic):
        """Answers with the user's words: a secret the user typed comes back in the answer."""
        text = "You said: " + user_text(body)
        if anthropic:
            self.stream(anthropic_stream([{"type": "text", "text": text}], "end_turn"))
        else:
            self.stream(openai_answer(text))

    def scenario_echo_headers(self, body, attempt, anthropic):
        """Answers with every header of the request, as a debugging upstream does: the key, a
        cookie, an organisation, a custom header all come back in the answer."""
        text = "Your headers: " + json.dumps(dict(self.headers.items()))
        if body.get("stream"):
            self.stream(openai_answer(text))
        else:
            self.plain(200, "application/json", json.dumps(chat_whole(None, text)).encode())

    def scenario_split_args(self, body, attempt, anthropic):
        self.stream(openai_call("lookup_order", json.dumps({"order_id": "A-1042", "note": "fragile"}), pieces=9))

    def scenario_parallel(self, body, attempt, anthropic):
        first = json.dumps({"order_id": "A-1"})
        second = json.dumps({"order_id": "B-2"})
        chunks = [openai_chunk({"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": ""}}]}),
            openai_chunk({"tool_calls": [
                {"index": 1, "id": "call_2", "type": "function", "function": {"name": "lookup_order", "arguments": ""}}]}),
            openai_chunk({"tool_calls": [{"index": 1, "function": {"arguments": second[:7]}}]}),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": first[:5]}}]}),
            openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": first[5:]}}]}),
            openai_chunk({"tool_calls": [{"index": 1, "function": {"arguments": second[7:]}}]}),
            openai_chunk({}, "tool_calls"), openai_chunk(choices=False, usage=USAGE), DONE]
        self.stream(chunks)

    def scenario_text_and_calls(self, body, attempt, anthropic):
        chunks = [openai_chunk({"role": "assistant", "content": "Let me look that up."})]
        chunks += openai_call("lookup_order", json.dumps({"order_id": "A-7"}))[0:]
        self.stream(chunks)

    def scenario_utf8_split(self, body, attempt, anthropic):
        whole = b"".join(openai_answer("caf\u00e9 \u2603 done"))
        cut = whole.index("\u00e9".encode()) + 1  # inside the two bytes of é
        self.stream([whole[:cut], whole[cut:]])

    def scenario_empty(self, body, attempt, anthropic):
        self.stream([openai_chunk({"role": "assistant", "content": ""}), openai_chunk({}, "stop"), DONE])

    def scenario_rate_limited(self, body, attempt, anthropic):
        if attempt == 1:
            self.plain(429, "application/json", json.dumps({"error": {"message": "Rate limit reached", "type": "rate_limit_exceeded"}}).encode(),
                       [("retry-after-ms", "5"), ("retry-after", "1")])
        else:
            self.stream(openai_answer("after the rate limit"))

    def scenario_server_error(self, body, attempt, anthropic):
        if attempt == 1:
            self.plain(500, "application/json", json.dumps({"error": {"message": "The server had an error", "type": "server_error"}}).encode(),
                       [("retry-after-ms", "3")])
        else:
            self.stream(openai_answer("after the 500"))

    def scenario_unauthorized(self, body, attempt, anthropic):
        self.plain(401, "application/json", json.dumps({"error": {
            "message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}}).encode())

    def scenario_forbidden(self, body, attempt, anthropic):
        """A 403 whose message echoes the credential it was sent, as some gateways do."""
        sent = self.headers.get("x-api-key") or self.headers.get("authorization") or "none"
        self.plain(403, "application/json", json.dumps({"error": {
            "message": "Project does not have access to model local-model (credential: " + sent + ", at " + self.path + ")",
            "type": "permission_error"}}).encode())

    def scenario_redirect(self, body, attempt, anthropic):
        """A 307 to the same path under the `answer` scenario: a client that follows it gets a reply."""
        target = "/answer/" + self.path.strip("/").split("/", 1)[1]
        self.plain(307, "text/plain", b"moved", headers=[("Location", target)])

    def scenario_html(self, body, attempt, anthropic):
        self.plain(200, "text/html", b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>")

    def scenario_bad_delta(self, body, attempt, anthropic):
        self.stream([openai_chunk({"role": "assistant", "content": "Hel"}), b"data: {not json\n\n", DONE])

    def scenario_dropped(self, body, attempt, anthropic):
        if attempt == 1:
            self.stream(openai_answer("never finished"), close_after=2)
        else:
            self.stream(openai_answer("after the drop"))

    def scenario_cut_clean(self, body, attempt, anthropic):
        """The first answer's stream ends cleanly before its end marker (no finish, no [DONE]);
        every later one is whole."""
        if attempt == 1:
            self.stream(openai_answer("never finished")[:2])
        else:
            self.stream(openai_answer("whole at last"))

    def scenario_no_done(self, body, attempt, anthropic):
        """A whole answer (its finish reason and usage) whose stream ends without `data: [DONE]`:
        the SDKs read it as whole, since they end at the body's end."""
        self.stream(openai_answer("whole without its marker")[:-1])

    def scenario_slow_then_quick(self, body, attempt, anthropic):
        """The first answer streams slowly (80 deltas, 25 ms apart: whole if read to its end);
        every later one comes at once."""
        if attempt == 1:
            self.open_stream()
            deltas = [openai_chunk({"content": "word%d " % number}) for number in range(80)]
            chunks = [openai_chunk({"role": "assistant", "content": ""})] + deltas + openai_answer("")[2:]
            self.send_until_gone(chunks, pause=0.025)
        else:
            self.stream(openai_answer("the second answer"))

    def scenario_answer_then_cut(self, body, attempt, anthropic):
        """The first answer is whole; every later one's stream ends cleanly before its end marker."""
        if attempt == 1:
            self.stream(openai_answer("the first answer"))
        else:
            self.stream(openai_answer("never finished")[:2])

    def scenario_always_busy(self, body, attempt, anthropic):
        self.plain(503, "application/json", json.dumps({"error": {"message": "busy", "type": "server_error"}}).encode(),
                   [("retry-after-ms", "1")])

    def scenario_agent(self, body, attempt, anthropic):
        """A two-step agent: look the order up, then answer with what came back."""
        done = tool_results(body)
        if done == 0:
            if anthropic:
                self.stream(anthropic_stream([{"type": "text", "text": "Looking it up."},
                                              {"type": "tool_use", "id": "toolu_01", "name": "lookup_order",
                                               "input": {"order_id": "A-1042"}}], "tool_use"))
            else:
                self.stream(openai_call("lookup_order", json.dumps({"order_id": "A-1042"})))
        elif anthropic:
            self.stream(anthropic_stream([{"type": "text", "text": "Order A-1042 is delivered."}], "end_turn"))
        else:
            self.stream(openai_answer("Order A-1042 is delivered."))

    def scenario_research(self, body, attempt, anthropic):
        """The research example: search, read the first result, answer with the source."""
        done = tool_results(body)
        steps = [("web_search", {"query": "zstd vs gzip speed"}, "toolu_s", "call_s"),
                 ("fetch_page", {"url": "https://example.org/zstd-vs-gzip"}, "toolu_f", "call_f")]
        if done < len(steps):
            name, arguments, anthropic_id, openai_id = steps[done]
            if anthropic:
                self.stream(anthropic_stream([{"type": "tool_use", "id": anthropic_id, "name": name, "input": arguments}], "tool_use"))
            else:
                self.stream(openai_call(name, json.dumps(arguments), call_id=openai_id))
            return
        answer = "zstd -3 is about 3x faster than gzip -6 at a similar ratio (https://example.org/zstd-vs-gzip)."
        if anthropic:
            self.stream(anthropic_stream([{"type": "text", "text": answer}], "end_turn"))
        else:
            self.stream(openai_answer(answer))

    def scenario_judge(self, body, attempt, anthropic):
        """A judge: passes what mentions rf-9 (the refund id), fails the rest; the verdict is
        JSON inside a code fence, streamed in pieces."""
        text = user_text(body)
        if "rf-9" in text.split("The rubric")[0]:
            verdict = {"pass": True, "reason": "It names refund rf-9."}
        else:
            verdict = {"pass": False, "reason": "It does not name the refund id."}
        self.judge_reply("```json\n" + json.dumps(verdict) + "\n```", anthropic)

    def scenario_judge_moody(self, body, attempt, anthropic):
        """A judge that cannot make up its mind: pass on odd attempts, fail on even ones."""
        verdict = {"pass": attempt % 2 == 1, "reason": "attempt %d" % attempt}
        self.judge_reply(json.dumps(verdict), anthropic)

    def judge_reply(self, text, anthropic):
        pieces = [text[i:i + 7] for i in range(0, len(text), 7)]
        if anthropic:
            self.stream(anthropic_stream([{"type": "text", "text": text}], "end_turn"))
        else:
            chunks = [openai_chunk({"role": "assistant", "content": ""})]
            chunks += [openai_chunk({"content": piece}) for piece in pieces]
            self.stream(chunks + [openai_chunk({}, "stop"), openai_chunk(choices=False, usage=USAGE), DONE])

    def scenario_hang(self, body, attempt, anthropic):
        """Starts a stream and then says nothing (for Ctrl-C tests); ends when the server does."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        time.sleep(120)

    def reply_steps(self, body, steps, answer):
        """A scripted agent for any of the three APIs, streamed when the request asks: the n-th
        step's call after n tool results, then the answer. Call ids are fresh on every reply."""
        done = tool_results(body) or echoed_results(body)
        call = None
        prefix = "toolu_" if self.path.endswith("/messages") else "call_"
        if done < len(steps):
            call = (steps[done][0], steps[done][1], new_call_id(prefix))
        elif "final_answer" in tool_names(body):
            # A framework whose agents answer through a tool (smolagents) gets its answer so.
            call = ("final_answer", {"answer": answer}, new_call_id(prefix))
        text = None if call else answer
        streamed = bool(body.get("stream"))
        if self.path.endswith("/responses"):
            if streamed:
                self.stream(responses_stream(call, text))
            else:
                self.plain(200, "application/json", json.dumps(responses_whole(responses_item(call, text))).encode())
        elif self.path.endswith("/messages"):
            blocks = [{"type": "tool_use", "id": call[2], "name": call[0], "input": call[1]}] if call else [{"type": "text", "text": text}]
            stop = "tool_use" if call else "end_turn"
            if streamed:
                self.stream(anthropic_stream(blocks, stop))
            else:
                self.plain(200, "application/json", json.dumps(anthropic_whole(blocks, stop)).encode())
        elif streamed:
            self.stream(openai_call(call[0], json.dumps(call[1]), call_id=call[2]) if call else openai_answer(text))
        else:
            self.plain(200, "application/json", json.dumps(chat_whole(call, text)).encode())

    def scenario_refund(self, body, attempt, anthropic):
        """A refund agent for any API: look the order up, refund it, answer."""
        self.reply_steps(body, REFUND_STEPS, REFUND_ANSWER)

    def scenario_refund_keyed(self, body, attempt, anthropic):
        """The refund agent, whose first call's arguments carry a key (`api_key`): the agent sends
        it back in its next request, where a cassette keeps the answer's key redacted."""
        self.reply_steps(body, [("lookup_order", {"order_id": "A-1042", "api_key": "sk-live-ABCDEFGHIJKLMNOPQRST"})] + REFUND_STEPS[1:], REFUND_ANSWER)

    def scenario_refund_sometimes(self, body, attempt, anthropic):
        """The refund agent, except that every fifth conversation it answers at once, refunding
        nothing (for statistical gates: four runs in five pass)."""
        if not (tool_results(body) or echoed_results(body)):
            with LOCK:
                COUNTS["refund-sometimes conversations"] = COUNTS.get("refund-sometimes conversations", 0) + 1
                number = COUNTS["refund-sometimes conversations"]
            if number % 5 == 0:
                return self.plain(200, "application/json", json.dumps(chat_whole(None, "I cannot refund this order.")).encode())
        self.reply_steps(body, REFUND_STEPS, REFUND_ANSWER)

    def scenario_slow_answer(self, body, attempt, anthropic):
        """A whole streamed answer that takes about 1.5 s: for many requests in flight at once."""
        chunks = openai_answer("Slow but sure.")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(("%x\r\n" % len(chunk)).encode() + chunk + b"\r\n")
            self.wfile.flush()
            time.sleep(0.3)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def scenario_refund_reset(self, body, attempt, anthropic):
        """The refund agent, each streamed reply whole and then its connection reset 50 ms after
        the end marker, before the HTTP body's end."""
        self.ending = "reset"
        self.reply_steps(body, REFUND_STEPS, REFUND_ANSWER)

    def scenario_refund_late(self, body, attempt, anthropic):
        """The refund agent, each streamed reply whole but its HTTP body ended 5 s after the end marker."""
        self.ending = "late"
        self.reply_steps(body, REFUND_STEPS, REFUND_ANSWER)

    def scenario_refund_429(self, body, attempt, anthropic):
        """The refund agent, whose first request is refused with a 429 (retry at once)."""
        if attempt == 1:
            error = {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limit reached"}}
            self.plain(429, "application/json", json.dumps(error).encode(), [("retry-after-ms", "1"), ("retry-after", "0")])
            return
        self.reply_steps(body, REFUND_STEPS, REFUND_ANSWER)

    # --- Hostile scenarios: a client must cut them off by its own limits ---
    def scenario_drip(self, body, attempt, anthropic):
        """A valid reply that never ends: a content delta every 0.2 s, for as long as the client listens."""
        self.open_stream()
        if anthropic:
            start = anthropic_stream([{"type": "text", "text": ""}], "end_turn")[:3]
            deltas = (anthropic_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "."}})
                      for _ in range(3000))
        else:
            start = [openai_chunk({"role": "assistant", "content": ""})]
            deltas = (openai_chunk({"content": "."}) for _ in range(3000))
        self.send_until_gone(itertools.chain(start, deltas), pause=0.2)

    def scenario_sse_comments(self, body, attempt, anthropic):
        """A stream of keep-alive comments every 0.5 s and nothing else."""
        self.open_stream()
        self.send_until_gone((b": keep-alive\n\n" for _ in range(1200)), pause=0.5)

    def scenario_pings(self, body, attempt, anthropic):
        """Anthropic's message_start, then a ping every 0.5 s and nothing else."""
        self.open_stream()
        start = anthropic_stream([], "end_turn")[:1]
        self.send_until_gone(itertools.chain(start, (anthropic_event("ping", {}) for _ in range(1200))), pause=0.5)

    def scenario_byte_per_second(self, body, attempt, anthropic):
        """A whole, valid reply, one byte a second."""
        self.open_stream()
        whole = b"".join(anthropic_stream([{"type": "text", "text": "slow"}], "end_turn") if anthropic else openai_answer("slow"))
        self.send_until_gone((whole[i:i + 1] for i in range(len(whole))), pause=1.0)

    HUGE = 256 << 20

    def scenario_huge_stream(self, body, attempt, anthropic):
        """256 MiB of valid content deltas (64 KiB of text each), as fast as they go, then the end."""
        self.open_stream()
        text = "x" * 65536
        if anthropic:
            start = anthropic_stream([{"type": "text", "text": ""}], "end_turn")[:3]
            delta = anthropic_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}})
            end = anthropic_stream([{"type": "text", "text": ""}], "end_turn")[-3:]
        else:
            start = [openai_chunk({"role": "assistant", "content": ""})]
            delta = openai_chunk({"content": text})
            end = openai_answer("")[2:]
        self.send_until_gone(itertools.chain(start, (delta for _ in range(self.HUGE // len(delta))), end))

    def scenario_huge_line(self, body, attempt, anthropic):
        """One line of 256 MiB that never ends."""
        self.open_stream()
        piece = b"x" * 65536
        self.send_until_gone(itertools.chain([b"data: "], (piece for _ in range(self.HUGE // len(piece)))))

    def scenario_huge_json(self, body, attempt, anthropic):
        """A whole (non-streamed) reply of 256 MiB of text."""
        self.open_stream("application/json")
        piece = b"x" * 65536
        self.send_until_gone(itertools.chain([b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'],
                                             (piece for _ in range(self.HUGE // len(piece))),
                                             [b'"}, "finish_reason": "stop"}]}']))

    # --- Anthropic scenarios ---
    def scenario_overloaded(self, body, attempt, anthropic):
        if attempt == 1:
            self.plain(529, "application/json", json.dumps({"type": "error", "error": {
                "type": "overloaded_error", "message": "Overloaded"}}).encode())
        else:
            self.stream(anthropic_stream([{"type": "text", "text": "after 529"}], "end_turn"))

    def scenario_error_event(self, body, attempt, anthropic):
        if attempt == 1:
            events = anthropic_stream([{"type": "text", "text": "partial"}], "end_turn")[:3]
            events.append(anthropic_event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}}))
            self.stream(events)
        else:
            self.stream(anthropic_stream([{"type": "text", "text": "after the error event"}], "end_turn"))

    def scenario_refusal(self, body, attempt, anthropic):
        self.stream(anthropic_stream([{"type": "text", "text": "I can't help with that."}], "refusal"))

    # --- Conversations: an agent that confirms before it refunds, and customers that play the user ---
    def say(self, text, anthropic, call=None, body=None):
        """A reply of text, or of one tool call (name, arguments), in either API: streamed unless
        the request (when given) does not ask for a stream. A text reply to a framework whose
        agents answer through a tool (smolagents' final_answer) is a call of that tool."""
        if body is not None and not call and "final_answer" in tool_names(body):
            call, text = ("final_answer", {"answer": text}), None
        if body is not None and not body.get("stream"):
            prefix = "toolu_" if anthropic else "call_"
            named = (call[0], call[1], new_call_id(prefix)) if call else None
            if anthropic:
                blocks = [{"type": "tool_use", "id": named[2], "name": named[0], "input": named[1]}] if named else [
                    {"type": "text", "text": text}]
                return self.plain(200, "application/json", json.dumps(anthropic_whole(blocks, "tool_use" if named else "end_turn")).encode())
            return self.plain(200, "application/json", json.dumps(chat_whole(named, text)).encode())
        if call:
            if anthropic:
                self.stream(anthropic_stream([{"type": "tool_use", "id": new_call_id("toolu_"), "name": call[0], "input": call[1]}],
                                             "tool_use"))
            else:
                self.stream(openai_call(call[0], json.dumps(call[1]), call_id=new_call_id("call_")))
        elif anthropic:
            self.stream(anthropic_stream([{"type": "text", "text": text}], "end_turn"))
        else:
            self.stream(openai_answer(text))

    def scenario_support_chat(self, body, attempt, anthropic):
        """The agent: asks for the order, reads it back, refunds once the customer says yes."""
        turn = last_turn(body)
        # An input guardrail's question about the user's message (a chat of its own): its verdict.
        if "Is the message above safe?" in turn["user"]:
            return self.say("SAFE", anthropic, body=body)
        if turn["result"] == "refund_order":
            return self.say("Done: a refund of 49.99 EUR for order A-1042 is on its way.", anthropic, body=body)
        if turn["result"] == "lookup_order":
            return self.say("I found order A-1042, an espresso mug set, 49.99 EUR. Shall I refund it in full?", anthropic, body=body)
        if "yes" in turn["user"].lower():
            return self.say(None, anthropic, ("refund_order", {"order_id": "A-1042"}), body=body)
        if "A-1042" in turn["user"]:
            return self.say(None, anthropic, ("lookup_order", {"order_id": "A-1042"}), body=body)
        self.say(getattr(self, "ask_order", "I'm sorry to hear that! What is your order number?"), anthropic, body=body)

    def scenario_support_chat_polite(self, body, attempt, anthropic):
        """The agent, asking for the order in other words (for --user frozen)."""
        self.ask_order = "Oh no, I'm sorry! Could you tell me your order number, please?"
        self.scenario_support_chat(body, attempt, anthropic)

    def scenario_support_chat_then_hang(self, body, attempt, anthropic):
        """The agent answers the user's first turn, then hangs on the second (for kill -9 tests)."""
        if last_turn(body)["user"] and any(m.get("role") == "assistant" for m in body.get("messages", [])):
            return self.scenario_hang(body, attempt, anthropic)
        self.say("I'm sorry to hear that! What is your order number?", anthropic, body=body)

    def scenario_customer(self, body, attempt, anthropic):
        """The simulated user: it is told the agent's messages as the user role."""
        said = last_turn(body)["user"]
        if "order number" in said:
            return self.say("It's A-1042.", anthropic)
        if "Shall I refund" in said:
            return self.say("yes, please", anthropic)
        if "refund of" in said:
            return self.say("great, thanks! ###STOP###", anthropic)
        self.say("hi, my order arrived broken", anthropic)

    def scenario_customer_inventive(self, body, attempt, anthropic):
        """The simulated user, but it invents the order date its scenario says it does not know."""
        if "order number" in last_turn(body)["user"]:
            return self.say("It's A-1042, ordered on March 3.", anthropic)
        return self.scenario_customer(body, attempt, anthropic)

    def scenario_customer_counting(self, body, attempt, anthropic):
        """A user that says "message N" at its N-th turn and stops at its 20th (for the conversation
        benchmark): its own turns come back to it as assistant messages."""
        turn = 1 + sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")
        self.say("message %d%s" % (turn, " ###STOP###" if turn >= 20 else ""), anthropic)

    def scenario_customer_chatty(self, body, attempt, anthropic):
        """A user that never stops."""
        self.say("hi, my order arrived broken" if "starts now" in last_turn(body)["user"] else "and what else?", anthropic)

    def scenario_customer_huge(self, body, attempt, anthropic):
        """A user whose second turn is 40 KB."""
        self.say("hi, my order arrived broken" if "starts now" in last_turn(body)["user"] else "blah " * 8000, anthropic)

    def scenario_customer_calls(self, body, attempt, anthropic):
        """A user that answers with a tool call: no message at all."""
        if "starts now" in last_turn(body)["user"]:
            return self.say("hi, my order arrived broken", anthropic)
        self.say(None, anthropic, ("refund_order", {"order_id": "A-1042"}))


def main():
    # Room for 100 clients connecting at once (socketserver's default backlog is 5).
    ThreadingHTTPServer.request_queue_size = 256
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("PORT %d" % server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
