"""ATIF trajectories made and checked with the `atif` Pydantic models from PyPI (ATIF v1.8), for
the ATIF tests:

    python scripts/atif_samples.py OUT_DIR            writes the samples below
    python scripts/atif_samples.py --validate FILE…   validates files; prints one line per invalid file, exits 1 if any

OUT_DIR/delegating.atif.json   an agent that looks an order up, delegates the refund to an embedded
                               sub-agent trajectory (subagent_trajectory_ref), and answers; its
                               trajectory continues in continued.atif.json (continued_trajectory_ref)
OUT_DIR/continued.atif.json    the continuation: a step copied from before (is_copied_context) and the
                               final answer
"""
import json
import os
import sys

from atif import Trajectory

if sys.argv[1] == "--validate":
    bad = 0
    for path in sys.argv[2:]:
        try:
            with open(path) as file:
                Trajectory.model_validate_json(file.read())
        except Exception as error:  # noqa: BLE001 - each file's error is reported
            bad += 1
            print("%s: %s" % (path, str(error).replace("\n", " ")))
    sys.exit(1 if bad else 0)

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "description": "Look an order up.",
                                            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "delegate_refund", "description": "Ask the refund agent.",
                                            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}]
refunder = {
    "schema_version": "ATIF-v1.8", "trajectory_id": "refund-subagent",
    "agent": {"name": "refund-agent", "version": "2.0", "model_name": "gpt-test"},
    "steps": [
        {"step_id": 1, "timestamp": "2026-11-25T10:00:02Z", "source": "user", "message": "Refund order A-1042 (25 EUR)."},
        {"step_id": 2, "timestamp": "2026-11-25T10:00:03Z", "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "r1", "function_name": "refund_order", "arguments": {"order_id": "A-1042", "amount": 25}}],
         "observation": {"results": [{"source_call_id": "r1", "content": "{\"refund_id\": \"rf-9\"}"}]},
         "metrics": {"prompt_tokens": 40, "completion_tokens": 9}},
        {"step_id": 3, "timestamp": "2026-11-25T10:00:04Z", "source": "agent", "message": "Refund rf-9 issued."},
    ],
}
delegating = {
    "schema_version": "ATIF-v1.8", "session_id": "session-7", "trajectory_id": "support-main",
    "agent": {"name": "support-agent", "version": "1.4", "model_name": "gpt-test", "tool_definitions": TOOLS},
    "steps": [
        {"step_id": 1, "timestamp": "2026-11-25T10:00:00Z", "source": "system", "message": "You are a support agent."},
        {"step_id": 2, "timestamp": "2026-11-25T10:00:00Z", "source": "user", "message": "Order A-1042 arrived broken. Refund me."},
        {"step_id": 3, "timestamp": "2026-11-25T10:00:01Z", "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "lookup_order", "arguments": {"order_id": "A-1042"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "{\"status\": \"delivered\", \"total\": 25}"}]},
         "metrics": {"prompt_tokens": 120, "completion_tokens": 12, "cost_usd": 0.001}},
        {"step_id": 4, "timestamp": "2026-11-25T10:00:02Z", "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "c2", "function_name": "delegate_refund", "arguments": {"order_id": "A-1042"}}],
         "observation": {"results": [{"source_call_id": "c2", "subagent_trajectory_ref": [{"trajectory_id": "refund-subagent"}]}]},
         "metrics": {"prompt_tokens": 150, "completion_tokens": 10}},
    ],
    "continued_trajectory_ref": "continued.atif.json",
    "subagent_trajectories": [refunder],
}
continued = {
    "schema_version": "ATIF-v1.8", "session_id": "session-7", "trajectory_id": "support-main-2",
    "agent": {"name": "support-agent", "version": "1.4", "model_name": "gpt-test"},
    "steps": [
        {"step_id": 1, "timestamp": "2026-11-25T10:00:00Z", "source": "user", "message": "Order A-1042 arrived broken. Refund me.",
         "is_copied_context": True},
        {"step_id": 2, "timestamp": "2026-11-25T10:00:05Z", "source": "agent", "message": "Refunded 25 EUR for order A-1042.",
         "metrics": {"prompt_tokens": 90, "completion_tokens": 11}},
    ],
}
for name, document in [("delegating.atif.json", delegating), ("continued.atif.json", continued)]:
    Trajectory.model_validate(document)  # the official models accept it
    with open(os.path.join(out, name), "w") as file:
        json.dump(document, file, indent=1)
