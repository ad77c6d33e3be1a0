#!/usr/bin/env node
// A refund agent in Node.js that calls the OpenAI Chat Completions API with fetch directly (no SDK),
// with two tools: the gateway records it like any other. It reads OPENAI_BASE_URL and
// OPENAI_API_KEY, retries a 429 after its retry-after, and streams with --stream.
//
// Usage: node node_fetch_agent.mjs [--stream] "request"

const args = process.argv.slice(2);
const stream = args.includes("--stream");
const request = args.filter((word) => !word.startsWith("--")).at(-1) ?? process.env.AGENT_EVAL_INPUT;
const base = process.env.OPENAI_BASE_URL ?? "https://api.openai.com/v1";

const orders = { "A-1042": { order_id: "A-1042", status: "delivered", total: 25, currency: "EUR" } };
const tools = {
  lookup_order: {
    description: "Look an order up by its id.",
    parameters: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
    run: ({ order_id }) => orders[order_id] ?? { error: "no such order" },
  },
  refund_order: {
    description: "Refund an order.",
    parameters: {
      type: "object", properties: { order_id: { type: "string" }, amount: { type: "number" } }, required: ["order_id", "amount"],
    },
    run: ({ amount }) => ({ refund_id: "rf-9", amount }),
  },
};
const declared = Object.entries(tools).map(([name, tool]) => ({
  type: "function", function: { name, description: tool.description, parameters: tool.parameters },
}));

async function complete(messages) {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${process.env.OPENAI_API_KEY ?? ""}` },
      body: JSON.stringify({ model: "gpt-test", messages, tools: declared, stream }),
    });
    if (response.status === 429 && attempt < 4) {
      await new Promise((done) => setTimeout(done, Number(response.headers.get("retry-after-ms") ?? 100)));
      continue;
    }
    if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    if (!stream) return (await response.json()).choices[0].message;
    // Server-sent events: deltas of one message, tool calls by index.
    const message = { role: "assistant", content: "", tool_calls: [] };
    let buffer = "";
    const decoder = new TextDecoder();
    for await (const bytes of response.body) {
      buffer += decoder.decode(bytes, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).trim();
        buffer = buffer.slice(end + 1);
        if (!line.startsWith("data:") || line === "data: [DONE]") continue;
        const chunk = JSON.parse(line.slice(5));
        const delta = chunk.choices?.[0]?.delta;
        if (!delta) continue;
        message.content += delta.content ?? "";
        for (const call of delta.tool_calls ?? []) {
          const slot = (message.tool_calls[call.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
          slot.id = call.id ?? slot.id;
          slot.function.name += call.function?.name ?? "";
          slot.function.arguments += call.function?.arguments ?? "";
        }
      }
    }
    if (message.tool_calls.length === 0) delete message.tool_calls;
    return message;
  }
}

const messages = [{ role: "system", content: "You are a support agent." }, { role: "user", content: request }];
for (let turn = 0; turn < 6; turn++) {
  const message = await complete(messages);
  if (!message.tool_calls?.length) {
    console.log(message.content);
    process.exit(0);
  }
  messages.push({ role: "assistant", content: null, tool_calls: message.tool_calls });
  for (const call of message.tool_calls) {
    const result = tools[call.function.name]?.run(JSON.parse(call.function.arguments || "{}")) ?? { error: "unknown tool" };
    messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
  }
}
console.error("gave up after 6 turns");
process.exit(1);
