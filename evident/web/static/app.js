// The answer page: ask, follow the graph's steps, read the verified answer, open its citations.

import { clear, h, show } from "./dom.js";
import { ACTIONS, otherSpans, renderAnswer, renderDraft, renderSources, renderStatus, renderTrail,
  showDocument, showError } from "./views.js";
import { HttpError, ask, newThread } from "./stream.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "evident.token";

const STEP = {
  rewrite: ["Question", "Reading the question…"],
  retrieve: ["Retrieve", "Searching the sources…"],
  extract_batch: ["Extract (batch)", "Extracting passages…"],
  extract: ["Extract", "Extracting passages…"],
  align: ["Align", "Checking every passage against the retrieved text…"],
  insufficient: ["Insufficient", "Finishing…"],
  generate: ["Generate", "Writing the answer…"],
  verify: ["Verify", "Checking every sentence of the answer…"],
  postprocess: ["Postprocess", "Finishing…"],
};
const NEXT = { rewrite: "retrieve", retrieve: "extract", extract_batch: "extract", extract: "align", align: "generate", generate: "verify",
  verify: "postprocess", insufficient: "postprocess" };

let state = {};
let conversation = { threadId: null, turns: [] }; // the thread of this tab's conversation, and its turns
let running = null; // the AbortController of the question being answered
let draft = "";
let draftFrame = 0;
let lastOpener = null;

const count = (list) => (Array.isArray(list) ? list.length : 0);
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

function summary(node, update, current) {
  switch (node) {
    case "rewrite": {
      const info = update.rewrite || {};
      if (info.problem) return "not accepted";
      return info.rewritten_by && info.rewritten_by !== "none" ? `asked as: ${info.standalone_query}` : "standalone";
    }
    case "retrieve": {
      const failed = count(update.source_errors);
      return `${plural(count(update.documents), "document")}${failed ? `, ${plural(failed, "source")} failed` : ""}`;
    }
    case "extract": return `${plural(count(current.passages), "passage")} proposed`;
    case "extract_batch": return "a batch of documents read";
    case "align": {
      const decisions = Array.isArray(update.alignment) ? update.alignment : [];
      return ACTIONS.map((a) => `${decisions.filter((d) => d?.action === a).length} ${a}`).join(", ");
    }
    case "insufficient": return "no passage survived verification";
    case "generate": return "answer written";
    case "verify": {
      const removed = count(update.removed_sentences);
      return removed ? `${plural(removed, "sentence")} removed` : "every sentence supported";
    }
    case "postprocess": return `status: ${update.status ?? current.status ?? "?"}`;
    default: return "";
  }
}

function setLoading(text) {
  $("loading").textContent = text;
  $("loading").classList.toggle("busy", Boolean(text));
}

function addStep(node, update, current) {
  const [label] = STEP[node] || [node];
  $("steps").append(h("li", { class: "step", "data-node": node },
    h("span", { class: "step-name" }, label), " ", h("span", { class: "step-summary" }, summary(node, update, current))));
  const next = NEXT[node];
  setLoading(next ? STEP[next][1] : "");
}

function savedToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

function needToken(message) {
  show($("token-box"));
  if (message) showError("Access token needed", message);
  $("token").focus();
}

function openCitation(index, chip) {
  const citation = state.citations[index];
  document.querySelectorAll(".chip.current").forEach((c) => c.classList.remove("current"));
  chip.classList.add("current");
  lastOpener = chip;
  showDocument(state, citation.url, {
    active: citation.spans,
    others: otherSpans(state, citation.url, index),
    caption: `Source ${chip.textContent} cited for: “${citation.sentence}”`
      + (citation.span_base === "chunk" ? " (offsets in the retrieved chunk: the source gave no position in its document)" : ""),
  });
}

function openDocument(url, opener) {
  lastOpener = opener;
  showDocument(state, url, { others: otherSpans(state, url), caption: "Cited text is highlighted." });
}

function openSpans(url, spans, caption, opener) {
  lastOpener = opener;
  showDocument(state, url, { active: spans, others: otherSpans(state, url), caption });
}

function closeDocument() {
  show($("doc-panel"), false);
  document.querySelectorAll(".chip.current").forEach((c) => c.classList.remove("current"));
  if (lastOpener && document.contains(lastOpener)) lastOpener.focus();
}

function reset() {
  state = {};
  draft = "";
  for (const id of ["steps", "answer", "sources", "source-failures", "trail", "removed", "alerts"]) clear($(id));
  for (const id of ["answer-panel", "sources-panel", "trail-panel", "doc-panel", "draft-note", "asked-as"]) show($(id), false);
}

function onStep(node, update, current) {
  state = current;
  addStep(node, update, current);
  if (node === "retrieve") renderSources(state, openDocument);
  if (node === "align") renderTrail(state, openSpans);
  if (node === "verify" || node === "postprocess") renderTrail(state, openSpans);
}

const CITATION_MARK = /\s*\[[^\]\s]+\]/g;

/** Earlier questions and their answers (as plain text, citation marks left out), oldest first. */
function renderHistory() {
  const list = $("history");
  clear(list);
  for (const turn of conversation.turns) {
    list.append(h("li", { class: "turn" },
      h("p", { class: "turn-question" }, turn.question),
      h("p", { class: "turn-answer" }, turn.status === "error" ? "No answer." : turn.answer.replace(CITATION_MARK, ""))));
  }
  show($("history-panel"), conversation.turns.length > 0);
}

function newConversation() {
  running?.abort();
  conversation = { threadId: null, turns: [] };
  reset();
  renderHistory();
  show($("progress-panel"), false);
  show($("new-conversation"), false);
  $("question").value = "";
  $("question").focus();
}

function onToken(text) {
  draft += text;
  show($("answer-panel"));
  if (!draftFrame) {
    draftFrame = requestAnimationFrame(() => {
      draftFrame = 0;
      renderDraft(draft, state);
    });
  }
}

function finish(final) {
  state = final;
  cancelAnimationFrame(draftFrame);
  draftFrame = 0;
  if (!final.status) {
    showError("No answer", "the run ended before an answer arrived (the connection may have been cut).");
    return;
  }
  renderStatus(final);
  renderSources(final, openDocument);
  renderTrail(final, openSpans);
  if (final.status !== "error") {
    show($("answer-panel"));
    renderAnswer(final, openCitation);
  }
  if (final.standalone_query && final.rewrite?.rewritten_by && final.rewrite.rewritten_by !== "none") {
    $("asked-as").textContent = `Answered as: ${final.standalone_query}`;
    show($("asked-as"));
  }
}

function explain(error) {
  if (error instanceof HttpError) {
    const detail = error.detail ? `: ${error.detail}` : "";
    if (error.status === 401) {
      needToken(savedToken() ? `the server refused this token${detail}.` : "this server needs an access token: enter yours above.");
    } else if (error.status === 403) showError("Refused", `the server refused the request${detail}.`);
    else if (error.status === 422 || error.status === 400) showError("Not accepted", `the server did not accept the question${detail}.`);
    else showError("Server error", `the server failed (HTTP ${error.status})${detail}.`);
  } else if (String(error?.message || "").startsWith("stream: ")) {
    showError("Server error", `the server failed while answering: ${error.message.slice(8)}.`);
  } else {
    showError("Server unreachable", "the server cannot be reached. Is `evident serve` still running?");
  }
}

async function submit(event) {
  event?.preventDefault();
  const question = $("question").value.trim();
  if (!question) {
    $("question").focus();
    return;
  }
  const url = new URL(window.location.href);
  url.searchParams.set("q", question);
  window.history.replaceState(null, "", url);
  running?.abort();
  const controller = new AbortController();
  running = controller;
  reset();
  renderHistory();
  show($("progress-panel"));
  setLoading(STEP.rewrite[1]);
  $("ask-button").disabled = true;
  document.body.setAttribute("aria-busy", "true");
  try {
    const token = $("token").value.trim();
    conversation.threadId ||= await newThread({ token, signal: controller.signal });
    const final = await ask(question, {
      threadId: conversation.threadId,
      token,
      signal: controller.signal,
      on: { step: onStep, token: onToken },
    });
    if (running === controller) {
      finish(final);
      if (final.status) conversation.turns.push({ question, answer: final.answer || "", status: final.status });
      show($("new-conversation"), conversation.turns.length > 0);
    }
  } catch (error) {
    if (error?.name !== "AbortError" && running === controller) explain(error);
  } finally {
    if (running === controller) {
      running = null;
      setLoading("");
      $("ask-button").disabled = false;
      document.body.removeAttribute("aria-busy");
    }
  }
}

async function checkServer() {
  try {
    const response = await fetch("health", { credentials: "omit" });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      showError("Server not ready", `${body.error || body.retriever?.error || `HTTP ${response.status}`}.`);
      return body;
    }
    // Without a token, a server with authentication says only whether it is up and how to sign in.
    if (body.mode) {
      $("server-note").textContent = body.mode === "offline"
        ? "Offline mode: no model is configured, so answers are sentences taken from the documents."
        : `Model: ${body.model ?? "?"}.`;
      show($("server-note"));
    }
    return body;
  } catch {
    showError("Server unreachable", "the server cannot be reached. Is `evident serve` running?");
    return {};
  }
}

async function start() {
  $("ask-form").addEventListener("submit", submit);
  $("new-conversation").addEventListener("click", newConversation);
  $("doc-close").addEventListener("click", closeDocument);
  $("doc-panel").addEventListener("keydown", (e) => {
    if (e.key === "Escape") closeDocument();
  });
  const token = savedToken();
  $("token").value = token;
  $("token").addEventListener("input", () => {
    try {
      sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    } catch {
      // storage refused (private mode): the token still works for this page
    }
  });
  $("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("token").value = "";
    $("token").focus();
  });
  if (token) show($("token-box"));
  const question = new URLSearchParams(window.location.search).get("q");
  if (question) $("question").value = question;
  const health = await checkServer();
  const authRequired = typeof health.auth === "string" && /tokens|jwt/.test(health.auth);
  if (authRequired) show($("token-box"));
  // A link may carry a question (`/?q=`), but only the user starts a run: a foreign page that links
  // here must not make the user's browser ask, with the user's token, a question the user never asked.
  if (question && question.trim()) {
    if (authRequired && !$("token").value.trim()) needToken("this server needs an access token: enter yours, then ask.");
    else $("question").focus();
  }
}

start();
