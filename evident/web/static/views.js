// The parts of the page an answer fills: the answer with its citation chips, the sources, the
// status banners, the evidence trail, and the document viewer. Data only ever becomes text.

import { append, clear, h, link, show } from "./dom.js";
import { renderDocument } from "./highlight.js";
import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);

export const ACTIONS = ["kept", "corrected", "truncated", "relinked", "dropped"];
const ACTION_MEANING = {
  kept: "verified: the passage is the source's text",
  corrected: "the passage changed a word of its source: the quote is what the source says",
  truncated: "only part of the passage is in its source: the quote keeps that part",
  relinked: "the passage is another retrieved document's text: its citation now points there",
  dropped: "not found in the retrieved text: not used",
};

const strings = (value) => (Array.isArray(value) ? value : []);
const normal = (s) => String(s ?? "").replace(/\[[^[\]\s]+\]/g, "").replace(/[*_`]/g, "").replace(/\s+/g, " ").trim();

// The numbers of the documents, one per document for the whole conversation: a document keeps its
// number in every turn, on its chips, in the source list, the evidence trail and the document view.
let numbers = new Map();

/** Forgets the numbers: a new conversation numbers its documents from 1 again. */
export function resetNumbers() {
  numbers = new Map();
}

/** Numbers of the documents, in the order the answers first cite them, then the other retrieved ones. */
export function documentNumbers(state) {
  // Only a final answer fixes numbers; while a run streams (sources at `retrieve`) they are tried on a copy.
  const into = state.status ? numbers : new Map(numbers);
  const add = (url) => {
    if (typeof url === "string" && !into.has(url)) into.set(url, into.size + 1);
  };
  strings(state.citations).forEach((c) => add(c?.url));
  strings(state.documents).forEach((d) => add(d?.url));
  return into;
}

function documentOf(state, url, spans = []) {
  const docs = strings(state.documents);
  return docs.find((d) => d?.url === url) || chunkOf(docs, url, spans) || null;
}

/** A citation of a chunked retriever's document names the document: the retrieved chunk that holds its
 * first span (by the chunk's start in the document), else its first chunk. */
function chunkOf(docs, url, spans) {
  const chunks = docs.filter((d) => d?.metadata?.chunk_of === url);
  const at = Array.isArray(spans) && Array.isArray(spans[0]) ? spans[0][0] : null;
  const holds = (d) => {
    const start = d.metadata.chunk_start;
    return typeof start === "number" && at !== null && at >= start && at <= start + String(d.content).length;
  };
  return chunks.find(holds) || chunks[0] || null;
}

/** Spans into the shown text: document offsets of a chunk shifted by where the chunk starts. */
function intoShown(doc, url, spans) {
  const start = doc.url !== url ? doc.metadata?.chunk_start : null;
  if (typeof start !== "number") return spans;
  return strings(spans).map((s) => (Array.isArray(s) ? [s[0] - start, s[1] - start] : s));
}

/** Which citation a marker `[url]` after `sentence` stands for: each citation is used once, in order. */
function citationMatcher(citations) {
  const used = new Set();
  return (url, sentence) => {
    const said = normal(sentence);
    const free = citations.map((c, i) => [c, i]).filter(([c, i]) => c?.url === url && !used.has(i));
    const pick = free.find(([c]) => normal(c.sentence) && said.endsWith(normal(c.sentence)))
      || free.find(([c]) => normal(c.sentence) && said.includes(normal(c.sentence)))
      || free[0]
      || citations.map((c, i) => [c, i]).find(([c]) => c?.url === url);
    if (!pick) return null;
    used.add(pick[1]);
    return pick[1];
  };
}

/**
 * The verified answer into `target` (the current answer, or a turn of the conversation), with one chip
 * per citation marker; `open(index, chip)` opens a citation of this answer.
 */
export function renderAnswer(state, open, target = $("answer")) {
  const citations = strings(state.citations);
  const numbers = documentNumbers(state);
  const match = citationMatcher(citations);
  clear(target);
  const cite = (url, sentence) => {
    const index = match(url, sentence);
    if (index === null || !documentOf(state, url)) return null;
    const n = numbers.get(url);
    const doc = documentOf(state, url);
    const chip = h("button", {
      type: "button",
      class: "chip",
      "data-citation": index,
      "data-source": n,
      "data-url": url,
      "aria-controls": "doc-panel",
      "aria-label": `Source ${n}: show the cited text in ${doc.title || url}`,
      title: doc.title || url,
    }, String(n));
    chip.addEventListener("click", () => open(index, chip));
    return chip;
  };
  target.append(renderMarkdown(state.answer || "", cite));
}

const MARKER = /\[([^[\]\s]+)\]/g;

/**
 * The answer as plain text for the clipboard: every citation marker becomes its source number, and the
 * numbered sources follow with their links (or ids).
 */
export function plainAnswer(state) {
  const numbers = documentNumbers(state);
  const cited = [];
  const text = String(state.answer || "").replace(MARKER, (whole, url) => {
    if (!numbers.has(url)) return whole;
    if (!cited.includes(url)) cited.push(url);
    return `[${numbers.get(url)}]`;
  }).replace(/\*\*|__/g, "").replace(/[ \t]+\n/g, "\n").trim();
  if (!cited.length) return text;
  const lines = cited.sort((a, b) => numbers.get(a) - numbers.get(b)).map((url) => {
    const doc = strings(state.documents).find((d) => d?.url === url);
    const title = doc?.title && doc.title !== url ? `${doc.title}: ` : "";
    return `[${numbers.get(url)}] ${title}${url}`;
  });
  return `${text}\n\nSources:\n${lines.join("\n")}`;
}

/** Sources with titles, links (http/https only) and the source they came from; failures after them. */
export function renderSources(state, openDocument) {
  const numbers = documentNumbers(state);
  const citedUrls = new Set(strings(state.citations).map((c) => c?.url));
  const list = clear($("sources"));
  const docs = [...strings(state.documents)].sort((a, b) => numbers.get(a.url) - numbers.get(b.url));
  for (const doc of docs) {
    const button = h("button", { type: "button", class: "secondary small" }, "Show document");
    button.addEventListener("click", () => openDocument(doc.url, button));
    list.append(h("li", { value: numbers.get(doc.url), "data-source": numbers.get(doc.url),
    class: citedUrls.has(doc.url) ? "cited-source" : null },
      h("span", { class: "source-title" }, doc.title || doc.url),
      h("span", { class: "source-url" }, link(doc.url)),
      h("span", { class: "source-meta" }, [doc.source ? `from ${doc.source}` : null,
        citedUrls.has(doc.url) ? "cited" : "retrieved, not cited"].filter(Boolean).join(" · ")),
      button));
  }
  if (!docs.length) list.append(h("li", { class: "none" }, "No document was retrieved."));
  // An error with nothing retrieved shows no empty panel: the banner says what went wrong.
  const empty = !docs.length && !strings(state.source_errors).length;
  const failures = clear($("source-failures"));
  const errors = strings(state.source_errors);
  if (errors.length) {
    failures.append(h("h3", {}, "Sources that failed"),
      h("ul", { class: "failures" }, errors.map((e) => h("li", {}, h("strong", {}, String(e?.source ?? "?")), `: ${e?.message ?? ""} (${e?.kind ?? "error"})`))));
  }
  show($("sources-panel"), !(empty && state.status === "error"));
}

function banner(kind, title, text, items = []) {
  return h("div", { class: `banner ${kind}`, role: kind === "info" ? "status" : "alert", "data-kind": title.toLowerCase() },
    h("p", {}, h("strong", {}, `${title}: `), text),
    items.length ? h("ul", {}, items.map((item) => h("li", {}, item))) : null);
}

/** A hedged answer said next to it (`evidence` "weak"): the documentation does not state it explicitly, so the
 * passages it quotes come closest but may not answer. null for any other answer. */
export function evidenceNote(state) {
  if (state.evidence !== "weak") return null;
  return h("p", { class: "evidence-note", "data-evidence": "weak" }, h("strong", {}, "Weak evidence: "),
    "the documentation does not state the answer explicitly; the quoted passages come closest and may not answer it.");
}

/** The status said plainly: degraded (and why), insufficient, error; what the request had ignored. */
export function renderStatus(state) {
  const alerts = clear($("alerts"));
  const sourceErrors = strings(state.source_errors).map((e) => `${e?.source ?? "?"}: ${e?.message ?? ""}`);
  const modelErrors = strings(state.model_errors).map((e) => `model ${e?.source ?? ""}: ${e?.message ?? ""}`);
  if (state.status === "degraded") {
    const why = [];
    if (sourceErrors.length) why.push("some sources failed, so this answer may miss what they hold");
    if (modelErrors.length) why.push("the model failed, so where it failed the answer is sentences taken from the documents");
    alerts.append(banner("warn", "Degraded", `${why.join("; ") || "part of the query failed"}.`,
      [...sourceErrors, ...modelErrors]));
  } else if (state.status === "insufficient") {
    alerts.append(banner("info", "Insufficient",
      "the retrieved documents do not support an answer to this question, so none was written."));
  } else if (state.status === "error") {
    alerts.append(banner("error", "Error", `the question could not be answered: ${state.error || "unknown error"}`,
      [...sourceErrors, ...modelErrors]));
  }
  if (modelErrors.length && !["degraded", "error"].includes(state.status)) {
    alerts.append(banner("error", "Model failure", "the model failed during this query.", modelErrors));
  }
  if (strings(state.notes).length) alerts.append(banner("info", "Note", "", strings(state.notes).map(String)));
}

export function showError(title, text) {
  clear($("alerts")).append(banner("error", title, text));
}

const sameText = (a, b) => Boolean(a && b) && String(a).replace(/\s+/g, " ").trim() === String(b).replace(/\s+/g, " ").trim();
const fixed = (x) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(2) : "–");

/** Every alignment decision, with its overlap, reason, the passage as proposed and the verified quote. */
export function renderTrail(state, openSpans) {
  const decisions = strings(state.alignment);
  const counts = Object.fromEntries(ACTIONS.map((a) => [a, 0]));
  decisions.forEach((d) => { counts[d?.action] = (counts[d?.action] || 0) + 1; });
  // Which passages the answer rests on: the citations name them (known once the answer is final).
  const final = Boolean(state.status);
  const used = new Set(strings(state.citations).flatMap((c) => strings(c?.passage_ids).map(String)));
  const numbers = documentNumbers(state);
  const usedCount = decisions.filter((d) => used.has(String(d?.passage_id))).length;
  $("trail-counts").textContent = `${decisions.length} passage${decisions.length === 1 ? "" : "s"}: `
    + ACTIONS.map((a) => `${counts[a]} ${a}`).join(", ")
    + (final && decisions.length ? `; ${usedCount} used in the answer` : "");
  const list = clear($("trail"));
  for (const d of decisions) {
    const action = ACTIONS.includes(d?.action) ? d.action : "dropped";
    const moved = action !== "dropped" && Boolean(d.url) && Boolean(d.original_url) && d.original_url !== d.url;
    const facts = h("dl", { class: "facts" },
      h("dt", {}, "Overlap"), h("dd", {}, moved
        ? `${fixed(d.overlap)} with the cited document, ${fixed(d.final_overlap)} with the one it now cites`
        : `${fixed(d.overlap)} with the cited document`),
      h("dt", {}, moved ? "Cited by the model" : "Cited document"), h("dd", {}, link(d.original_url || d.url)),
      moved ? [h("dt", {}, "Now cites"), h("dd", {}, link(d.url))] : null,
      d.reason ? [h("dt", {}, "Reason"), h("dd", {}, String(d.reason))] : null);
    const isUsed = used.has(String(d?.passage_id));
    const source = numbers.get(d?.url);
    const item = h("li", { class: `decision ${action}${final && !isUsed ? " unused" : ""}`, "data-action": action,
      "data-used": final ? String(isUsed) : null },
      h("p", { class: "decision-head" },
        h("span", { class: `badge ${action}` }, action), " ",
        final && action !== "dropped" ? [h("span", { class: `badge ${isUsed ? "used" : "not-used"}` },
          isUsed ? "used in the answer" : "not used in the answer"), " "] : null,
        source && action !== "dropped" ? [h("span", { class: "source-number" }, `source ${source}`), " · "] : null,
        h("span", { class: "passage-id" }, `passage ${d.passage_id ?? "?"}`), " — ",
        h("span", { class: "meaning" }, ACTION_MEANING[action])),
      facts,
      headingPath(d.heading_path) && action !== "dropped" ? h("p", { class: "heading-path" }, headingPath(d.heading_path)) : null,
      sameText(d.content, d.quote)
        ? [h("p", { class: "label" }, "Passage, verbatim in the source"), h("blockquote", { class: "quote" }, String(d.quote))]
        : [d.content ? [h("p", { class: "label" }, "Proposed passage"), h("blockquote", { class: "proposed" }, String(d.content))] : null,
          d.quote ? [h("p", { class: "label" }, "Verified quote"), h("blockquote", { class: "quote" }, String(d.quote))] : null],
      strings(d.substitutions).length ? h("ul", { class: "substitutions" }, strings(d.substitutions).map((s) =>
        h("li", {}, "The passage says “", String(s?.passage ?? ""), "”, the source says “", String(s?.source ?? ""), "”"))) : null);
    if (action !== "dropped" && strings(d.spans).length && documentOf(state, d.url)) {
      const button = h("button", { type: "button", class: "secondary small" }, "Show in the document");
      button.addEventListener("click", () => openSpans(d.url, d.spans, `Passage ${d.passage_id}`, button, d.heading_path));
      item.append(button);
    }
    list.append(item);
  }
  if (!decisions.length) list.append(h("li", { class: "none" }, "No passage was proposed."));
  const removed = clear($("removed"));
  if (strings(state.removed_sentences).length) {
    removed.append(h("h3", {}, "Sentences removed by verification"),
      h("p", { class: "hint" }, "The draft said these, but the passages they cited do not support them."),
      h("ul", {}, strings(state.removed_sentences).map((s) => h("li", {}, String(s)))));
  }
  show($("trail-panel"), !(state.status === "error" && !decisions.length));
}

/**
 * Opens the document at `url` beside the answer: `active` spans highlighted as the ones being read
 * (the first scrolled into view), `others` (the document's other cited spans) more lightly.
 */
/** The title and headings a quote sits under, outermost first, on one line (context, never part of the quote). */
export function headingPath(path) {
  const parts = strings(path).map(String).filter((p) => p);
  return parts.length ? parts.join(" › ") : "";
}

export function showDocument(state, url, { active = [], others = [], caption = "", path = [] }) {
  const doc = documentOf(state, url, active);
  if (!doc) return [];
  active = intoShown(doc, url, active);
  others = intoShown(doc, url, others);
  $("doc-title").textContent = doc.title || doc.url;
  const n = documentNumbers(state).get(doc.url) ?? documentNumbers(state).get(url);
  // The revision the citations are pinned to (docs/revisions.md), so a reader can open that version.
  const revision = typeof doc.metadata?.revision === "string" ? doc.metadata.revision : "";
  append(clear($("doc-meta")), [n ? `Source ${n} · ` : "", link(doc.url), doc.source ? ` · from ${doc.source}` : "",
    revision ? ` · revision ${revision}` : ""]);
  $("doc-cited").textContent = caption;
  $("doc-path").textContent = headingPath(path);
  show($("doc-path"), Boolean(headingPath(path)));
  show($("doc-panel"));
  const marks = renderDocument($("doc-text"), doc.content, active, others);
  $("doc-title").focus({ preventScroll: true });
  centre(marks);
  return marks;
}

/**
 * Scrolls the document so the first visible active mark sits in the middle of the document's box (at its top
 * when the mark is taller than the box), and the page (only if it must) so the whole panel is on screen.
 */
export function centre(marks) {
  const box = $("doc-text");
  box.scrollTop = 0;
  const panel = $("doc-panel").getBoundingClientRect();
  if (panel.top < 0 || panel.bottom > window.innerHeight) window.scrollBy(0, panel.top < 0 ? panel.top - 8 : panel.bottom - window.innerHeight + 8);
  const first = marks.find((m) => m.getClientRects().length);
  if (!first) return;
  const mark = first.getBoundingClientRect();
  const inner = box.getBoundingClientRect();
  const top = mark.top - inner.top;
  // A mark taller than the box starts at its top: centred, its first words would be scrolled away.
  const offset = mark.height >= box.clientHeight ? top - 8 : top + mark.height / 2 - box.clientHeight / 2;
  box.scrollTop = Math.max(0, offset);
}

export function otherSpans(state, url, exceptIndex = -1) {
  return strings(state.citations).flatMap((c, i) => (c?.url === url && i !== exceptIndex ? strings(c.spans) : []));
}
