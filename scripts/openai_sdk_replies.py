"""What the official `openai` Python SDK (PyPI, in the `interop` environment) makes of a local
model server's streamed replies, for the model client cross-check: the same request, streamed
with `stream_options.include_usage`, assembled by the SDK's own stream helper
(`client.chat.completions.stream(...).get_final_completion()`).

    python scripts/openai_sdk_replies.py SCENARIO=BASE_URL...

Prints one JSON object a line per scenario: {"scenario", "content", "tool_calls": [{"id",
"name", "arguments"}], "finish_reason", "usage": {"prompt_tokens", "completion_tokens"} or null},
or {"scenario", "error"} when the SDK raises.
"""
import json
import sys

from openai import OpenAI

TOOLS = [{"type": "function", "function": {
    "name": "lookup_order", "description": "Finds an order.",
    "parameters": {"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is order A-1042?"}]


def complete(client):
    """One streamed request, assembled by the SDK's stream helper: the final completion."""
    with client.chat.completions.stream(model="local-model", messages=MESSAGES, tools=TOOLS,
                                        stream_options={"include_usage": True}) as stream:
        for _ in stream:
            pass
        return stream.get_final_completion()


def main():
    for argument in sys.argv[1:]:
        scenario, base_url = argument.split("=", 1)
        client = OpenAI(api_key="sk-test-sdk", base_url=base_url, max_retries=0, timeout=10)
        try:
            completion = complete(client)
        except Exception as error:  # the SDK's own error, for the report
            print(json.dumps({"scenario": scenario, "error": f"{type(error).__name__}: {error}"}))
            continue
        choice = completion.choices[0]
        message = choice.message
        usage = completion.usage
        print(json.dumps({
            "scenario": scenario,
            "content": message.content,
            "tool_calls": [{"id": call.id, "name": call.function.name, "arguments": call.function.arguments}
                           for call in (message.tool_calls or [])],
            "finish_reason": choice.finish_reason,
            "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens} if usage else None,
        }, ensure_ascii=False))


if __name__ == "__main__":
    main()
