// The Vercel AI SDK (ai, with @ai-sdk/openai-compatible) against braid
// serve: generateText and streamText with usage, generateText with a tool
// (the call, the SDK running it, the answer in a second step), streamObject
// and generateObject with a zod schema, an abort, and errors as the SDK
// reports them. Usage: node aisdk.mjs URL
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText, streamObject, generateObject, tool, stepCountIs, APICallError } from "ai";
import { z } from "zod";
import assert from "node:assert/strict";
import { base, apiKey, model, step, slotsIdle } from "./common.mjs";

const braid = createOpenAICompatible({ name: "braid", baseURL: base + "/v1", apiKey, includeUsage: true, supportsStructuredOutputs: true });
const m = braid(model);

await step("ai-sdk: generateText, usage and finish reason", async () => {
  const r = await generateText({ model: m, prompt: "Tell me a story.", maxOutputTokens: 12, maxRetries: 0 });
  assert.equal(typeof r.text, "string");
  assert.ok(["length", "stop"].includes(r.finishReason), r.finishReason);
  assert.ok(r.usage.inputTokens > 0 && r.usage.outputTokens > 0 && r.usage.outputTokens <= 12, JSON.stringify(r.usage));
});

await step("ai-sdk: streamText, usage once", async () => {
  const r = streamText({ model: m, prompt: "Tell me a story.", maxOutputTokens: 12, maxRetries: 0 });
  let text = "";
  for await (const d of r.textStream) text += d;
  const u = await r.usage;
  assert.ok(u.outputTokens > 0 && u.outputTokens <= 12, JSON.stringify(u));
  assert.equal(text, await r.text);
});

await step("ai-sdk: generateText with a tool: call, result, answer", async () => {
  const ran = [];
  const r = await generateText({
    model: m,
    maxRetries: 0,
    prompt: "What is the weather in Paris?",
    // A 512-token vocabulary spells the call's fixed text in small pieces,
    // and noise may take every blank the JSON allows: room for both.
    maxOutputTokens: 400,
    tools: {
      weather: tool({
        description: "The weather in a city",
        inputSchema: z.object({ city: z.string().max(20), unit: z.enum(["celsius", "fahrenheit"]) }),
        execute: async ({ city, unit }) => {
          ran.push(city);
          return { city, temperature: 21, unit };
        },
      }),
    },
    // Random weights never choose a tool: require one in the first step,
    // none in the answer's.
    prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? "required" : "none" }),
    // Passed through to the request body by the provider: one call, whose
    // closure always fits the budget (noise could start a third or fourth).
    providerOptions: { braid: { parallel_tool_calls: false } },
    stopWhen: stepCountIs(3),
  });
  assert.equal(r.steps.length, 2, `steps: ${r.steps.map((s) => s.finishReason)}`);
  const [first, second] = r.steps;
  assert.equal(first.finishReason, "tool-calls");
  assert.ok(first.toolCalls.length === 1 && first.toolCalls[0].toolName === "weather", JSON.stringify(first.toolCalls));
  assert.equal(first.toolResults.length, first.toolCalls.length);
  assert.ok(first.toolResults.every((r) => r.output.temperature === 21));
  assert.equal(ran.length, first.toolCalls.length, "the tool ran once per call");
  assert.equal(second.toolCalls.length, 0);
  assert.equal(typeof r.text, "string");
  assert.ok(r.totalUsage.inputTokens > first.usage.inputTokens, "two steps' usage");
});

const Person = z.object({ name: z.string().max(16), age: z.number().int().min(0).max(120), pets: z.array(z.enum(["cat", "dog"])).max(3) });

await step("ai-sdk: streamObject with a schema", async () => {
  const r = streamObject({ model: m, schema: Person, prompt: "Describe a person.", maxOutputTokens: 150, maxRetries: 0 });
  let partials = 0;
  for await (const p of r.partialObjectStream) partials++;
  const obj = await r.object;
  Person.parse(obj);
  assert.ok(partials >= 1);
});

await step("ai-sdk: generateObject with a schema", async () => {
  const r = await generateObject({ model: m, schema: Person, prompt: "Describe a person.", maxOutputTokens: 150, maxRetries: 0 });
  Person.parse(r.object);
  assert.ok(r.usage.outputTokens > 0);
});

await step("ai-sdk: abort mid-stream frees the slot", async () => {
  const ac = new AbortController();
  const r = streamText({ model: m, prompt: "Tell me a long story.", maxOutputTokens: 1500, abortSignal: ac.signal, maxRetries: 0, onError: () => {} });
  let n = 0;
  try {
    for await (const d of r.textStream) {
      if (++n === 3) ac.abort();
    }
  } catch (e) {
    assert.ok(/abort/i.test(e.name + " " + e.message), String(e));
  }
  assert.ok(n >= 3 && n < 100, `${n} deltas`);
  await slotsIdle();
});

await step("ai-sdk: errors as APICallError with the server's status and message", async () => {
  await assert.rejects(generateText({ model: braid("no-such-model"), prompt: "hi", maxRetries: 0 }), (e) => APICallError.isInstance(e) && e.statusCode === 404 && /no-such-model/.test(e.message));
  await assert.rejects(generateText({ model: m, prompt: "hi", temperature: 9, maxRetries: 0 }), (e) => APICallError.isInstance(e) && e.statusCode === 400 && /temperature/.test(e.message));
});
