"""Writes Google ADK eval sets made by ADK's own models (`google-adk` from PyPI:
google.adk.evaluation.eval_set.EvalSet and its EvalCase/Invocation), for `case from-evalset`'s
tests:

    python scripts/adk_evalsets.py OUT_DIR

  OUT_DIR/shop.evalset.json    as ADK's eval set manager writes it (model_dump_json): the refund
                               case (two tool uses, a final response), a case that calls no tool,
                               a two-turn conversation, the refund again with its tool uses as
                               invocation events, and a conversation_scenario for ADK's user
                               simulator (a starting prompt, a plan, the prebuilt NOVICE persona)
  OUT_DIR/shop.camel.json      the same set with ADK's camelCase aliases (by_alias=True)
  OUT_DIR/shop.test.json       ADK's older test file: [{query, expected_tool_use, reference}]
"""
import json
import os
import sys

from google.adk.evaluation.conversation_scenarios import ConversationScenario
from google.adk.evaluation.eval_case import EvalCase, IntermediateData, Invocation, InvocationEvent, InvocationEvents
from google.adk.evaluation.eval_set import EvalSet
from google.genai import types

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def content(role, text):
    return types.Content(role=role, parts=[types.Part(text=text)])


def invocation(number, query, uses, response):
    return Invocation(
        invocation_id="inv-%d" % number, user_content=content("user", query), final_response=content("model", response),
        intermediate_data=IntermediateData(tool_uses=[types.FunctionCall(name=name, args=args) for name, args in uses]))


refund = invocation(1, "Order A-1042 arrived broken. Refund me.",
                    [("lookup_order", {"order_id": "A-1042"}), ("refund_order", {"order_id": "A-1042", "amount": 25})],
                    "Refunded 25 EUR for order A-1042.")
greeting = invocation(2, "Hello!", [], "Hello! How can I help with your order?")
# ADK's other form of intermediate data: the invocation's events, their parts the function calls.
events = Invocation(
    invocation_id="inv-5", user_content=content("user", "Order A-1042 arrived broken. Refund me."),
    final_response=content("model", "Refunded 25 EUR for order A-1042."),
    intermediate_data=InvocationEvents(invocation_events=[
        InvocationEvent(author="shop_agent", content=types.Content(role="model", parts=[
            types.Part(function_call=types.FunctionCall(name=name, args=args))]))
        for name, args in [("lookup_order", {"order_id": "A-1042"}), ("refund_order", {"order_id": "A-1042", "amount": 25})]]))
first_turn = invocation(3, "Where is order A-1042?", [("lookup_order", {"order_id": "A-1042"})], "It was delivered.")
second_turn = invocation(4, "Then refund it.", [("refund_order", {"order_id": "A-1042", "amount": 25})], "Refunded.")
eval_set = EvalSet(eval_set_id="shop", name="Shop support", eval_cases=[
    EvalCase(eval_id="refund damaged order", conversation=[refund]),
    EvalCase(eval_id="greeting", conversation=[greeting]),
    EvalCase(eval_id="two turns", conversation=[first_turn, second_turn]),
    EvalCase(eval_id="refund/events", conversation=[events]),
    EvalCase(eval_id="refund scenario", conversation_scenario=ConversationScenario(
        starting_prompt="hi, my order arrived broken",
        conversation_plan="Get a refund for order A-1042. Give the order number when asked, and confirm the refund when asked.",
        user_persona="NOVICE")),
])
# What ADK's local eval set manager writes.
with open(os.path.join(out, "shop.evalset.json"), "w") as file:
    file.write(eval_set.model_dump_json(indent=2))
with open(os.path.join(out, "shop.camel.json"), "w") as file:
    file.write(eval_set.model_dump_json(indent=2, by_alias=True))
# Parsed back by ADK's own model: both are eval sets ADK reads.
for name in ["shop.evalset.json", "shop.camel.json"]:
    with open(os.path.join(out, name)) as file:
        EvalSet.model_validate_json(file.read())
with open(os.path.join(out, "shop.test.json"), "w") as file:
    json.dump([{"query": "Order A-1042 arrived broken. Refund me.",
                "expected_tool_use": [{"tool_name": "lookup_order", "tool_input": {"order_id": "A-1042"}},
                                      {"tool_name": "refund_order", "tool_input": {"order_id": "A-1042", "amount": 25}}],
                "reference": "Refunded 25 EUR for order A-1042."}], file, indent=2)
