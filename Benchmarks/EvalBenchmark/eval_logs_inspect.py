#!/usr/bin/env python3
"""The eval benchmark's Inspect AI peer: the same runs, converted to Inspect's own `.eval` log
format with Inspect itself, then read back with Inspect's reader (`read_eval_log`) and checked
for the same 3 expectations. It needs `inspect-ai` from PyPI (`scripts/python_venv interop`).

    python Benchmarks/EvalBenchmark/eval_logs_inspect.py convert LOG_DIR EVAL_DIR
    python Benchmarks/EvalBenchmark/eval_logs_inspect.py EVAL_DIR [REPETITIONS]

`convert` writes one `.eval` per agent-eval log (one sample: the goal as the user's message, each
decision as an assistant message with its tool calls, each tool result as a tool message, the
stop reason in the sample's metadata); it is not timed. The second form prints one line per
repetition, as eval_logs.py does: runs, passed, seconds, runs/s, MB/s (of the `.eval` files).
"""
import glob
import gzip
import json
import os
import sys

from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, read_eval_log, write_eval_log
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, ChatMessageUser
from inspect_ai.tool import ToolCall, ToolCallError

from eval_logs import main


def convert(log_dir, eval_dir):
    os.makedirs(eval_dir, exist_ok=True)
    for path in sorted(glob.glob(log_dir + "/*.jsonl.gz")):
        with gzip.open(path, "rb") as log:
            events = [json.loads(line) for line in log]
        start = events[0]["data"]
        messages = [ChatMessageUser(content=start["goal"])]
        stop = None
        for event in events:
            data = event["data"]
            if event["kind"] == "decision_made":
                decision = data.get("decision") or {}
                if decision.get("type") == "tool_calls":
                    calls = [ToolCall(id=c["id"], function=c["name"], arguments=c["arguments"]) for c in decision["calls"]]
                    messages.append(ChatMessageAssistant(content="", tool_calls=calls))
                else:
                    messages.append(ChatMessageAssistant(content=decision.get("text") or data["raw"]))
            elif event["kind"] == "tool_completed":
                error = None if data["status"] == "ok" else ToolCallError("unknown", data.get("error") or data["status"])
                content = json.dumps(data.get("output")) if "output" in data else (data.get("error") or "")
                messages.append(ChatMessageTool(content=content, tool_call_id=data["call_id"], function=data["tool"], error=error))
            elif event["kind"] == "run_stopped":
                stop = data["reason"]
        spec = EvalSpec(
            created="2026-11-24T00:00:00+00:00", task="agent-eval-bench", dataset=EvalDataset(),
            model=start["model"]["provider"] + "/" + start["model"]["name"], config=EvalConfig())
        sample = EvalSample(id=events[0]["run"], epoch=1, input=start["goal"], target="", messages=messages, metadata={"stop": stop})
        name = os.path.basename(path)[: -len(".jsonl.gz")]
        write_eval_log(EvalLog(eval=spec, samples=[sample], status="success"), os.path.join(eval_dir, name + ".eval"), format="eval")


def check(path):
    """The 3 expectations, on what Inspect's reader gives: tool_1 ran, tool_3 did not, success."""
    log = read_eval_log(path)
    sample = log.samples[0]
    executed = {message.function for message in sample.messages if message.role == "tool"}
    passed = "tool_1" in executed and "tool_3" not in executed and (sample.metadata or {}).get("stop") == "success"
    return passed, os.path.getsize(path)


if __name__ == "__main__":
    if sys.argv[1] == "convert":
        convert(sys.argv[2], sys.argv[3])
    else:
        main(check, pattern="/*.eval")
