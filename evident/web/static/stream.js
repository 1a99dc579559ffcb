// One question of a conversation, asked through the LangGraph API the server exposes: a thread
// (`POST threads`, owned by the caller) holds the conversation, and each question is a run on it
// (`POST threads/{id}/runs/stream` with the question as the user's message), read as server-sent
// events. "updates" brings each finished step's update; the answer arrives whole, verified, with the
// `postprocess` step (the model's draft is never streamed: `verify` may still remove its sentences).
// The graph rewrites a follow-up into a standalone question.

export const GRAPH_ID = "evident";
const STREAM_MODE = ["updates"];

// Channels whose updates add up within a query (their reducer appends); the first step starts afresh.
const ADDITIVE = new Set(["source_errors", "model_errors"]);
const FIRST_STEP = "rewrite";

/** A failed HTTP answer: its status and the server's one-line reason. */
export class HttpError extends Error {
  constructor(status, detail) {
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.detail = detail;
  }
}

async function detailOf(response) {
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text);
    const detail = body?.detail ?? body?.message ?? body?.error;
    if (detail !== undefined) return typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch {
    // not JSON: the text itself, shortened
  }
  return text.slice(0, 300);
}

/** (event, data) pairs of a server-sent event stream. */
export async function* serverSentEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      let event = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) {
        let parsed;
        try {
          parsed = JSON.parse(data.join("\n"));
        } catch {
          parsed = data.join("\n");
        }
        yield [event, parsed];
      }
    }
  }
}

/** A LangGraph `Overwrite` as the API sends it: the value replaces the channel instead of going to its reducer. */
function isOverwrite(value) {
  return value !== null && typeof value === "object" && value.type === "__overwrite__" && "value" in value;
}

/** The state after a step's `update`, as the graph's reducers would make it. */
export function applyUpdate(state, node, update) {
  if (!update || typeof update !== "object") return state;
  const next = node === FIRST_STEP ? {} : { ...state };
  for (const [key, value] of Object.entries(update)) {
    // `rewrite`, a query's first step, replaces (Overwrite) what the thread's previous query left.
    if (isOverwrite(value)) next[key] = value.value;
    else if (ADDITIVE.has(key) && node !== FIRST_STEP) next[key] = [...(next[key] || []), ...(value || [])];
    else if (key === "timings_ms") next[key] = { ...(node === FIRST_STEP ? {} : next[key]), ...value };
    else next[key] = value;
  }
  return next;
}

function headersFor(token, accept) {
  const headers = { "Content-Type": "application/json", Accept: accept };
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

/** A new thread for a conversation; resolves to its id. Throws HttpError when the server refuses. */
export async function newThread({ token, signal }) {
  const response = await fetch("threads", {
    method: "POST", headers: headersFor(token, "application/json"), signal, credentials: "omit", body: "{}",
  });
  if (!response.ok) throw new HttpError(response.status, await detailOf(response));
  const body = await response.json();
  if (typeof body?.thread_id !== "string" || !/^[\w-]+$/.test(body.thread_id)) throw new HttpError(502, "no thread id");
  return body.thread_id;
}

/**
 * Feedback on the run `runId` of the thread `threadId` (score 1 or 0, an optional comment); resolves to the
 * server's answer (`stored`: "langsmith" or "thread"). Throws HttpError when the server refuses it.
 */
export async function sendFeedback({ threadId, runId, score, comment, token }) {
  const response = await fetch(`threads/${encodeURIComponent(threadId)}/runs/${encodeURIComponent(runId)}/feedback`, {
    method: "POST", headers: headersFor(token, "application/json"), credentials: "omit",
    body: JSON.stringify(comment ? { score, comment } : { score }),
  });
  if (!response.ok) throw new HttpError(response.status, await detailOf(response));
  return response.json();
}

/** Re-checks the citations of the thread's answers against the sources now (evident/web/recheck.py). */
export async function recheckThread({ threadId, token }) {
  const response = await fetch(`threads/${encodeURIComponent(threadId)}/recheck`, {
    method: "POST", headers: headersFor(token, "application/json"), credentials: "omit",
  });
  if (!response.ok) throw new HttpError(response.status, await detailOf(response));
  return response.json();
}

/**
 * Asks `question` on the thread `threadId`; calls `on.run(runId)` when the server names the run,
 * `on.step(node, update, state)` for every finished step; resolves to the final state. Throws HttpError when
 * the server refuses the run, and Error("stream: …") when it fails during the run.
 */
export async function ask(question, { threadId, token, signal, on }) {
  const response = await fetch(`threads/${encodeURIComponent(threadId)}/runs/stream`, {
    method: "POST",
    headers: headersFor(token, "text/event-stream"),
    signal,
    credentials: "omit",
    body: JSON.stringify({
      assistant_id: GRAPH_ID,
      input: { messages: [{ role: "user", content: question }] },
      stream_mode: STREAM_MODE,
      on_disconnect: "cancel",
    }),
  });
  if (!response.ok) throw new HttpError(response.status, await detailOf(response));
  let state = {};
  for await (const [event, data] of serverSentEvents(response.body)) {
    if (event === "metadata") {
      if (typeof data?.run_id === "string") on.run?.(data.run_id);
    } else if (event === "updates") {
      for (const [node, update] of Object.entries(data || {})) {
        if (node.startsWith("__")) continue;
        state = applyUpdate(state, node, update);
        on.step(node, update || {}, state);
      }
    } else if (event === "error") {
      const message = typeof data === "string" ? data : data?.message || data?.error || JSON.stringify(data);
      throw new Error(`stream: ${message}`);
    }
  }
  return state;
}
