// Drives a running `braid serve` with the official openai SDK. Usage:
//   node script.mjs http://127.0.0.1:PORT   (API key in OPENAI_API_KEY, model in BRAID_MODEL)
// Exits non-zero, naming the step, when the SDK cannot parse a response or an
// answer is not what the API promises.
import OpenAI from "openai";
import assert from "node:assert/strict";

const base = process.argv[2];
if (!base) {
  console.error("usage: node script.mjs URL");
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

await step("models.list", async () => {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), `model list ${JSON.stringify(ids)} lacks ${model}`);
});

await step("chat.completions.create", async () => {
  const r = await client.chat.completions.create({
    model,
    messages: [{ role: "system", content: "You tell stories." }, { role: "user", content: "Once upon a time" }],
    max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  assert.ok(r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(r.choices[0].logprobs.content.length, r.usage.completion_tokens);
});

await step("chat.completions.create stream", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Tell me about a cat." }],
    max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    chunks++;
    assert.equal(c.object, "chat.completion.chunk");
    for (const ch of c.choices) {
      text += ch.delta?.content ?? "";
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    if (c.usage) usage = c.usage;
  }
  assert.ok(chunks > 2, `only ${chunks} chunks`);
  assert.ok(text.length > 0, "no streamed text");
  assert.ok(["stop", "length"].includes(finish), `finish_reason ${finish}`);
  assert.ok(usage && usage.completion_tokens > 0, "no usage in the stream");
  // The SDK's helper that accumulates a stream must also parse it.
  const runner = client.chat.completions.stream({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.role, "assistant");
});

await step("completions.create", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0, stop: ["\n\n"] });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 12);
  const s = await client.completions.create({ model, prompt: [1, 403, 407], max_tokens: 6, temperature: 0, stream: true });
  let n = 0;
  for await (const c of s) n += c.choices.length;
  assert.ok(n > 0, "empty completion stream");
});

await step("completions.create with several prompts and n", async () => {
  const r = await client.completions.create({ model, prompt: ["Once upon a time", "The cat"], n: 2, max_tokens: 6, temperature: 0 });
  assert.equal(r.choices.length, 4);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(r.choices[0].text, r.choices[1].text); // greedy: the same twice
  assert.notEqual(r.choices[0].text, r.choices[2].text);
  assert.equal(r.usage.completion_tokens, 24);
});

await step("responses.create", async () => {
  const r = await client.responses.create({
    model, instructions: "You tell stories.", input: "Once upon a time", max_output_tokens: 12, temperature: 0,
  });
  assert.equal(r.object, "response");
  assert.ok(r.id.startsWith("resp_"), r.id);
  assert.equal(r.status, "incomplete");
  assert.equal(r.incomplete_details.reason, "max_output_tokens");
  assert.equal(typeof r.output_text, "string");
  assert.ok(r.output_text.length > 0, "no output_text");
  assert.equal(r.output.at(-1).type, "message");
  assert.equal(r.usage.output_tokens, 12);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  // The same turn as a chat completion says the same thing.
  const c = await client.chat.completions.create({
    model, messages: [{ role: "system", content: "You tell stories." }, { role: "user", content: "Once upon a time" }], max_tokens: 12, temperature: 0,
  });
  assert.equal(r.output_text, c.choices[0].message.content);
  // The next turn continues from it.
  const r2 = await client.responses.create({ model, previous_response_id: r.id, input: [{ role: "user", content: [{ type: "input_text", text: "And then?" }] }], max_output_tokens: 6, temperature: 0 });
  assert.equal(r2.previous_response_id, r.id);
  assert.ok(r2.usage.input_tokens > r.usage.input_tokens, `${r2.usage.input_tokens} input tokens after ${r.usage.input_tokens}`);
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.equal(got.output_text, r.output_text);
  await client.responses.delete(r.id);
  let err = null;
  try {
    await client.responses.create({ model, previous_response_id: r.id, input: "x" });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OpenAI.NotFoundError, `got ${err && err.constructor.name}: ${err}`);
});

await step("responses.create stream", async () => {
  const stream = await client.responses.create({ model, input: "Tell me about a cat.", max_output_tokens: 16, temperature: 0, stream: true });
  let text = "", types = [], final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") text += ev.delta;
    if (ev.type === "response.completed" || ev.type === "response.incomplete") final = ev.response;
  }
  assert.equal(types[0], "response.created");
  assert.ok(types.includes("response.output_text.done"), types.join(","));
  assert.ok(text.length > 0, "no streamed text");
  assert.ok(final, "no final event: " + types.join(","));
  const whole = await client.responses.create({ model, input: "Tell me about a cat.", max_output_tokens: 16, temperature: 0 });
  assert.equal(text, whole.output_text);
});

await step("responses.stream", async () => {
  const runner = client.responses.stream({ model, input: "Hi", max_output_tokens: 8, temperature: 0 });
  let deltas = "";
  runner.on("response.output_text.delta", (ev) => { deltas += ev.delta; });
  const final = await runner.finalResponse();
  assert.equal(final.object, "response");
  assert.equal(final.output_text, deltas);
  assert.equal(final.usage.output_tokens, 8);
});

await step("embeddings.create", async () => {
  const r = await client.embeddings.create({ model, input: ["Once upon a time", "a cat"] });
  assert.equal(r.data.length, 2);
  for (const d of r.data) {
    const norm = Math.sqrt(d.embedding.reduce((s, x) => s + x * x, 0));
    assert.ok(Math.abs(norm - 1) < 1e-3, `norm ${norm}`);
  }
  assert.ok(r.usage.prompt_tokens > 0);
  // The SDK asks for base64 by default and decodes it.
  const one = await client.embeddings.create({ model, input: "a cat" });
  assert.deepEqual(one.data[0].embedding.map((x) => x.toFixed(5)), r.data[1].embedding.map((x) => x.toFixed(5)));
});

await step("invalid request surfaces as BadRequestError", async () => {
  let err = null;
  try {
    await client.chat.completions.create({ model, messages: [{ role: "wizard", content: "hi" }], max_tokens: -1 });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OpenAI.BadRequestError, `got ${err && err.constructor.name}: ${err}`);
  assert.equal(err.status, 400);
  assert.ok(err.error && typeof err.error.message === "string" && err.error.message.length > 0, "no error message");
});

await step("unknown model surfaces as NotFoundError", async () => {
  let err = null;
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OpenAI.NotFoundError, `got ${err && err.constructor.name}: ${err}`);
});

await step("bad key surfaces as AuthenticationError", async () => {
  const bad = new OpenAI({ baseURL: base + "/v1", apiKey: "wrong-key", maxRetries: 0 });
  let err = null;
  try {
    await bad.models.list();
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OpenAI.AuthenticationError, `got ${err && err.constructor.name}: ${err}`);
});
console.log("all ok");
