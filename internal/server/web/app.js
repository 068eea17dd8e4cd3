// braid's web page: a chat over /v1/chat/completions (streamed) and a view
// of the cluster from /cluster and /metrics. No dependencies.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { model: "", history: [], busy: null, prevMetrics: null, prevAt: 0, clusterTimer: null };

// ---- settings, kept in localStorage ----
const fields = ["system", "temperature", "top_p", "top_k", "min_p", "max_tokens", "seed", "effort", "apikey"];
for (const f of fields) {
  const v = localStorage.getItem("braid." + f);
  if (v !== null) $(f).value = v;
  $(f).addEventListener("change", () => localStorage.setItem("braid." + f, $(f).value));
}
{
  const v = localStorage.getItem("braid.show_reasoning");
  if (v !== null) $("show_reasoning").checked = v === "1";
  $("show_reasoning").addEventListener("change", () => {
    localStorage.setItem("braid.show_reasoning", $("show_reasoning").checked ? "1" : "0");
    for (const r of document.querySelectorAll(".reasoning")) r.classList.toggle("hidden-r", !$("show_reasoning").checked);
  });
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("apikey").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function apiError(resp) {
  try {
    const j = await resp.json();
    if (j && j.error && j.error.message) return resp.status + ": " + j.error.message;
  } catch (e) { /* not JSON */ }
  return "HTTP " + resp.status;
}

// ---- header: model and health ----
async function refreshHealth() {
  const h = $("health");
  try {
    // /health answers 200 while the server lives (loading included);
    // its body says whether requests can be served now, and why not.
    const r = await fetch("/health");
    const j = await r.json();
    const ready = r.ok && (j.ready === true || (j.ready === undefined && j.status === "ok"));
    h.textContent = ready ? "ready" : (j.reason || j.status);
    h.className = "health " + (ready ? "ok" : "bad");
  } catch (e) {
    h.textContent = "unreachable";
    h.className = "health bad";
  }
  if (!state.model) {
    try {
      const r = await fetch("/v1/models", { headers: headers() });
      if (r.ok) {
        const j = await r.json();
        state.model = j.data[0].id;
        $("model").textContent = state.model;
      } else {
        $("model").textContent = await apiError(r);
      }
    } catch (e) { /* shown by health */ }
  }
}

// ---- tabs ----
function show(view) {
  for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t.dataset.view === view);
  $("view-chat").classList.toggle("hidden", view !== "chat");
  $("view-cluster").classList.toggle("hidden", view !== "cluster");
  clearInterval(state.clusterTimer);
  if (view === "cluster") {
    refreshCluster();
    state.clusterTimer = setInterval(refreshCluster, 2000);
  }
  history.replaceState(null, "", view === "chat" ? "#" : "#" + view);
}
for (const t of document.querySelectorAll(".tab")) t.addEventListener("click", () => show(t.dataset.view));

// ---- chat ----
function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  if (role === "assistant") {
    const r = document.createElement("div");
    r.className = "reasoning" + ($("show_reasoning").checked ? "" : " hidden-r");
    const c = document.createElement("div");
    c.className = "content";
    div.append(r, c);
  } else {
    div.textContent = text;
  }
  $("messages").append(div);
  $("messages").scrollTop = $("messages").scrollHeight;
  return div;
}

function num(id) {
  const v = $(id).value.trim();
  return v === "" ? undefined : Number(v);
}

// readSSE calls onData with each event's parsed data until [DONE].
async function readSSE(resp, onData) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of block.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  const msgs = [];
  const sys = $("system").value.trim();
  if (sys) msgs.push({ role: "system", content: sys });
  msgs.push(...state.history, { role: "user", content: text });
  addMessage("user", text);
  const div = addMessage("assistant", "");
  const rEl = div.querySelector(".reasoning"), cEl = div.querySelector(".content");
  const body = {
    model: state.model, messages: msgs, stream: true, stream_options: { include_usage: true },
    temperature: num("temperature"), top_p: num("top_p"), top_k: num("top_k"), min_p: num("min_p"),
    max_tokens: num("max_tokens"), seed: num("seed"),
  };
  if ($("effort").value) body.reasoning_effort = $("effort").value;
  const ctrl = new AbortController();
  state.busy = ctrl;
  $("send").disabled = true;
  $("stop").disabled = false;
  const t0 = performance.now();
  let first = 0, ntok = 0, usage = null, finish = "";
  let content = "";
  try {
    const resp = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify(body), signal: ctrl.signal });
    if (!resp.ok) throw new Error(await apiError(resp));
    await readSSE(resp, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices || []) {
        const d = ch.delta || {};
        if (d.reasoning_content || d.content) {
          if (!first) first = performance.now();
          ntok++;
        }
        if (d.reasoning_content) rEl.textContent += d.reasoning_content;
        if (d.content) { cEl.textContent += d.content; content += d.content; }
        if (ch.finish_reason) finish = ch.finish_reason;
      }
      $("messages").scrollTop = $("messages").scrollHeight;
    });
    state.history.push({ role: "user", content: text }, { role: "assistant", content: content });
  } catch (e) {
    if (e.name === "AbortError") {
      finish = "stopped";
      state.history.push({ role: "user", content: text }, { role: "assistant", content: content });
    } else {
      div.classList.add("error");
      cEl.textContent += (cEl.textContent ? "\n" : "") + String(e.message || e);
    }
  } finally {
    state.busy = null;
    $("send").disabled = false;
    $("stop").disabled = true;
    const t1 = performance.now();
    const gen = usage ? usage.completion_tokens : ntok;
    let s = gen + " tokens";
    if (first) s += ", first after " + Math.round(first - t0) + " ms";
    if (first && gen > 1 && t1 > first) s += ", " + ((gen - 1) / ((t1 - first) / 1000)).toFixed(1) + " tok/s";
    if (usage) s += ", prompt " + usage.prompt_tokens + " tokens";
    if (finish) s += " (" + finish + ")";
    $("stats").textContent = s;
  }
}

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value;
  if (!text.trim() || state.busy) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) {
    ev.preventDefault();
    $("composer").requestSubmit();
  }
});
$("stop").addEventListener("click", () => state.busy && state.busy.abort());
$("reset").addEventListener("click", () => {
  if (state.busy) state.busy.abort();
  state.history = [];
  $("messages").textContent = "";
  $("stats").textContent = "";
});

// ---- cluster ----

// parseMetrics reads the Prometheus text format: name{labels} value.
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const kv of m[3].matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

function metric(ms, name, labels) {
  for (const m of ms) {
    if (m.name !== name) continue;
    let ok = true;
    for (const k in labels || {}) if (m.labels[k] !== labels[k]) ok = false;
    if (ok) return m.value;
  }
  return undefined;
}

function bytes(n) {
  if (!n) return "?";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}

function card(k, v) {
  const d = document.createElement("div");
  d.className = "card";
  d.innerHTML = '<div class="k"></div><div class="v"></div>';
  d.querySelector(".k").textContent = k;
  d.querySelector(".v").textContent = v;
  return d;
}

function cell(tr, text) {
  const td = document.createElement("td");
  if (text instanceof Node) td.append(text); else td.textContent = text;
  tr.append(td);
  return td;
}

async function refreshCluster() {
  let info, ms;
  try {
    const [ri, rm] = await Promise.all([fetch("/cluster", { headers: headers() }), fetch("/metrics")]);
    if (!ri.ok) throw new Error(await apiError(ri));
    info = await ri.json();
    ms = parseMetrics(await rm.text());
  } catch (e) {
    $("summary").textContent = "cannot read the cluster: " + (e.message || e);
    return;
  }
  const now = performance.now();
  const prev = state.prevMetrics, dt = (now - state.prevAt) / 1000;
  state.prevMetrics = ms;
  state.prevAt = now;
  const delta = (name, labels) => {
    const a = metric(ms, name, labels);
    const b = prev ? metric(prev, name, labels) : undefined;
    return a !== undefined && b !== undefined ? a - b : undefined;
  };
  const gen = delta("braid_generated_tokens_total");
  const tps = gen !== undefined && dt > 0 ? (gen / dt).toFixed(1) : "…";
  const kvUsed = metric(ms, "braid_kv_cache_blocks_used"), kvTotal = metric(ms, "braid_kv_cache_blocks_total");
  const s = $("summary");
  s.textContent = "";
  s.append(
    card("split", info.split + (info.ranks.length > 1 ? " (" + info.split_by + ")" : "")),
    card("ranks", String(info.ranks.length || 1)),
    card("tokens/s (last 2 s)", tps),
    card("KV cache", kvTotal ? ((100 * kvUsed) / kvTotal).toFixed(1) + "% of " + kvTotal + " blocks" : "?"),
    card("slots busy", (metric(ms, "braid_busy_slots") ?? "?") + " / " + info.parallel),
    card("queued", String(metric(ms, "braid_queue_depth") ?? "?")),
    card("generated", String(metric(ms, "braid_generated_tokens_total") ?? 0) + " tokens"),
    card("context", info.ctx + " tokens"),
  );
  const tbody = document.querySelector("#ranks tbody");
  tbody.textContent = "";
  // Per rank and step over the last refresh: its forward pass (its waits
  // for all-reduces and for the previous pipeline stage included), and
  // idle, the rest of the slowest rank's step.
  const timing = {};
  let wall = 0;
  for (const r of info.ranks) {
    const lbl = { rank: String(r.rank) };
    const n = delta("braid_rank_steps_total", lbl);
    if (!n) continue;
    const step = delta("braid_rank_step_seconds_total", lbl) / n;
    const ar = delta("braid_rank_allreduce_seconds_total", lbl) / n;
    const pp = delta("braid_rank_pipeline_seconds_total", lbl) / n;
    timing[r.rank] = { step, ar, pp, comp: Math.max(0, step - ar - pp) };
    wall = Math.max(wall, step);
  }
  for (const r of info.ranks) {
    const tr = document.createElement("tr");
    tr.dataset.rank = r.rank;
    const lbl = { rank: String(r.rank) };
    cell(tr, String(r.rank));
    cell(tr, r.addr);
    let holds = "layers " + r.layers[0] + "–" + (r.layers[1] - 1);
    if (r.tp_size > 1) holds += ", heads " + r.heads[0] + "–" + (r.heads[1] - 1) + " (tensor " + (r.tp_rank + 1) + "/" + r.tp_size + ")";
    cell(tr, holds);
    const need = r.weights_bytes + r.kv_bytes + r.scratch_bytes;
    const mem = document.createElement("div");
    mem.textContent = bytes(need) + " / " + bytes(r.mem_available_bytes);
    mem.title = "weights " + bytes(r.weights_bytes) + ", KV cache " + bytes(r.kv_bytes) + ", scratch " + bytes(r.scratch_bytes);
    if (r.mem_available_bytes) {
      const bar = document.createElement("div");
      bar.className = "bar";
      const fill = document.createElement("div");
      fill.style.width = Math.min(100, (100 * need) / r.mem_available_bytes).toFixed(1) + "%";
      bar.append(fill);
      mem.append(bar);
    }
    cell(tr, mem);
    const tm = timing[r.rank];
    if (tm) {
      const idle = Math.max(0, wall - tm.step);
      cell(tr, duration(wall));
      const c = cell(tr, duration(tm.comp));
      const tot = wall || 1;
      const split = document.createElement("div");
      split.className = "split";
      split.title = "compute, all-reduce, pipeline, idle";
      for (const [k, v] of [["c", tm.comp], ["a", tm.ar], ["p", tm.pp], ["i", idle]]) {
        const seg = document.createElement("div");
        seg.className = k;
        seg.style.width = ((100 * v) / tot).toFixed(1) + "%";
        split.append(seg);
      }
      c.append(split);
      cell(tr, duration(tm.ar));
      cell(tr, duration(tm.pp));
      cell(tr, duration(idle));
    } else {
      for (let i = 0; i < 5; i++) cell(tr, "–");
    }
    cell(tr, String(metric(ms, "braid_rank_steps_total", lbl) ?? metric(ms, "braid_steps_total") ?? 0));
    tbody.append(tr);
  }
}

// duration is seconds in the unit that suits them.
function duration(s) {
  if (s >= 1) return s.toFixed(2) + " s";
  if (s >= 1e-3) return (s * 1e3).toFixed(2) + " ms";
  return (s * 1e6).toFixed(1) + " µs";
}

refreshHealth();
setInterval(refreshHealth, 5000);
show(location.hash === "#cluster" ? "cluster" : "chat");
