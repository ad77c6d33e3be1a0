#!/usr/bin/env python3
"""A reference reader and writer of agent-eval logs (docs/log-format.md), in Python's standard
library alone: the way to record runs from agents written in Python, and a second
implementation that the test suite checks against the Swift one, both ways.

    python3 scripts/agent_eval_log.py verify RUN.jsonl.gz     # JSON: intact, ending, problems, digests; exit 0/1/2
    python3 scripts/agent_eval_log.py demo OUT.jsonl.gz       # writes a small run, digests included

As a library:

    from agent_eval_log import LogWriter
    with LogWriter("runs/mine.jsonl.gz", run_id="run-1") as log:
        log.append("run_started", {...}, step=0)
        ...
        log.end_step()                                  # step_ended with the state digest
        log.append("run_stopped", {"reason": "success"})

It follows the spec's normative parts: the envelope and canonical JSON (section 2), numbers
(2.1), the hash chain (3), members, the header and durability flushes (1), reading and torn
tails (5), and the run state and its digest (appendix A).
"""

import base64
import codecs
import fcntl
import hashlib
import json
import math
import struct
import sys
import zlib

GENESIS = "0" * 64
MEMBER_BOUND = 262_144
MAX_DEPTH = 512
KNOWN_KINDS = [
    "run_started", "context_built", "decision_made", "verdict_given", "tool_intended", "tool_completed",
    "approval_recorded", "step_ended", "content_stored", "run_stopped", "run_forked",
]
DURABILITY_POINTS = {"tool_intended", "approval_recorded", "step_ended", "run_stopped", "user_turn"}


# -- Canonical JSON (section 2, 2.1) ------------------------------------------------------------

def _number(value):
    """A double as the spec writes it: shortest round-trip digits, `.0` on integral values, and
    exponent form below 1e-4 or above 2^53 (`1e-05`, `1.5e+16`)."""
    if math.isnan(value) or math.isinf(value):
        return "null"
    text = repr(value)
    magnitude = abs(value)
    if magnitude != 0 and magnitude > 2 ** 53 and "e" not in text:
        # Python keeps decimal form up to 1e16; the spec switches above 2^53.
        sign = "-" if value < 0 else ""
        digits = text.lstrip("-").split(".")[0]
        exponent = len(digits) - 1
        mantissa = digits.rstrip("0")
        text = sign + mantissa[0] + ("." + mantissa[1:] if len(mantissa) > 1 else "") + "e+%02d" % exponent
    return text


def canonical(value):
    """Canonical JSON text: no white space, members sorted by their UTF-8 names, raw UTF-8."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda key: key.encode("utf-8"))
        return "{" + ",".join(json.dumps(key, ensure_ascii=False) + ":" + canonical(value[key]) for key in keys) + "}"
    raise TypeError("not a JSON value: %r" % (value,))


def envelope_line(run_id, seq, step, time_us, kind, prev, data, version=1):
    """One event line, envelope members in the spec's order, without the newline."""
    link = ',"prev":%s' % canonical(prev) if prev is not None else ""
    return ('{"v":%d,"run":%s,"seq":%d,"step":%d,"time_us":%d,"kind":%s%s,"data":%s}' % (
        version, canonical(run_id), seq, step, time_us, canonical(kind), link, canonical(data))).encode("utf-8")


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def _depth(value, limit):
    """Whether `value` nests deeper than `limit` arrays and objects."""
    if limit < 0:
        return True
    if isinstance(value, list):
        return any(_depth(item, limit - 1) for item in value)
    if isinstance(value, dict):
        return any(_depth(item, limit - 1) for item in value.values())
    return False


# -- The run state and its digest (appendix A) -------------------------------------------------

def _pick(data, fields, defaults=None):
    """Re-encoding: only the members this version defines; absent optionals left out."""
    if not isinstance(data, dict):
        return data
    result = {}
    for name, shape in fields.items():
        if name in data and (data[name] is not None or shape == "keep-null"):
            value = data[name]
            result[name] = shape(value) if callable(shape) else value
        elif defaults and name in defaults:
            result[name] = defaults[name]
    return result


_TOOL_SPEC = {"name": 1, "description": 1, "input_schema": 1, "side_effect": 1}
_LIMITS = {"max_steps": 1, "max_tool_calls": 1, "timeout_ms": 1, "token_budget": 1}
_START = {
    "goal": 1, "agent": lambda v: _pick(v, {"name": 1, "version": 1, "config_digest": 1}),
    "model": lambda v: _pick(v, {"provider": 1, "name": 1}), "policy": lambda v: _pick(v, {"name": 1, "digest": 1}),
    "tools": lambda v: [_pick(t, _TOOL_SPEC) for t in v], "limits": lambda v: _pick(v, _LIMITS), "actor": 1, "route": 1,
}
_CALL = {"id": 1, "name": 1, "arguments": "keep-null"}
_DECISION = {"type": 1, "text": 1, "calls": lambda v: [_pick(c, _CALL) for c in v], "question": 1, "reason": 1}
_VERDICT = {"call_id": 1, "tool": 1, "verdict": 1, "reason": 1, "rule": 1}
_APPROVAL = {"call_id": 1, "granted": 1, "approver": 1, "reason": 1}
_RESULT = {
    "call_id": 1, "tool": 1, "attempt": 1, "status": 1, "output": "keep-null", "content_hash": 1, "error": 1, "retryable": 1,
    "stderr": 1, "duration_us": 1,
}
_STOP = {"reason": 1, "limit": 1, "answer": 1, "error": 1}
_USER_TURN = {
    "turn": 1, "text": 1, "source": 1, "ends": 1, "line": 1, "model": lambda v: _pick(v, {"provider": 1, "name": 1}),
    "usage": lambda v: _pick(v, {"input": 1, "output": 1}), "cost_usd": float, "latency_us": 1,
    "sampling": lambda v: _pick(v, {"temperature": float, "max_tokens": 1, "seed": 1}),
}
USER_TURN_SOURCES = {"opening", "script", "model", "given"}
USER_TURN_ENDINGS = {"user_stop", "user_transfer", "user_out_of_scope"}
CONVERSATION_VERSION = 4  # user_turn and a conversation's endings (section 6)
CONVERSATION_ENDINGS = {"user_stop", "user_transfer", "user_out_of_scope", "agent_stop", "max_turns"}
_EDIT = {"kind": 1, "call_id": 1, "step": 1, "tool": 1, "text": 1, "value": "keep-null"}
_FORKED = {
    "parent_run_id": 1, "parent_head": 1, "step": 1, "parent_log": 1, "edits": lambda v: [_pick(e, _EDIT) for e in v],
    "agent": lambda v: _pick(v, {"name": 1, "version": 1, "config_digest": 1}), "model": lambda v: _pick(v, {"provider": 1, "name": 1}),
}


class RunState:
    """The fold of a log's events (appendix A.2)."""

    def __init__(self):
        self._imported = False
        self.run_id = None
        self.start = None
        self.started_at_us = None
        self.last_event_at_us = None
        self.event_count = 0
        self.step = 0
        self.steps_completed = 0
        self.context_packet_count = 0
        self.last_token_estimate = None
        self.decisions = []
        self.calls = []
        self.usage = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "model_calls": 0, "model_latency_us": 0,
                      "tool_attempts": 0, "tool_time_us": 0}
        self.contents = []
        self.last_state_digest = None
        self.stop = None
        self.resume_count = 0
        self.forked = None
        self.unknown_event_count = 0
        self.anomalies = []
        self.user_turns = []

    def _note(self, seq, kind, message):
        self.anomalies.append({"seq": seq, "message": "event %d (%s): %s" % (seq, kind, message)})

    def _call(self, call_id, seq, kind):
        for index in range(len(self.calls) - 1, -1, -1):
            if self.calls[index]["id"] == call_id:
                return self.calls[index]
        self._note(seq, kind, 'names call "%s", which no decision proposed' % call_id)
        return None

    def _check_tool(self, call, data, seq, kind, what):
        if data["tool"] != call["tool"]:
            self._note(seq, kind, '%s "%s" for call "%s", which proposed "%s"' % (what, data["tool"], call["id"], call["tool"]))

    @staticmethod
    def _permitted(call):
        verdict = (call.get("verdict") or {}).get("verdict")
        if verdict == "allow":
            return True
        return verdict == "approval_required" and (call.get("approval") or {}).get("granted") is True

    def fold(self, event):
        seq, kind, data, step = event["seq"], event["kind"], event["data"], event["step"]
        # A user_turn is known from version 4 on; an older line naming it is an unknown kind.
        is_user_turn = kind == "user_turn" and event.get("v", 1) >= CONVERSATION_VERSION
        self.event_count += 1
        if self.run_id is None:
            self.run_id = event["run"]
        elif self.run_id != event["run"]:
            self._note(seq, kind, 'belongs to run "%s", not to "%s"' % (event["run"], self.run_id))
        self.last_event_at_us = event["time_us"]
        self.step = step
        if self.stop is not None:
            if kind == "approval_recorded" and self.stop.get("reason") == "approval_required":
                self.stop = None
                self.resume_count += 1
            elif kind in KNOWN_KINDS or is_user_turn:
                self._note(seq, kind, "%s after the run stopped" % kind)
        if kind == "run_started":
            if self.start is not None:
                self._note(seq, kind, "a second run_started")
            else:
                self.start = _pick(data, _START, {"tools": [], "limits": {}})
                self.started_at_us = event["time_us"]
                # An imported or recorded run (A.2): no policy gate where it ran, no verdicts.
                # Not part of the state: its `start` is re-encoded without `source` (A.3).
                self._imported = data.get("source") is not None
        elif kind == "context_built":
            self.context_packet_count += 1
            self.last_token_estimate = data["token_estimate"]
        elif kind == "decision_made":
            record = {"step": step, "seq": seq}
            # A side conversation's reply (a recorded program's), in the state only when true.
            if data.get("aside") is True:
                record["aside"] = True
            if data.get("decision") is not None:
                record["decision"] = _pick(data["decision"], _DECISION)
            else:
                record["invalid"] = _pick(data["invalid"], {"kind": 1, "message": 1})
            if data.get("usage") is not None:
                record["usage"] = _pick(data["usage"], {"input": 1, "output": 1})
                self.usage["input_tokens"] += data["usage"]["input"]
                self.usage["output_tokens"] += data["usage"]["output"]
            self.decisions.append(record)
            self.usage["model_calls"] += 1
            self.usage["cost_usd"] += float(data.get("cost_usd") or 0)
            self.usage["model_latency_us"] += data.get("latency_us") or 0
            decision = data.get("decision") or {}
            if decision.get("type") == "tool_calls":
                for proposed in decision["calls"]:
                    if any(call["id"] == proposed["id"] for call in self.calls):
                        self._note(seq, kind, 'proposes call id "%s" a second time' % proposed["id"])
                    self.calls.append({"id": proposed["id"], "tool": proposed["name"], "step": step,
                                       "arguments": proposed.get("arguments"), "attempts": 0, "results": []})
        elif kind == "verdict_given":
            call = self._call(data["call_id"], seq, kind)
            if call is not None:
                self._check_tool(call, data, seq, kind, "a verdict on tool")
                if "verdict" in call:
                    self._note(seq, kind, 'a second verdict for call "%s"' % data["call_id"])
                else:
                    call["verdict"] = _pick(data, _VERDICT)
        elif kind == "tool_intended":
            call = self._call(data["call_id"], seq, kind)
            if call is not None:
                self._check_tool(call, data, seq, kind, "starts tool")
                if not self._permitted(call) and not self._imported:
                    self._note(seq, kind, 'tool "%s" started for call "%s" without an allow verdict' % (data["tool"], data["call_id"]))
                call["attempts"] += 1
                self.usage["tool_attempts"] += 1
        elif kind == "tool_completed":
            call = self._call(data["call_id"], seq, kind)
            if call is not None:
                self._check_tool(call, data, seq, kind, "a result of tool")
                if len(call["results"]) >= call["attempts"]:
                    self._note(seq, kind, 'a result for call "%s" with no tool_intended before it' % data["call_id"])
                call["results"].append(_pick(data, _RESULT))
                self.usage["tool_time_us"] += data["duration_us"]
        elif kind == "approval_recorded":
            call = self._call(data["call_id"], seq, kind)
            if call is not None:
                if (call.get("verdict") or {}).get("verdict") != "approval_required":
                    self._note(seq, kind, 'an approval for call "%s", which did not require one' % data["call_id"])
                call["approval"] = _pick(data, _APPROVAL)
        elif kind == "step_ended":
            self.steps_completed += 1
            self.last_state_digest = data["state_digest"]
        elif kind == "content_stored":
            body = data["body"]
            size = len(base64.b64decode(body)) if data.get("encoding") == "base64" else len(body.encode("utf-8"))
            self.contents.append({"hash": data["hash"], "media_type": data["media_type"], "byte_count": size})
        elif kind == "run_stopped":
            self.stop = _pick(data, _STOP)
        elif is_user_turn:
            expected = (self.user_turns[-1]["turn"].get("turn", 0) if self.user_turns else 0) + 1
            if data.get("turn") != expected:
                self._note(seq, kind, "user turn %s where turn %d comes next (turns are numbered 1, 2, 3… in order)" % (
                    data.get("turn"), expected))
            self.user_turns.append({"step": step, "seq": seq, "turn": _pick(data, _USER_TURN)})
        elif kind == "run_forked":
            self.forked = _pick(data, _FORKED, {"edits": []})
            for edit in data.get("edits") or []:
                if edit["kind"] in ("result", "error"):
                    if edit.get("call_id") is None:
                        self._note(seq, kind, "a %s edit names no call" % edit["kind"])
                        continue
                    call = self._call(edit["call_id"], seq, kind)
                    if call is None:
                        continue
                    if not call["results"]:
                        # A recorded run's fork edits a result before it comes (run_started has a source).
                        if not self._imported:
                            self._note(seq, kind, 'edits the result of call "%s", which has none' % edit["call_id"])
                        continue
                    last = call["results"][-1]
                    replaced = {"call_id": edit["call_id"], "tool": last["tool"], "attempt": last["attempt"], "duration_us": 0}
                    if edit["kind"] == "result":
                        replaced["status"] = "ok"
                        replaced["output"] = edit.get("value")
                    else:
                        replaced["status"] = "error"
                        replaced["error"] = edit.get("text") or ""
                    call["results"][-1] = replaced
                elif edit["kind"] == "input" and self.start is not None and edit.get("text") is not None:
                    self.start["goal"] = edit["text"]
        else:
            self.unknown_event_count += 1

    def json(self):
        """The state's JSON (A.1), lists in full."""
        calls = []
        for call in self.calls:
            calls.append({key: value for key, value in call.items()})
        state = {
            "event_count": self.event_count, "step": self.step, "steps_completed": self.steps_completed,
            "context_packet_count": self.context_packet_count, "decisions": self.decisions, "calls": calls,
            "usage": self.usage, "contents": self.contents, "resume_count": self.resume_count,
            "unknown_event_count": self.unknown_event_count, "anomalies": self.anomalies,
        }
        for name in ["run_id", "start", "started_at_us", "last_event_at_us", "last_token_estimate", "last_state_digest", "stop",
                     "forked"]:
            value = getattr(self, name)
            if value is not None:
                state[name] = value
        if self.user_turns:  # only a conversation has the member (A.1)
            state["user_turns"] = self.user_turns
        return state

    def digest(self):
        """`sha256:` of the digest view: `start` hashed, each list as {count, chain}."""
        view = self.json()
        if "start" in view:
            view["start"] = "sha256:" + sha256_hex(canonical(view["start"]).encode("utf-8"))
        for name in ["decisions", "calls", "contents", "anomalies", "user_turns"]:
            if name not in view:
                continue
            chain = GENESIS
            for element in view[name]:
                chain = sha256_hex((chain + "\n").encode("utf-8") + canonical(element).encode("utf-8"))
            view[name] = {"count": len(view[name]), "chain": chain}
        return "sha256:" + sha256_hex(canonical(view).encode("utf-8"))


# -- Writing (section 1) -----------------------------------------------------------------------

class LogWriter:
    """Appends events to a new log: gzip members with the spec's header, a sync flush at every
    durability point, a member closed at the bound and at run_stopped. Keeps the fold, so
    `end_step()` records the state digest.

    `version` 3 (the default) links members (section 3): only a member's first line carries
    `prev`, the hash of the member before, and run_stopped begins a member of its own; version 1
    links every line to the line before."""

    def __init__(self, path, run_id, level=4, version=3):
        if version not in (1, 3):
            raise ValueError("writes versions 1 and 3, not %r" % version)
        self.version = version
        self._member = b""
        self.file = open(path, "xb")
        # One writer at a time (section 1): released by the kernel if the process dies.
        fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.run_id = run_id
        self.level = level
        self.seq = 0
        self.prev = GENESIS
        self.step = 0
        self.state = RunState()
        self._deflate = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _open_member(self):
        header = bytes([0x1F, 0x8B, 0x08, 0x02, 0, 0, 0, 0, 0, 0xFF])
        self.file.write(header + struct.pack("<H", zlib.crc32(header) & 0xFFFF))
        self._deflate = zlib.compressobj(self.level, zlib.DEFLATED, -15)
        self._crc = 0
        self._size = 0

    def _close_member(self):
        if self._deflate is None:
            return
        if self.version == 3:
            self.prev = sha256_hex(self._member)
            self._member = b""
        self.file.write(self._deflate.flush(zlib.Z_FINISH))
        self.file.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))
        self.file.flush()
        self._deflate = None

    def append(self, kind, data, step=None, time_us=None):
        """Appends one event; returns it as a dict. Refuses what readers reject."""
        step = self.step if step is None else step
        if self.seq == 0 and kind != "run_started":
            raise ValueError("the first event of a log must be run_started, not %s" % kind)
        if step < self.step:
            raise ValueError("steps never decrease: %d after %d" % (step, self.step))
        if _depth(data, MAX_DEPTH - 2):
            raise ValueError("the event nests deeper than %d levels" % MAX_DEPTH)
        if time_us is None:
            import time
            time_us = int(time.time() * 1_000_000)
        if self.version == 3 and kind == "run_stopped" and self._deflate is not None:
            self._close_member()  # the stop begins a member whose link covers every event before it
        # A conversation's user turn and ending are version 4 lines of a version 3 log (section 6).
        conversational = (kind == "user_turn" or (kind == "run_stopped" and data.get("reason") in CONVERSATION_ENDINGS)
                          or (kind == "run_forked" and any(edit.get("kind") == "say" for edit in data.get("edits") or [])))
        if conversational and self.version == 1:
            raise ValueError("a conversation's %s needs a version 3 log (its line is version 4)" % kind)
        line_version = CONVERSATION_VERSION if conversational else self.version
        prev = self.prev if self.version == 1 or self._deflate is None else None
        line = envelope_line(self.run_id, self.seq, step, time_us, kind, prev, data, line_version)
        event = {"v": line_version, "run": self.run_id, "seq": self.seq, "step": step, "time_us": time_us, "kind": kind,
                 "prev": prev, "data": json.loads(line)["data"]}
        if self._deflate is None:
            self._open_member()
        content = line + b"\n"
        if self.version == 3:
            self._member += content
        self.file.write(self._deflate.compress(content))
        self._crc = zlib.crc32(content, self._crc)
        self._size += len(content)
        if self.version == 1:
            self.prev = sha256_hex(line)
        self.seq += 1
        self.step = step
        self.state.fold(event)
        if self._size >= MEMBER_BOUND or kind == "run_stopped":
            self._close_member()
        elif kind in DURABILITY_POINTS:
            self.file.write(self._deflate.flush(zlib.Z_SYNC_FLUSH))
            self.file.flush()
        return event

    def end_step(self, time_us=None):
        """Records step_ended with the digest of the state so far, and moves to the next step."""
        event = self.append("step_ended", {"state_digest": self.state.digest()}, time_us=time_us)
        self.step += 1
        return event

    def close(self):
        self._close_member()
        self.file.close()


# -- Reading and verifying (sections 3, 5) -----------------------------------------------------

PACKET_LISTS = ("observations", "tools_disclosed", "evidence", "memory", "omitted")
UNKNOWN_BASE = (-1, {})


def _resolve_packet(event, base):
    """The whole packet of a context_built event (section 4): a version 2 line with base_seq
    holds each list as copies [start, count] of the base packet's list and items of its own.
    `base` is (seq, whole packet) of the log's previous packet, None when there is none, or
    UNKNOWN_BASE when events before it were lost: then copies are taken as they are."""
    data = event["data"]
    if event["v"] < 2 or data.get("base_seq") is None:
        for name in PACKET_LISTS:
            if event["v"] >= 2 and any(isinstance(item, list) for item in data.get(name) or []):
                raise ValueError("%s copies from a base packet, but the packet has no base_seq" % name)
        return data
    base_seq = data["base_seq"]
    if not isinstance(base_seq, int) or isinstance(base_seq, bool):
        raise ValueError("base_seq must be an integer")
    if base is None:
        raise ValueError("a delta on seq %d, but no context_built comes before it" % base_seq)
    if base is not UNKNOWN_BASE and base[0] != base_seq:
        raise ValueError("a delta on seq %d, but the packet before it is seq %d" % (base_seq, base[0]))
    whole = dict(data)
    del whole["base_seq"]
    for name in PACKET_LISTS:
        items = []
        for position, edit in enumerate(data.get(name) or []):
            if not isinstance(edit, list):
                items.append(edit)
                continue
            if (len(edit) != 2 or any(not isinstance(n, int) or isinstance(n, bool) for n in edit) or edit[0] < 0
                    or edit[1] < 1):
                raise ValueError("%s[%d] must be a copy [start, count] with start >= 0 and count >= 1" % (name, position))
            start, count = edit
            if base is UNKNOWN_BASE:
                items.extend([None] * count)  # what it copies was not read; only the count is known
                continue
            available = base[1].get(name) or []
            if start + count > len(available):
                raise ValueError("%s[%d] copies past the end of the base packet's %d items" % (name, position, len(available)))
            items.extend(available[start:start + count])
        whole[name] = items
    return whole


def json_prefix_problem(data):
    """The offset of the first byte at which `data` stops being the start of a JSON object text
    (RFC 8259 read up to the last byte, where anything may stop: inside a string, an escape, a
    number, a literal or a UTF-8 character), or None when it is one: what a line cut short by a
    tear must be (section 5)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError as error:
        return error.start
    # A character cut at the end: its second byte, when there, must be in the lead byte's range
    # (the incremental decoder lets the start of a surrogate, ED A0, through).
    for back in (2, 3):
        if len(data) >= back and data[-back] >= 0xC0:
            lead, second = data[-back], data[-back + 1]
            low, high = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}.get(lead, (0x80, 0xBF))
            length = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            if back < length and not low <= second <= high:
                return len(data) - back + 1
            break
    space, digits, hexdigits = b" \t\r\n", b"0123456789", b"0123456789abcdefABCDEF"
    between = {"start", "name_or_end", "name", "colon", "value", "value_or_end", "next", "done", "zero", "integer",
               "fraction", "exp_digits"}
    state, is_name, count, literal, stack = "start", False, 0, b"", []
    for index, byte in enumerate(data):
        char = bytes([byte])
        if byte < 0x20 and not (char in space and state in between):
            return index
        if state == "string":
            if char == b"\\":
                state = "escape"
            elif char == b'"':
                state = "colon" if is_name else "next"
            continue
        if state == "escape":
            if char == b"u":
                state, count = "unicode", 0
            elif char in b'"\\/bfnrt':
                state = "string"
            else:
                return index
            continue
        if state == "unicode":
            if char not in hexdigits:
                return index
            count += 1
            state = "string" if count == 4 else "unicode"
            continue
        if state == "literal":
            if byte != literal[count]:
                return index
            count += 1
            state = "next" if count == len(literal) else "literal"
            continue
        if state in ("minus", "point", "exp", "exp_sign"):
            if state == "minus" and char in digits:
                state = "zero" if char == b"0" else "integer"
            elif state == "point" and char in digits:
                state = "fraction"
            elif state == "exp" and char in b"+-":
                state = "exp_sign"
            elif state in ("exp", "exp_sign") and char in digits:
                state = "exp_digits"
            else:
                return index
            continue
        if state in ("zero", "integer", "fraction", "exp_digits"):
            if char in digits and state != "zero":
                continue
            if char == b"." and state in ("zero", "integer"):
                state = "point"
                continue
            if char in b"eE" and state in ("zero", "integer", "fraction"):
                state = "exp"
                continue
            state = "next"  # the number ended: the byte is what follows a value
        if char in space:
            if state == "done":
                return index
            continue
        if state == "start":
            if char != b"{":
                return index
            stack.append("{")
            state = "name_or_end"
        elif state in ("name_or_end", "name"):
            if char == b'"':
                state, is_name = "string", True
            elif char == b"}" and state == "name_or_end":
                stack.pop()
                state = "next" if stack else "done"
            else:
                return index
        elif state == "colon":
            if char != b":":
                return index
            state = "value"
        elif state in ("value", "value_or_end"):
            if char == b"]" and state == "value_or_end":
                stack.pop()
                state = "next" if stack else "done"
            elif char in b"{[":
                stack.append(char.decode())
                state = "name_or_end" if char == b"{" else "value_or_end"
            elif char == b'"':
                state, is_name = "string", False
            elif char == b"-":
                state = "minus"
            elif char in digits:
                state = "zero" if char == b"0" else "integer"
            elif char in b"tfn":
                literal = {b"t": b"true", b"f": b"false", b"n": b"null"}[char]
                state, count = "literal", 1
            else:
                return index
        elif state == "next":
            if char == b"," and stack and stack[-1] == "{":
                state = "name"
            elif char == b"," and stack:
                state = "value"
            elif stack and char == {"{": b"}", "[": b"]"}[stack[-1]]:
                stack.pop()
                state = "next" if stack else "done"
            else:
                return index
        else:  # done
            return index
    return None


def _problem(code, message, seq=None, member=None):
    return {"code": code, "message": message, "seq": seq, "member_offset": member}


def _is_hash(value):
    """A member typed `hash` (section 4): `sha256:` and 64 lowercase hex digits."""
    return isinstance(value, str) and len(value) == 71 and value.startswith("sha256:") and all(
        c in "0123456789abcdef" for c in value[7:])


def _malformed_hash(kind, data):
    """The field path of the first `hash` member of a known kind that is not one, or None."""
    found = []

    def check(value, path):
        if value is not None and not found and not _is_hash(value):
            found.append(path)

    def member(value, name):
        return value.get(name) if isinstance(value, dict) else None

    if kind == "run_started":
        check(member(data.get("agent"), "config_digest"), "data.agent.config_digest")
        check(member(data.get("policy"), "digest"), "data.policy.digest")
    elif kind == "context_built":
        for name in ("observations", "evidence", "memory"):
            for index, item in enumerate(data.get(name) or []):
                check(member(item, "content_hash"), "data.%s[%d].content_hash" % (name, index))
        check(data.get("prompt_hash"), "data.prompt_hash")
    elif kind == "tool_completed":
        check(data.get("content_hash"), "data.content_hash")
    elif kind == "step_ended":
        check(data.get("state_digest"), "data.state_digest")
    elif kind == "content_stored":
        check(data.get("hash"), "data.hash")
    elif kind == "run_forked":
        check(member(data.get("agent"), "config_digest"), "data.agent.config_digest")
    return found[0] if found else None


SEAL_MAGIC = b"agent-eval seal v2 "


def side_file(path, data):
    """What `<log>.seal` is to the log whose bytes are `data` (section 8): None when there is
    none, "pending" when it is a complete seal bound to this log as it is now, "stray" when it is
    not (or was cut off while written, before the log was touched: readers ignore it)."""
    try:
        with open(path + ".seal", "rb") as handle:
            head = handle.read(1024)
            newline = head.find(b"\n")
            if newline < 0 or not head.startswith(SEAL_MAGIC):
                return "stray"
            fields = dict(part.split(b"=", 1) for part in head[len(SEAL_MAGIC):newline].split(b" ") if b"=" in part)
            offset, length, size = (int(fields[name]) for name in (b"offset", b"length", b"size"))
            before, torn = fields[b"before"].decode("ascii"), fields[b"torn"].decode("ascii")
            handle.seek(newline + 1)
            member = handle.read()
    except FileNotFoundError:
        return None
    except (KeyError, ValueError, UnicodeDecodeError):
        return "stray"
    if offset < 0 or length < 0 or len(member) != length or len(data) < offset:
        return "stray"
    if sha256_hex(data[max(0, offset - 65536):offset]) != before:
        return "stray"
    tail = data[offset:]
    if (len(data) == size and sha256_hex(tail) == torn) or member.startswith(tail):
        return "pending"
    return "stray"


def verify(path):
    """Reads the whole log and reports what a conforming verifier finds, plus the fold's state
    digest and whether every recorded digest matches the fold."""
    data = open(path, "rb").read()
    problems, events = [], []
    warnings = []
    side = side_file(path, data)
    if side == "pending":
        # An interrupted seal (section 8): the log may lack what the side file holds.
        problems.append(_problem("pending_seal", "a seal of this log was interrupted", None, None))
    elif side == "stray":
        # Not a seal of this log as it is now (section 8): reported, and ignored.
        warnings.append("stray_seal")
    offset, ending = 0, "complete"
    expected_seq, prev, run_id, last_step = 0, GENESIS, None, None
    log_version = None  # 1: lines link (versions 1 and 2); 3: members link (section 3)
    chained_first = None  # version 3: the first seq of the member `prev` is the hash of
    packet = None  # (seq, whole packet) of the last context_built, the base of a delta
    state = RunState()
    digests_checked, digest_mismatches = 0, []
    if not data:
        # No member at all: empty, not a member cut off (section 5).
        return {"readable": False, "intact": False, "event_count": 0, "problems": ["empty"]}
    if not b"\x1f\x8b".startswith(data[:2]):  # one byte of a header is a file cut short, not another format
        return {"readable": False, "intact": False, "event_count": 0, "problems": ["not_gzip"]}
    while offset < len(data):
        start = offset
        if len(data) - offset < 10:
            if bytes([0x1F, 0x8B, 0x08]).startswith(data[offset:offset + 3]):
                # A header cut short: the next member was begun, then the file cut (section 5).
                ending = "torn"
                problems.append(_problem("torn_tail", "the file ends inside a member's header", expected_seq, start))
            else:
                problems.append(_problem("corrupt_member", "stray bytes after the last member", expected_seq, start))
            break
        header = data[offset:offset + 10]
        flags = header[3]
        if header[:3] != b"\x1f\x8b\x08" or flags & 0x1C:
            problems.append(_problem("corrupt_member", "not a version 1 member header", expected_seq, start))
            break
        offset += 10 + (2 if flags & 0x02 else 0)
        inflater = zlib.decompressobj(-15)
        try:
            content = inflater.decompress(data[offset:])
        except zlib.error as error:
            problems.append(_problem("corrupt_member", "damaged deflate data: %s" % error, expected_seq, start))
            break
        complete = inflater.eof
        if complete:
            consumed = len(data) - offset - len(inflater.unused_data)
            trailer = data[offset + consumed:offset + consumed + 8]
            # The file ends inside the trailer: a member cut short like any other (section 5).
            complete = len(trailer) == 8
        if complete:
            if struct.unpack("<II", trailer) != (zlib.crc32(content) & 0xFFFFFFFF, len(content) & 0xFFFFFFFF):
                problems.append(_problem("corrupt_member", "the member's CRC or size does not check", expected_seq, start))
                break
            offset += consumed + 8
        lines = content.split(b"\n")
        partial = lines.pop()
        if complete and partial:
            problems.append(_problem("split_event", "the member ends inside an event", expected_seq, start))
            break
        member_first = None  # the first seq of this member's events
        for index, line in enumerate(lines):
            seq_here = expected_seq
            try:
                event = json.loads(line.decode("utf-8"))
                assert isinstance(event, dict)
                assert event.get("v") in (1, 2, 3, 4) or (_ for _ in ()).throw(ValueError("unsupported version"))
                for name, kind in [("run", str), ("seq", int), ("step", int), ("time_us", int), ("kind", str), ("prev", str),
                                   ("data", dict)]:
                    if name == "prev" and event.get("v", 0) >= 3 and "prev" not in event:
                        continue  # a version 3 line carries prev only first in a member
                    if not isinstance(event.get(name), kind) or isinstance(event.get(name), bool):
                        raise ValueError("%s is missing or mistyped" % name)
                if (event["kind"] == "run_stopped" and event["data"].get("reason") in CONVERSATION_ENDINGS
                        and event["v"] < CONVERSATION_VERSION):
                    raise ValueError("data.reason %r is a conversation's ending, which only a version 4 line may record"
                                     % event["data"]["reason"])
                if (event["kind"] == "run_forked" and event["v"] < CONVERSATION_VERSION
                        and any(isinstance(edit, dict) and edit.get("kind") == "say" for edit in event["data"].get("edits") or [])):
                    raise ValueError("a say edit is a conversation's, which only a version 4 line may record")
                if event["kind"] == "user_turn" and event["v"] >= CONVERSATION_VERSION:
                    said = event["data"]
                    turn = said.get("turn")
                    if not isinstance(turn, int) or isinstance(turn, bool) or turn < 1:
                        raise ValueError("data.turn must be an int of 1 or more")
                    if not isinstance(said.get("text"), str):
                        raise ValueError("data.text is missing or not a string")
                    if said.get("source") not in USER_TURN_SOURCES:
                        raise ValueError("data.source is not one of %s" % sorted(USER_TURN_SOURCES))
                    if said.get("ends") is not None and said["ends"] not in USER_TURN_ENDINGS:
                        raise ValueError("data.ends is not one of %s" % sorted(USER_TURN_ENDINGS))
                malformed = _malformed_hash(event["kind"], event["data"])
                if malformed:
                    raise ValueError("%s is not a hash (sha256: and 64 lowercase hex digits)" % malformed)
            except (ValueError, UnicodeDecodeError, AssertionError) as error:
                problems.append(_problem("invalid_event", "line is not a valid event: %s" % error, seq_here, start))
                expected_seq += 1
                if log_version != 3:
                    prev = sha256_hex(line)
                continue
            line_version = 3 if event["v"] >= 3 else 1
            log_version = log_version or line_version
            if line_version != log_version:
                problems.append(_problem("invalid_event", "a version %d line in a log of another version" % event["v"], event["seq"], start))
            carries_link = True
            if log_version == 3 and line_version == 3:
                carries_link = index == 0
                if (event.get("prev") is not None) != carries_link:
                    problems.append(_problem("broken_chain", "prev on a line that is not a member's first, or none on one that is",
                                             event["seq"], start))
                    carries_link = False
            if line.endswith(b"\r"):
                problems.append(_problem("invalid_event", "line ends with a carriage return", event["seq"], start))
            if event.get("prev") is not None and (len(event["prev"]) != 64 or any(c not in "0123456789abcdef" for c in event["prev"])):
                problems.append(_problem("invalid_event", "prev is not 64 lowercase hex digits", event["seq"], start))
            if event["seq"] == 0 and event["kind"] != "run_started":
                problems.append(_problem("invalid_event", "the first event must be run_started", 0, start))
            if last_step is not None and event["step"] < last_step:
                problems.append(_problem("invalid_event", "steps never decrease", event["seq"], start))
            last_step = event["step"] if last_step is None else max(last_step, event["step"])
            if run_id is None:
                run_id = event["run"]
            elif event["run"] != run_id:
                problems.append(_problem("run_mismatch", "an event of another run", event["seq"], start))
            if event["seq"] < expected_seq:
                problems.append(_problem("sequence_repeat", "a sequence number repeats", event["seq"], start))
            elif event["seq"] > expected_seq:
                problems.append(_problem("sequence_gap", "sequence numbers skip", expected_seq, start))
            elif carries_link and event.get("prev") is not None and event["prev"] != prev:
                # Version 3: reported at the first seq of the member that was changed.
                at = chained_first if log_version == 3 and chained_first is not None else event["seq"] - 1
                problems.append(_problem("broken_chain", "the hash chain breaks", at, start))
            if member_first is None:
                member_first = event["seq"]
            if event["seq"] != seq_here:
                packet = UNKNOWN_BASE  # events lost or repeated may hold a delta's base: the next is taken as it is
            if event["kind"] == "context_built":
                try:
                    whole = _resolve_packet(event, packet)
                    packet = (event["seq"], whole)
                except ValueError as error:
                    problems.append(_problem("invalid_event", "context_built: %s" % error, event["seq"], start))
                    packet = UNKNOWN_BASE  # one bad delta is one problem
            if event["kind"] == "step_ended":
                digests_checked += 1
                computed = state.digest()
                if computed != event["data"].get("state_digest"):
                    digest_mismatches.append(event["seq"])
            state.fold(event)
            events.append(event)
            expected_seq = max(expected_seq, event["seq"] + 1)
            if log_version != 3:
                prev = sha256_hex(line)
        if log_version == 3 and lines:
            # The next member links to this one's complete lines (section 3).
            prev = sha256_hex(b"".join(line + b"\n" for line in lines))
            chained_first = member_first
        if not complete:
            # A tear cuts the next line short; it does not change it (section 5).
            version = "2" if partial[5:6] == b"2" else "1"  # a delta packet's line is version 2
            if log_version == 3 or (log_version is None and partial[5:6] == b"3"):
                # A conversation's user turn or ending is a version 4 line of a version 3 log.
                version = "4" if partial[5:6] == b"4" else "3"
            template = ('{"v":%s,"run":%s,"seq":%d,"step":' % (version, canonical(run_id), expected_seq)).encode("utf-8")
            if run_id is not None and not template.startswith(partial[:len(template)]):
                problems.append(_problem("corrupt_member", "the partial line does not begin the next event", expected_seq, start))
            elif json_prefix_problem(partial) is not None:
                problems.append(_problem("corrupt_member", "the partial line is not the start of a JSON object", expected_seq, start))
            else:
                # A version 3 line carries prev only first in a member.
                marker = partial.find(b'"prev":"') if version in ("1", "2") or not lines else -1
                written = partial[marker + 8:marker + 8 + 64].split(b'"')[0].decode("ascii", "replace") if marker >= 0 else ""
                if marker >= 0 and not prev.startswith(written):
                    problems.append(_problem("corrupt_member", "the partial line links to another event", expected_seq, start))
                else:
                    ending = "torn"
                    problems.append(_problem("torn_tail", "the file ends inside a member", expected_seq, start))
            break
    if not events and all(problem["code"] == "torn_tail" for problem in problems):
        # No event read and no other damage: no run (section 5); sealing would keep nothing.
        problems = [_problem("no_event", "no event could be read", 0, 0)]
    intact = not problems
    if intact:
        ending = "complete" if events and events[-1]["kind"] == "run_stopped" else "unfinished"
    elif ending != "torn" or any(problem["code"] not in ("torn_tail", "no_event") for problem in problems):
        ending = "damaged"
    return {
        "readable": True, "intact": intact, "ending": ending, "event_count": len(events),
        "problems": sorted({problem["code"] for problem in problems}), "warnings": warnings, "state_digest": state.digest(),
        "digests_checked": digests_checked, "digest_mismatches": digest_mismatches,
    }


# -- A small run, for the round trip ------------------------------------------------------------

def demo(path):
    """A run with every kind of event, digests included, written with a fixed clock."""
    clock = iter(range(1_800_000_000_000_000, 1_800_000_000_000_000 + 10_000_000, 1_000))
    with LogWriter(path, run_id="run-python-demo") as log:
        log.append("run_started", {
            "goal": "Refund order A-7 (\u00e9t\u00e9 \U0001F680)", "agent": {"name": "py-agent", "config_digest": "sha256:" + "ab" * 32},
            "model": {"provider": "scripted", "name": "demo"}, "policy": {"name": "py-policy"},
            "tools": [{"name": "lookup", "description": "Looks up an order.", "side_effect": "read",
                       "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}}},
                      {"name": "refund", "description": "Refunds.", "side_effect": "write", "input_schema": {"type": "object"}}],
            "limits": {"max_steps": 5}, "added_by_a_newer_writer": {"kept": True}}, time_us=next(clock))
        log.end_step(time_us=next(clock))
        log.append("context_built", {"goal": "Refund order A-7", "state_summary": "Step 1.", "tools_disclosed": ["lookup", "refund"],
                                     "token_estimate": 120}, time_us=next(clock))
        log.append("decision_made", {
            "raw": "{...}", "decision": {"type": "tool_calls", "calls": [
                {"id": "c1", "name": "lookup", "arguments": {"id": "A-7", "weights": [1, 2.0, 0.1, 1e-05, 1.5e16]}},
                {"id": "c2", "name": "refund", "arguments": {"cents": 4999}}]},
            "usage": {"input": 120, "output": 30}, "latency_us": 900, "cost_usd": 0.00025}, time_us=next(clock))
        log.append("verdict_given", {"call_id": "c1", "tool": "lookup", "verdict": "allow", "rule": "reads"}, time_us=next(clock))
        log.append("verdict_given", {"call_id": "c2", "tool": "refund", "verdict": "approval_required", "reason": "money"},
                   time_us=next(clock))
        log.append("tool_intended", {"call_id": "c1", "tool": "lookup", "arguments": {"id": "A-7"}, "attempt": 1}, time_us=next(clock))
        log.append("tool_completed", {"call_id": "c1", "tool": "lookup", "attempt": 1, "status": "error", "error": "timeout",
                                      "retryable": True, "duration_us": 5000}, time_us=next(clock))
        log.append("tool_intended", {"call_id": "c1", "tool": "lookup", "arguments": {"id": "A-7"}, "attempt": 2}, time_us=next(clock))
        log.append("content_stored", {"hash": "sha256:" + sha256_hex(b"\xff\x00raw"), "media_type": "application/octet-stream",
                                      "encoding": "base64", "body": base64.b64encode(b"\xff\x00raw").decode("ascii")},
                   time_us=next(clock))
        log.append("tool_completed", {"call_id": "c1", "tool": "lookup", "attempt": 2, "status": "ok",
                                      "output": {"total": 49.99, "note": None}, "duration_us": 700}, time_us=next(clock))
        log.end_step(time_us=next(clock))
        log.append("run_stopped", {"reason": "approval_required"}, time_us=next(clock))
        log.append("approval_recorded", {"call_id": "c2", "granted": True, "approver": "maria"}, time_us=next(clock))
        log.append("tool_intended", {"call_id": "c2", "tool": "refund", "arguments": {"cents": 4999}, "attempt": 1},
                   time_us=next(clock))
        log.append("tool_completed", {"call_id": "c2", "tool": "refund", "attempt": 1, "status": "ok", "output": None,
                                      "duration_us": 1200}, time_us=next(clock))
        log.append("future_kind", {"anything": [1, {"x": "y"}]}, time_us=next(clock))
        log.end_step(time_us=next(clock))
        log.append("decision_made", {"raw": "done", "decision": {"type": "answer", "text": "Refunded."}, "usage": {"input": 200, "output": 5}},
                   time_us=next(clock))
        log.append("run_stopped", {"reason": "success", "answer": "Refunded."}, time_us=next(clock))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "verify":
        # Exit 0 intact, 1 readable but not intact (damaged, torn or unfinished), 2 unreadable,
        # as `agent-eval log verify`.
        found = verify(sys.argv[2])
        print(canonical(found))
        sys.exit(0 if found["intact"] else 1 if found["readable"] else 2)
    elif len(sys.argv) == 3 and sys.argv[1] == "demo":
        demo(sys.argv[2])
    else:
        sys.stderr.write("usage: agent_eval_log.py verify LOG | demo OUT\n")
        sys.exit(64)
