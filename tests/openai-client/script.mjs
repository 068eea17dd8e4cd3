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
