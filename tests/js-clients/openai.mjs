// The openai Node SDK against braid serve: streaming with usage, abort
// mid-stream, tool calls round trip (call, result, answer) streamed and
// not, structured output parsed by the SDK's helper, and errors as the SDK
// classifies them. Usage: node openai.mjs URL
import OpenAI from "openai";
import assert from "node:assert/strict";
import { base, apiKey, model, step, slotsIdle } from "./common.mjs";

const client = new OpenAI({ baseURL: base + "/v1", apiKey, maxRetries: 0, timeout: 60_000 });
const hi = [{ role: "user", content: "Tell me a story." }];

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 20 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"],
      additionalProperties: false,
    },
  },
};

await step("openai: streamed chat with usage (stream_options.include_usage)", async () => {
  const stream = await client.chat.completions.create({ model, messages: hi, max_tokens: 12, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) {
      assert.equal(c.choices.length, 0, "the usage chunk has no choices");
      usage = c.usage;
    }
    for (const ch of c.choices) {
      text += ch.delta.content ?? "";
      finish = ch.finish_reason ?? finish;
    }
  }
  assert.ok(chunks > 2, `only ${chunks} chunks`);
  assert.ok(usage, "no usage chunk");
  assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0 && usage.completion_tokens <= 12, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  assert.ok(["length", "stop"].includes(finish), String(finish));
});

await step("openai: abort mid-stream frees the slot", async () => {
  const ac = new AbortController();
  const stream = await client.chat.completions.create({ model, messages: hi, max_tokens: 1500, stream: true }, { signal: ac.signal });
  let seen = 0;
  // The SDK ends the iteration quietly when its own signal aborts.
  for await (const c of stream) {
    if (++seen === 3) ac.abort();
  }
  assert.ok(seen >= 3 && seen < 50, `${seen} chunks read, aborted at the third`);
  await slotsIdle();
});

for (const streamed of [false, true]) {
  await step(`openai: tool call round trip (call, result, answer)${streamed ? ", streamed" : ""}`, async () => {
    const messages = [{ role: "user", content: "What is the weather in Paris?" }];
    const req = { model, messages, tools: [weather], tool_choice: "required", parallel_tool_calls: false, max_tokens: 200, seed: 7 };
    let msg;
    if (streamed) {
      // The SDK's own accumulator of streamed deltas.
      const runner = client.chat.completions.stream(req);
      msg = (await runner.finalChatCompletion()).choices[0];
    } else {
      msg = (await client.chat.completions.create(req)).choices[0];
    }
    assert.equal(msg.finish_reason, "tool_calls", JSON.stringify(msg));
    const call = msg.message.tool_calls?.[0];
    assert.ok(call && call.type === "function" && call.function.name === "get_weather" && call.id, JSON.stringify(msg.message));
    const args = JSON.parse(call.function.arguments);
    assert.ok(typeof args.city === "string" && args.city.length <= 20 && ["celsius", "fahrenheit"].includes(args.unit), call.function.arguments);
    messages.push(msg.message, { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature: 21, unit: args.unit }) });
    const answer = await client.chat.completions.create({ model, messages, tools: [weather], tool_choice: "none", max_tokens: 16 });
    assert.equal(answer.choices[0].message.tool_calls ?? undefined, undefined);
    assert.equal(typeof answer.choices[0].message.content, "string");
    assert.ok(answer.usage.prompt_tokens > 0);
  });
}

await step("openai: structured output with chat.completions.parse", async () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 16 }, age: { type: "integer", minimum: 0, maximum: 120 }, pets: { type: "array", items: { type: "string", enum: ["cat", "dog"] }, maxItems: 3 } },
    required: ["name", "age", "pets"],
    additionalProperties: false,
  };
  const r = await client.chat.completions.parse({ model, messages: hi, max_tokens: 120, response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema } } });
  const p = r.choices[0].message.parsed;
  assert.ok(p && typeof p.name === "string" && Number.isInteger(p.age) && Array.isArray(p.pets), JSON.stringify(r.choices[0].message));
});

await step("openai: errors as the SDK classifies them", async () => {
  await assert.rejects(client.chat.completions.create({ model: "no-such-model", messages: hi }), (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === "model_not_found");
  await assert.rejects(client.chat.completions.create({ model, messages: hi, temperature: 9 }), (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model, messages: [] }), (e) => e instanceof OpenAI.BadRequestError && /messages/.test(e.message));
  const wrongKey = new OpenAI({ baseURL: base + "/v1", apiKey: "sk-wrong", maxRetries: 0 });
  await assert.rejects(wrongKey.chat.completions.create({ model, messages: hi }), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  // The server is still there.
  const ok = await client.chat.completions.create({ model, messages: hi, max_tokens: 2 });
  assert.equal(ok.choices.length, 1);
});

await step("openai: models.list", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), JSON.stringify(ids));
});
