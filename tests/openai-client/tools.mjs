// Tool calling and structured outputs of a running `braid serve`, driven by
// the official openai SDK. Usage as script.mjs:
//   node tools.mjs http://127.0.0.1:PORT   (API key in OPENAI_API_KEY, model in BRAID_MODEL)
// The model (stories260K) knows nothing of tools or JSON: the calls and
// the JSON come from braid enforcing tool_choice and response_format.
import OpenAI from "openai";
import assert from "node:assert/strict";

const base = process.argv[2];
if (!base) {
  console.error("usage: node tools.mjs URL");
  process.exit(2);
}
const model = process.env.BRAID_MODEL || "stories";
const client = new OpenAI({ baseURL: base + "/v1", apiKey: process.env.OPENAI_API_KEY || "none", maxRetries: 0, timeout: 60_000 });

async function step(name, fn) {
  try {
    await fn();
    console.log("ok   " + name);
  } catch (e) {
    console.error("FAIL " + name + ": " + (e && e.stack ? e.stack : e));
    process.exit(1);
  }
}

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    strict: true,
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 24 },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        days: { type: "integer", minimum: 1, maximum: 7 },
      },
      required: ["city", "unit", "days"],
      additionalProperties: false,
    },
  },
};

function checkWeatherArgs(text) {
  const a = JSON.parse(text);
  assert.deepEqual(Object.keys(a).sort(), ["city", "days", "unit"], text);
  assert.equal(typeof a.city, "string");
  assert.ok([...a.city].length <= 24, text);
  assert.ok(["celsius", "fahrenheit"].includes(a.unit), text);
  assert.ok(Number.isInteger(a.days) && a.days >= 1 && a.days <= 7, text);
  return a;
}

const question = [{ role: "user", content: "What is the weather in Paris this week?" }];

// A call, the tool's result, the final answer.
async function roundTrip(stream) {
  const req = { model, messages: question, tools: [weather], tool_choice: "required", parallel_tool_calls: false, max_tokens: 300, temperature: 0.7, seed: 3 };
  let msg, finish;
  if (stream) {
    const runner = client.chat.completions.stream(req);
    const final = await runner.finalChatCompletion();
    msg = final.choices[0].message;
    finish = final.choices[0].finish_reason;
  } else {
    const r = await client.chat.completions.create(req);
    msg = r.choices[0].message;
    finish = r.choices[0].finish_reason;
  }
  assert.equal(finish, "tool_calls");
  assert.ok(msg.tool_calls && msg.tool_calls.length >= 1, JSON.stringify(msg));
  for (const c of msg.tool_calls) {
    assert.equal(c.type, "function");
    assert.equal(c.function.name, "get_weather");
    assert.ok(c.id.length > 0);
    checkWeatherArgs(c.function.arguments);
  }
  const messages = [...question, msg];
  for (const c of msg.tool_calls) {
    messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify({ temperature: 15, sky: "cloudy" }) });
  }
  // The tools again, not strict: the SDK's stream helper refuses a reply
  // cut by max_tokens when it would parse strict tools' arguments.
  const loose = { ...weather, function: { ...weather.function, strict: false } };
  const answerReq = { model, messages, tools: [loose], max_tokens: 16, temperature: 0 };
  let answer;
  if (stream) {
    const runner = client.chat.completions.stream(answerReq);
    answer = await runner.finalChatCompletion();
  } else {
    answer = await client.chat.completions.create(answerReq);
  }
  assert.ok(["stop", "length", "tool_calls"].includes(answer.choices[0].finish_reason), answer.choices[0].finish_reason);
  assert.equal(answer.choices[0].message.role, "assistant");
}

await step("tools: a call, its result, the answer", () => roundTrip(false));
await step("tools: the same, streamed", () => roundTrip(true));

await step("tools: a named function, one call, streamed deltas", async () => {
  const time = { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { type: "string", enum: ["UTC", "CET"] } }, required: ["zone"], additionalProperties: false } } };
  const stream = await client.chat.completions.create({
    model, messages: question, tools: [weather, time], tool_choice: { type: "function", function: { name: "get_time" } },
    parallel_tool_calls: false, max_tokens: 100, temperature: 1, seed: 5, stream: true,
  });
  const calls = [];
  let finish = null;
  for await (const c of stream) {
    for (const ch of c.choices) {
      for (const d of ch.delta?.tool_calls ?? []) {
        if (!calls[d.index]) {
          assert.ok(d.id && d.function.name, "the first delta of a call has its id and name");
          calls[d.index] = { id: d.id, name: d.function.name, args: "" };
        }
        calls[d.index].args += d.function?.arguments ?? "";
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.equal(finish, "tool_calls");
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, "get_time");
  assert.ok(["UTC", "CET"].includes(JSON.parse(calls[0].args).zone), calls[0].args);
});

const person = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 20 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    email: { type: "string", format: "email" },
    tags: { type: "array", items: { type: "string", enum: ["a", "b", "c"] }, maxItems: 3 },
    address: { type: "object", properties: { zip: { type: "string", pattern: "^[0-9]{5}$" } }, required: ["zip"], additionalProperties: false },
  },
  required: ["name", "age", "email", "tags", "address"],
  additionalProperties: false,
};

function checkPerson(p) {
  assert.deepEqual(Object.keys(p).sort(), ["address", "age", "email", "name", "tags"]);
  assert.ok(typeof p.name === "string" && [...p.name].length <= 20);
  assert.ok(Number.isInteger(p.age) && p.age >= 0 && p.age <= 120);
  assert.match(p.email, /^[^@\s]+@[^@\s]+\.[a-z]+$/);
  assert.ok(Array.isArray(p.tags) && p.tags.length <= 3 && p.tags.every((t) => ["a", "b", "c"].includes(t)));
  assert.match(p.address.zip, /^[0-9]{5}$/);
}

await step("response_format json_schema: parses and validates", async () => {
  let complete = 0;
  for (let seed = 0; seed < 4; seed++) {
    const r = await client.chat.completions.create({
      model, messages: [{ role: "user", content: "Describe a person." }], max_tokens: 400, temperature: 1, seed,
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
    });
    if (r.choices[0].finish_reason !== "stop") continue; // cut by max_tokens
    checkPerson(JSON.parse(r.choices[0].message.content));
    complete++;
  }
  assert.ok(complete > 0, "no reply of 4 finished within max_tokens");
  // The SDK's parse helper reads the JSON itself.
  const p = await client.chat.completions.parse({
    model, messages: [{ role: "user", content: "Describe a person." }], max_tokens: 400, temperature: 0.5, seed: 9,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
  });
  if (p.choices[0].finish_reason === "stop") checkPerson(p.choices[0].message.parsed);
});

await step("response_format json_object, streamed", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Give me JSON." }], max_tokens: 200, temperature: 1, seed: 1, stream: true,
    response_format: { type: "json_object" },
  });
  let text = "", finish = null;
  for await (const c of stream) {
    for (const ch of c.choices) {
      text += ch.delta?.content ?? "";
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  if (finish === "stop") {
    const v = JSON.parse(text);
    assert.ok(v && typeof v === "object" && !Array.isArray(v), text);
  }
});

// The Responses API: the same tool in its shape, a forced call whole and
// through the SDK's stream helper, then its result by previous_response_id.
const weatherR = { type: "function", name: weather.function.name, description: weather.function.description, parameters: weather.function.parameters, strict: true };

await step("responses.create with a forced tool call, and its result", async () => {
  const r = await client.responses.create({ model, input: "What is the weather in Paris this week?", tools: [weatherR], tool_choice: "required", parallel_tool_calls: false, max_output_tokens: 300, temperature: 0.7, seed: 3 });
  if (r.status === "incomplete") { console.log("note: cut by max_output_tokens"); return; }
  assert.equal(r.status, "completed");
  const calls = r.output.filter((it) => it.type === "function_call");
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  assert.equal(calls[0].name, "get_weather");
  assert.ok(calls[0].call_id.startsWith("call_"), calls[0].call_id);
  checkWeatherArgs(calls[0].arguments);
  const r2 = await client.responses.create({
    model, previous_response_id: r.id, tools: [weatherR], max_output_tokens: 20, temperature: 0,
    input: [{ type: "function_call_output", call_id: calls[0].call_id, output: JSON.stringify({ temperature: 15 }) }],
  });
  assert.equal(r2.previous_response_id, r.id);
  assert.ok(r2.usage.input_tokens > r.usage.input_tokens, `${r2.usage.input_tokens} input tokens after ${r.usage.input_tokens}`);
  // The same conversation sent whole gives the same prompt.
  const r3 = await client.responses.create({
    model, tools: [weatherR], max_output_tokens: 20, temperature: 0,
    input: [{ role: "user", content: "What is the weather in Paris this week?" }, calls[0], { type: "function_call_output", call_id: calls[0].call_id, output: JSON.stringify({ temperature: 15 }) }],
  });
  assert.equal(r3.usage.input_tokens, r2.usage.input_tokens);
  assert.equal(r3.output_text, r2.output_text);
});

await step("responses.stream with a named function", async () => {
  const runner = client.responses.stream({ model, input: "What is the weather in Paris this week?", tools: [weatherR], tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 300, temperature: 0.7, seed: 5 });
  let args = "", added = 0, done = null;
  runner.on("response.output_item.added", (ev) => { if (ev.item.type === "function_call") added++; });
  runner.on("response.function_call_arguments.delta", (ev) => { args += ev.delta; });
  runner.on("response.function_call_arguments.done", (ev) => { done = ev.arguments; });
  const final = await runner.finalResponse();
  if (final.status === "incomplete") { console.log("note: cut by max_output_tokens"); return; }
  const calls = final.output.filter((it) => it.type === "function_call");
  assert.ok(calls.length >= 1 && added === calls.length, JSON.stringify(final.output));
  assert.equal(done, calls.at(-1).arguments);
  assert.equal(args, calls.map((c) => c.arguments).join(""));
  for (const c of calls) checkWeatherArgs(c.arguments);
});

await step("chat.completions.create with n = 2", async () => {
  const req = { model, messages: question, n: 2, max_tokens: 8, temperature: 1, seed: 11 };
  const r = await client.chat.completions.create(req);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  const again = await client.chat.completions.create(req);
  assert.deepEqual(again.choices.map((c) => c.message.content), r.choices.map((c) => c.message.content));
  // choice i is the single request with seed + i; usage: the prompt once
  const singles = [await client.chat.completions.create({ ...req, n: 1 }), await client.chat.completions.create({ ...req, n: 1, seed: req.seed + 1 })];
  assert.deepEqual(singles.map((s) => s.choices[0].message.content), r.choices.map((c) => c.message.content));
  assert.equal(r.usage.prompt_tokens, singles[0].usage.prompt_tokens);
  assert.equal(r.usage.completion_tokens, singles[0].usage.completion_tokens + singles[1].usage.completion_tokens);
  const stream = await client.chat.completions.create({ ...req, stream: true });
  const texts = ["", ""];
  for await (const c of stream) for (const ch of c.choices) texts[ch.index] += ch.delta?.content ?? "";
  assert.deepEqual(texts, r.choices.map((c) => c.message.content));
});

await step("an unenforceable schema surfaces as BadRequestError", async () => {
  let err = null;
  try {
    await client.chat.completions.create({
      model, messages: question, max_tokens: 5,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "number", multipleOf: 3 } } },
    });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err && err.constructor.name}: ${err}`);
  assert.match(err.error.message, /multipleOf/);
  assert.equal(err.error.param, "response_format.json_schema.schema");
});
console.log("all ok");
