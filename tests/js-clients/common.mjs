// What every client script shares: the server's URL (argv[2]), its API key
// and model name (OPENAI_API_KEY, BRAID_MODEL), and step(), which runs one
// conversation, prints "ok NAME" or "FAIL NAME: why" and exits 1 on failure.
// The model (random weights, a tool-calling chat template) knows nothing:
// every tool call and JSON value comes from braid enforcing tool_choice and
// the schema, and free text is noise.
export const base = process.argv[2];
if (!base) {
  console.error("usage: node SCRIPT.mjs URL");
  process.exit(2);
}
export const apiKey = process.env.OPENAI_API_KEY || "none";
export const model = process.env.BRAID_MODEL || "tiny";

export async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    console.error(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
  }
}

// slotsIdle polls llama-server's /slots until no slot is busy: a client that
// went away must not keep the server decoding for it.
export async function slotsIdle(ms = 5000) {
  const until = Date.now() + ms;
  for (;;) {
    const r = await fetch(base + "/slots", { headers: { Authorization: `Bearer ${apiKey}` } });
    const slots = await r.json();
    if (Array.isArray(slots) && slots.every((s) => !s.is_processing)) return;
    if (Date.now() > until) throw new Error("slots still busy after the client went away: " + JSON.stringify(slots));
    await new Promise((res) => setTimeout(res, 50));
  }
}
