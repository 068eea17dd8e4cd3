// The OpenAI Agents SDK (@openai/agents) against braid serve: an agent with
// a zod-typed function tool, over the Chat Completions API and over the
// Responses API (the SDK's default), run whole and streamed: the model is
// required to call the tool on its first turn (the SDK resets the tool
// choice after a tool has run, so the next turn answers), the SDK runs the
// tool, and the run ends with a final output. Usage: node agents.mjs URL
import OpenAI from "openai";
import { Agent, run, tool, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from "@openai/agents";
import { z } from "zod";
import assert from "node:assert/strict";
import { base, apiKey, model, step } from "./common.mjs";

setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: base + "/v1", apiKey, maxRetries: 0, timeout: 60_000 }));

const ran = [];
// The tool is offered until it has run in this run: greedy, the model would
// call it on every turn offered (a random model prefers the call's first
// token), so the turn after it answers.
let runStart = 0;
const weather = tool({
  isEnabled: () => ran.length === runStart,
  name: "get_weather",
  description: "The weather in a city",
  parameters: z.object({ city: z.string().max(20), unit: z.enum(["celsius", "fahrenheit"]) }),
  execute: async ({ city, unit }) => {
    ran.push(city);
    return `It is 21 degrees ${unit} in ${city}.`;
  },
});

// The final answer is structured (outputType): a random model ends a
// schema's JSON when the schema closes, where free text would run to the
// token limit, which the Responses API reports as an incomplete response
// and the SDK as an error.
const Answer = z.object({ city: z.string().max(20), summary: z.string().max(40) });

function agent() {
  return new Agent({
    name: "weather",
    instructions: "Answer questions about the weather.",
    model,
    tools: [weather],
    outputType: Answer,
    // Greedy, so a run is the same every time.
    modelSettings: { toolChoice: "required", maxTokens: 300, parallelToolCalls: false, temperature: 0 },
  });
}

function check(result, before) {
  const items = result.newItems.map((i) => i.type);
  assert.ok(items.includes("tool_call_item"), "no tool call: " + items);
  assert.ok(items.includes("tool_call_output_item"), "the tool's output is not in the run: " + items);
  assert.equal(ran.length, before + 1, "the tool ran once");
  Answer.parse(result.finalOutput);
  assert.ok(items.at(-1) === "message_output_item", "the run ends with a message: " + items);
}

for (const api of ["chat_completions", "responses"]) {
  setOpenAIAPI(api);
  await step(`agents (${api}): the agent calls the tool and answers`, async () => {
    const before = (runStart = ran.length);
    check(await run(agent(), "What is the weather in Paris?", { maxTurns: 8 }), before);
  });
  await step(`agents (${api}): the same run streamed`, async () => {
    const before = (runStart = ran.length);
    const r = await run(agent(), "What is the weather in Paris?", { maxTurns: 8, stream: true });
    let events = 0;
    for await (const e of r) events++;
    await r.completed;
    assert.ok(events > 3, `${events} events`);
    check(r, before);
  });
}
