// The answer page: ask, follow the graph's steps, read the verified answer, open its citations.

import { append, clear, h, show } from "./dom.js";
import { ACTIONS, evidenceNote, otherSpans, plainAnswer, renderAnswer, renderSources, renderStatus,
  renderTrail, resetNumbers, showDocument, showError } from "./views.js";
import { HttpError, ask, newThread, recheckThread, sendFeedback } from "./stream.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "evident.token";
const MAX_COMMENT = 1000; // the server's bound (evident/web/feedback.py)
const REFUSAL = "Not sufficient information to answer.";

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
let lastOpener = null;
let current = null; // the newest turn: { question, state, threadId, runId }, once it has an answer

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
    case "postprocess": return `status: ${update.status ?? current.status ?? "?"}`
      + ((update.evidence ?? current.evidence) === "weak" ? ", weak evidence" : "");
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

/** Opens citation `index` of the answer `turnState` (the current one, or an earlier turn's). */
function openCitation(turnState, index, chip) {
  const citation = turnState.citations[index];
  document.querySelectorAll(".chip.current").forEach((c) => c.classList.remove("current"));
  chip.classList.add("current");
  lastOpener = chip;
  showDocument(turnState, citation.url, {
    active: citation.spans,
    others: otherSpans(turnState, citation.url, index),
    caption: `Source ${chip.textContent} cited for: “${citation.sentence}”`
      + (citation.span_base === "chunk" ? " (offsets in the retrieved chunk: the source gave no position in its document)" : ""),
    path: citation.heading_path,
  });
}

function openDocument(url, opener) {
  lastOpener = opener;
  showDocument(state, url, { others: otherSpans(state, url), caption: "Cited text is highlighted." });
}

function openSpans(url, spans, caption, opener, path = []) {
  lastOpener = opener;
  showDocument(state, url, { active: spans, others: otherSpans(state, url), caption, path });
}

function closeDocument() {
  show($("doc-panel"), false);
  document.querySelectorAll(".chip.current").forEach((c) => c.classList.remove("current"));
  if (lastOpener && document.contains(lastOpener)) lastOpener.focus();
}

function reset() {
  state = {};
  for (const id of ["steps", "evidence", "answer", "answer-actions", "sources", "source-failures", "trail", "removed", "alerts"]) clear($(id));
  for (const id of ["answer-panel", "sources-panel", "trail-panel", "doc-panel", "asked-as"]) show($(id), false);
}

function onStep(node, update, current) {
  state = current;
  addStep(node, update, current);
  if (node === "retrieve") renderSources(state, openDocument);
  if (node === "align") renderTrail(state, openSpans);
  if (node === "verify" || node === "postprocess") renderTrail(state, openSpans);
}

const CHECKED = {
  changed: "the quote is no longer in its source",
  gone: "the source can no longer be read (deleted, or not visible to you)",
  unchecked: "the source could not be asked",
};

/** The thread's re-check of this answer: the one whose citations are this answer's (same urls and spans). */
function checksOf(result, citations) {
  const key = (list) => JSON.stringify((list || []).map((c) => [c?.url, c?.spans]));
  return (result?.answers || []).find((a) => key(a.checks) === key(citations))?.checks || null;
}

/** "Check sources again": each citation re-checked now; a chip whose quote no longer stands is marked stale. */
function recheckButton(turn, answerEl, status) {
  const button = h("button", { type: "button", class: "secondary small recheck" }, "Check sources again");
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = "Checking the sources…";
    try {
      const checks = checksOf(await recheckThread({ threadId: turn.threadId, token: $("token").value.trim() }),
        turn.state.citations);
      if (!checks) {
        status.textContent = "This answer is no longer in the conversation's history.";
        return;
      }
      const stale = checks.filter((c) => CHECKED[c.outcome]);
      for (const chip of answerEl.querySelectorAll("button.chip[data-citation]")) {
        const check = checks[Number(chip.dataset.citation)];
        chip.classList.toggle("stale", Boolean(check && CHECKED[check.outcome]));
        if (check && CHECKED[check.outcome]) chip.title = `Stale: ${CHECKED[check.outcome]}`;
      }
      status.textContent = stale.length ? `${stale.length} of ${checks.length} quotes no longer stand as cited: marked.`
        : "Every quote still stands in its source.";
    } catch (error) {
      status.textContent = error instanceof HttpError ? `Not checked: ${error.detail || `HTTP ${error.status}`}.`
        : "Not checked: the server cannot be reached.";
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

/** Copy, feedback and re-check for one answer: `turn` holds its question, final state, thread and run;
 * `answerEl`, where its chips are. */
function answerActions(turn, answerEl) {
  const status = h("span", { class: "action-status", role: "status", "aria-live": "polite" });
  const copy = h("button", { type: "button", class: "secondary small copy" }, "Copy answer");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(plainAnswer(turn.state));
      status.textContent = "Copied, with its numbered sources.";
    } catch {
      status.textContent = "The browser refused the clipboard: select the answer and copy it instead.";
    }
  });
  const bar = h("div", { class: "answer-actions" }, copy);
  if (!turn.runId || !turn.threadId) return append(bar, [status]);
  if ((turn.state.citations || []).length) bar.append(recheckButton(turn, answerEl, status));
  const up = h("button", { type: "button", class: "secondary small vote", "data-score": 1, "aria-pressed": "false" }, "Helpful");
  const down = h("button", { type: "button", class: "secondary small vote", "data-score": 0, "aria-pressed": "false" }, "Not helpful");
  const comment = h("input", { type: "text", class: "comment", maxlength: MAX_COMMENT, "aria-label": "Comment (optional)",
    placeholder: "Comment (optional)" });
  const send = h("button", { type: "button", class: "small send" }, "Send feedback");
  const form = h("div", { class: "feedback-form" }, comment, send);
  show(form, false);
  if (turn.feedback) { // given already (this answer was re-drawn as an earlier turn): said, not asked again
    status.textContent = turn.feedback;
    return append(bar, [status]);
  }
  let score = null;
  for (const vote of [up, down]) {
    vote.addEventListener("click", () => {
      score = Number(vote.dataset.score);
      up.setAttribute("aria-pressed", String(score === 1));
      down.setAttribute("aria-pressed", String(score === 0));
      show(form);
      status.textContent = "";
      comment.focus();
    });
  }
  const submitFeedback = async () => {
    if (score === null) return;
    send.disabled = true;
    try {
      const result = await sendFeedback({ threadId: turn.threadId, runId: turn.runId, score,
        comment: comment.value.trim().slice(0, MAX_COMMENT), token: $("token").value.trim() });
      turn.feedback = result?.stored === "langsmith" ? "Thank you: sent to LangSmith with this answer's trace."
        : "Thank you: kept with this conversation.";
      status.textContent = turn.feedback;
      show(form, false);
      up.disabled = down.disabled = true;
    } catch (error) {
      status.textContent = error instanceof HttpError ? `Feedback not taken: ${error.detail || `HTTP ${error.status}`}.`
        : "Feedback not sent: the server cannot be reached.";
    } finally {
      send.disabled = false;
    }
  };
  send.addEventListener("click", submitFeedback);
  comment.addEventListener("keydown", (e) => {
    if (e.key === "Enter") {
      e.preventDefault();
      submitFeedback();
    }
  });
  return append(bar, [h("span", { class: "votes", role: "group", "aria-label": "Was this answer helpful?" }, up, down),
    form, status]);
}

/** Earlier turns, oldest first: each question, and its answer with its citation chips, copy and feedback. */
function renderHistory() {
  const list = $("history");
  clear(list);
  for (const turn of conversation.turns) {
    const answer = h("div", { class: "turn-answer answer" });
    if (turn.state.status === "error") answer.append(h("p", {}, "No answer."));
    else renderAnswer(turn.state, (index, chip) => openCitation(turn.state, index, chip), answer);
    list.append(h("li", { class: "turn" },
      h("p", { class: "turn-question bubble question" }, turn.question),
      evidenceNote(turn.state),
      answer,
      turn.state.status === "error" ? null : answerActions(turn, answer)));
  }
  show($("history-panel"), conversation.turns.length > 0);
}

function newConversation() {
  running?.abort();
  conversation = { threadId: null, turns: [] };
  current = null;
  resetNumbers();
  reset();
  renderHistory();
  show($("progress-panel"), false);
  show($("current-question"), false);
  show($("new-conversation"), false);
  show($("follow-up-hint"), false);
  $("question").value = "";
  $("question").focus();
}

function finish(final, turn) {
  state = final;
  if (!final.status) {
    showError("No answer", "the run ended before an answer arrived (the connection may have been cut).");
    return;
  }
  renderStatus(final);
  renderSources(final, openDocument);
  renderTrail(final, openSpans);
  if (final.status !== "error") {
    show($("answer-panel"));
    append(clear($("evidence")), [evidenceNote(final)]);
    renderAnswer(final, (index, chip) => openCitation(final, index, chip));
    // A refusal cites nothing: there is no sentence to check by opening a citation.
    const refused = final.status === "insufficient" || String(final.answer || "").trim() === REFUSAL
      || !(final.citations || []).length;
    show($("machine-note"), !refused);
    $("answer-actions").replaceChildren(answerActions(turn, $("answer")));
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
  // The answer on screen becomes an earlier turn; the new question takes its place, the box is cleared.
  if (current) conversation.turns.push(current);
  current = null;
  reset();
  renderHistory();
  $("current-question").textContent = question;
  show($("current-question"));
  $("question").value = "";
  show($("progress-panel"));
  setLoading(STEP.rewrite[1]);
  $("ask-button").disabled = true;
  document.body.setAttribute("aria-busy", "true");
  let ok = false;
  try {
    const token = $("token").value.trim();
    conversation.threadId ||= await newThread({ token, signal: controller.signal });
    const turn = { question, state: {}, threadId: conversation.threadId, runId: null };
    const final = await ask(question, {
      threadId: conversation.threadId,
      token,
      signal: controller.signal,
      on: { step: onStep, run: (runId) => { turn.runId = runId; } },
    });
    if (running === controller) {
      turn.state = final;
      finish(final, turn);
      if (final.status) {
        current = turn;
        ok = true;
      }
      const asked = conversation.turns.length + (current ? 1 : 0);
      show($("new-conversation"), asked > 0);
      show($("follow-up-hint"), asked > 0);
    }
  } catch (error) {
    if (error?.name !== "AbortError" && running === controller) explain(error);
  } finally {
    if (running === controller) {
      running = null;
      setLoading("");
      $("ask-button").disabled = false;
      document.body.removeAttribute("aria-busy");
      // Not answered: the question goes back in the box, to ask again.
      if (!ok && !$("question").value) $("question").value = question;
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
