// LangChain (@langchain/openai's ChatOpenAI, langchain's createAgent)
// against braid serve: invoke and stream with usage metadata, an agent
// that calls a tool and answers with its result, structured output
// validated by a zod schema, and an abort. Usage: node langchain.mjs URL
import { ChatOpenAI } from "@langchain/openai";
import { tool } from "@langchain/core/tools";
import { HumanMessage, ToolMessage, AIMessage } from "@langchain/core/messages";
import { createAgent, createMiddleware } from "langchain";
import { z } from "zod";
import assert from "node:assert/strict";
import { base, apiKey, model, step, slotsIdle } from "./common.mjs";

const llm = (opts = {}) => new ChatOpenAI({ model, apiKey, configuration: { baseURL: base + "/v1" }, maxRetries: 0, timeout: 60_000, maxTokens: 24, ...opts });

await step("langchain: invoke, usage_metadata", async () => {
  const m = await llm().invoke("Tell me a story.");
  assert.ok(m instanceof AIMessage, String(m));
  assert.equal(typeof m.content, "string");
  const u = m.usage_metadata;
  assert.ok(u && u.input_tokens > 0 && u.output_tokens > 0 && u.output_tokens <= 24 && u.total_tokens === u.input_tokens + u.output_tokens, JSON.stringify(u));
});

await step("langchain: stream, usage counted once", async () => {
  let acc;
  for await (const c of await llm().stream("Tell me a story.")) acc = acc ? acc.concat(c) : c;
  const u = acc.usage_metadata;
  // concat adds up every chunk's usage: a server that sent it twice
  // would show twice the tokens.
  assert.ok(u && u.output_tokens > 0 && u.output_tokens <= 24, JSON.stringify(u));
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
});

const calls = [];
const weather = tool(
  async ({ city, unit }) => {
    calls.push({ city, unit });
    return JSON.stringify({ city, temperature: unit === "celsius" ? 21 : 70, unit });
  },
  {
    name: "get_weather",
    description: "The weather in a city",
    schema: z.object({ city: z.string().max(20), unit: z.enum(["celsius", "fahrenheit"]) }),
  },
);

await step("langchain: createAgent calls the tool and answers with its result", async () => {
  // The model has random weights, so it never chooses a tool itself: the
  // middleware requires one on the agent's first model call and none after,
  // as a user forcing a lookup would.
  const forceFirst = createMiddleware({
    name: "ForceToolFirst",
    wrapModelCall: (request, handler) =>
      handler({ ...request, toolChoice: request.messages.some((m) => m instanceof ToolMessage) ? "none" : "required" }),
  });
  const agent = createAgent({ model: llm({ maxTokens: 120 }), tools: [weather], middleware: [forceFirst] });
  const out = await agent.invoke({ messages: [new HumanMessage("What is the weather in Paris?")] });
  const msgs = out.messages;
  const ai = msgs.find((m) => m instanceof AIMessage && m.tool_calls?.length);
  assert.ok(ai, "no tool call: " + JSON.stringify(msgs.map((m) => m._getType())));
  assert.equal(ai.tool_calls[0].name, "get_weather");
  assert.equal(calls.length, ai.tool_calls.length, "the tool ran once per call");
  const tm = msgs.find((m) => m instanceof ToolMessage);
  assert.ok(tm && tm.tool_call_id === ai.tool_calls[0].id, "the tool's result answers its call");
  const last = msgs.at(-1);
  assert.ok(last instanceof AIMessage && !last.tool_calls?.length && typeof last.content === "string", "the agent ends with an answer");
});

await step("langchain: withStructuredOutput (json_schema) validated by zod", async () => {
  const Person = z.object({ name: z.string().max(16), age: z.number().int().min(0).max(120), pets: z.array(z.enum(["cat", "dog"])).max(3) });
  const p = await llm({ maxTokens: 120 }).withStructuredOutput(Person, { name: "person", method: "jsonSchema", strict: true }).invoke("Describe a person.");
  Person.parse(p);
});

await step("langchain: withStructuredOutput (function calling)", async () => {
  const City = z.object({ city: z.string().max(20), country: z.string().max(20) });
  const c = await llm({ maxTokens: 120 }).withStructuredOutput(City, { name: "city", method: "functionCalling" }).invoke("Name a city.");
  City.parse(c);
});

await step("langchain: abort mid-stream frees the slot", async () => {
  const ac = new AbortController();
  let n = 0;
  await assert.rejects(
    (async () => {
      for await (const c of await llm({ maxTokens: 1500 }).stream("Tell me a long story.", { signal: ac.signal })) {
        if (++n === 3) ac.abort();
      }
    })(),
    (e) => /abort/i.test(e.name + " " + e.message),
  );
  await slotsIdle();
});
