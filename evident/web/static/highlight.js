// A document's text, rendered as Markdown, with its cited spans highlighted. Spans are the graph's
// character offsets (Python: code points); JavaScript strings count UTF-16 units, so offsets are
// converted first.
//
// Exact characters: every character of the source is in the rendered DOM exactly once, in source
// order, so the container's textContent is the source text and a span's marks hold exactly its
// characters. Markdown syntax (`## `, `- `, `**`, table pipes, fences, blank lines) is kept in
// `<span class="md">` elements the stylesheet hides; a paragraph's line breaks (hard-wrapped text,
// PDF lines) stay as "\n" characters that the paragraph's normal white-space shows as spaces.
// Nothing of the document is parsed as HTML: every piece becomes a text node or an element built
// here; links are made only for http(s) targets.

import { h, webUrl } from "./dom.js";

/** A function from a code-point offset in `text` to its UTF-16 offset. */
function unitOffsets(text) {
  if (!/[\uD800-\uDFFF]/.test(text)) return (i) => Math.max(0, Math.min(i, text.length));
  const map = [];
  let unit = 0;
  for (const ch of text) {
    map.push(unit);
    unit += ch.length;
  }
  map.push(unit);
  return (i) => map[Math.max(0, Math.min(i, map.length - 1))];
}

function validSpans(spans, toUnit) {
  return (Array.isArray(spans) ? spans : [])
    .filter((s) => Array.isArray(s) && Number.isInteger(s[0]) && Number.isInteger(s[1]) && s[0] < s[1])
    .map(([s, e]) => [toUnit(s), toUnit(e)]);
}

// -- Markdown blocks over offsets ---------------------------------------------------------------------
// A node is { tag, attrs, kids }; a kid is a node or a run [start, end, hidden].

const FENCE = /^ {0,3}(```|~~~)/;
const HEADING = /^( {0,3}(#{1,6})[ \t]+)(.*?)([ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$/;
const ITEM = /^([ \t]*)([-*+]|\d{1,9}[.)])([ \t]+)(?=\S)/;
const QUOTE = /^ {0,3}>[ \t]?/;
const TABLE_SEP = /^[ \t]*\|?[ \t]*:?-{1,}:?[ \t]*(\|[ \t]*:?-{1,}:?[ \t]*)*\|?[ \t]*$/;

const node = (tag, kids = [], attrs = {}) => ({ tag, attrs, kids });
const run = (a, b, hidden = false) => [a, b, hidden];

function splitLines(text) {
  const out = [];
  let start = 0;
  while (start <= text.length) {
    const nl = text.indexOf("\n", start);
    const end = nl < 0 ? text.length : nl;
    out.push({ start, end, next: nl < 0 ? text.length : nl + 1, text: text.slice(start, end) });
    if (nl < 0) break;
    start = nl + 1;
  }
  return out;
}

const blank = (line) => !line.text.trim();
const isTableStart = (lines, i) => i + 1 < lines.length && lines[i].text.includes("|") && TABLE_SEP.test(lines[i + 1].text)
  && lines[i + 1].text.includes("-");
const startsBlock = (lines, i) => {
  const t = lines[i].text;
  return FENCE.test(t) || HEADING.test(t) || RULE.test(t) || ITEM.test(t) || QUOTE.test(t) || isTableStart(lines, i);
};

/** The Markdown block tree of `text` (offsets into `text`). */
export function parseBlocks(text) {
  const lines = splitLines(text);
  const root = [];
  for (let i = 0; i < lines.length;) {
    const line = lines[i];
    const t = line.text;
    let m;
    if (blank(line)) {
      root.push(run(line.start, line.next, true));
      i++;
    } else if ((m = FENCE.exec(t))) {
      const fence = m[1];
      const kids = [run(line.start, line.next, true)];
      let j = i + 1;
      for (; j < lines.length && !lines[j].text.trim().startsWith(fence); j++) kids.push(run(lines[j].start, lines[j].next));
      if (j < lines.length) kids.push(run(lines[j].start, lines[j].next, true));
      root.push(node("pre", [node("code", kids)]));
      i = j + 1;
    } else if ((m = HEADING.exec(t))) {
      const level = m[2].length;
      const contentStart = line.start + m[1].length;
      const contentEnd = contentStart + m[3].length;
      root.push(node(`h${Math.min(6, level + 2)}`, [run(line.start, contentStart, true),
        ...inline(text, contentStart, contentEnd), run(contentEnd, line.next, true)], { class: `md-h${level}` }));
      i++;
    } else if (RULE.test(t)) {
      root.push(node("hr"), run(line.start, line.next, true));
      i++;
    } else if (isTableStart(lines, i)) {
      i = table(text, lines, i, root);
    } else if (ITEM.test(t)) {
      i = list(text, lines, i, root);
    } else if (QUOTE.test(t)) {
      const kids = [];
      for (; i < lines.length && (m = QUOTE.exec(lines[i].text)); i++) {
        const l = lines[i];
        kids.push(run(l.start, l.start + m[0].length, true), ...inline(text, l.start + m[0].length, l.end),
          run(l.end, l.next, false));
      }
      root.push(node("blockquote", [node("p", kids)]));
    } else {
      const kids = [];
      let j = i;
      for (; j < lines.length && !blank(lines[j]) && (j === i || !startsBlock(lines, j)); j++) {
        kids.push(...inline(text, lines[j].start, lines[j].end));
        // A line break inside a paragraph is a space on screen (normal white-space), the last one is syntax.
        const last = j + 1 >= lines.length || blank(lines[j + 1]) || startsBlock(lines, j + 1);
        if (lines[j].next > lines[j].end) kids.push(run(lines[j].end, lines[j].next, last));
      }
      root.push(node("p", kids));
      i = j;
    }
  }
  return root;
}

function list(text, lines, i, root) {
  const first = ITEM.exec(lines[i].text);
  const ordered = /\d/.test(first[2]);
  const el = node(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) el.attrs.start = String(parseInt(first[2], 10));
  const base = first[1].replace(/\t/g, "    ").length;
  let m;
  while (i < lines.length && (m = ITEM.exec(lines[i].text)) && /\d/.test(m[2]) === ordered) {
    const l = lines[i];
    const depth = Math.min(3, Math.max(0, Math.floor((m[1].replace(/\t/g, "    ").length - base) / 2)));
    const kids = [run(l.start, l.start + m[0].length, true), ...inline(text, l.start + m[0].length, l.end)];
    let j = i + 1;
    // Continuation lines: indented, not blank, not a new item.
    for (; j < lines.length && /^[ \t]+\S/.test(lines[j].text) && !ITEM.test(lines[j].text); j++) {
      kids.push(run(lines[j - 1].end, lines[j - 1].next));
      const indent = /^[ \t]+/.exec(lines[j].text)[0].length;
      kids.push(run(lines[j].start, lines[j].start + indent, true), ...inline(text, lines[j].start + indent, lines[j].end));
    }
    kids.push(run(lines[j - 1].end, lines[j - 1].next, true));
    el.kids.push(node("li", kids, depth ? { class: `depth-${depth}` } : {}));
    i = j;
  }
  root.push(el);
  return i;
}

function table(text, lines, i, root) {
  const el = node("table");
  const rows = [];
  const row = (l, cellTag) => {
    const tr = node("tr");
    // Cells between unescaped pipes; the pipes (and the line break) are syntax.
    const bounds = [];
    for (let k = l.start; k < l.end; k++) if (text[k] === "|" && text[k - 1] !== "\\") bounds.push(k);
    const trimmed = l.text.trim();
    const cuts = [l.start - 1, ...bounds, l.end];
    let pending = l.start;
    for (let c = 0; c + 1 < cuts.length; c++) {
      const [a, b] = [cuts[c] + 1, cuts[c + 1]];
      const edge = (c === 0 && trimmed.startsWith("|")) || (c + 2 === cuts.length && trimmed.endsWith("|"));
      if (edge && !text.slice(a, b).trim()) continue;
      const cell = node(cellTag, [run(pending, a, true), ...inline(text, a, b)]);
      pending = b;
      tr.kids.push(cell);
    }
    const lastCell = tr.kids[tr.kids.length - 1];
    if (lastCell) lastCell.kids.push(run(pending, l.next, true));
    else tr.kids.push(node(cellTag, [run(l.start, l.next, true)]));
    return tr;
  };
  const head = row(lines[i], "th");
  const sepCell = head.kids[head.kids.length - 1];
  sepCell.kids.push(run(lines[i + 1].start, lines[i + 1].next, true));
  rows.push(head);
  let j = i + 2;
  for (; j < lines.length && !blank(lines[j]) && lines[j].text.includes("|"); j++) rows.push(row(lines[j], "td"));
  el.kids = rows;
  root.push(node("div", [el], { class: "table-wrap" }));
  return j;
}

// Inline forms over [a, b): code, bold, italic, http(s) links, backslash escapes.
const INLINE = new RegExp([
  /\\([\\`*_{}[\]()#+\-.!>|])/.source,                      // 1: an escaped character
  /(`+)([^`]|[^`][^]*?[^`])\2(?!`)/.source,                 // 2, 3: code
  /\*\*(?=\S)([^]*?\S)\*\*/.source,                         // 4: bold
  /(?<![\w_])__(?=\S)([^]*?\S)__(?![\w_])/.source,          // 5: bold (not inside a word)
  /\[([^[\]\n]+)\]\(([^()\s]+)\)/.source,                   // 6, 7: a link
  /(?<![\w*])\*(?=[^\s*])([^]*?[^\s*])\*(?![\w*])/.source,  // 8: italic
  /(?<![\w_])_(?=[^\s_])([^]*?[^\s_])_(?![\w_])/.source,    // 9: italic
].join("|"), "g");

function inline(text, a, b) {
  const out = [];
  const source = text.slice(a, b);
  let last = 0;
  for (const m of source.matchAll(INLINE)) {
    const at = a + m.index;
    const end = at + m[0].length;
    if (m[1] !== undefined) {
      out.push(run(a + last, at), run(at, at + 1, true), run(at + 1, end));
    } else if (m[3] !== undefined) {
      const open = m[2].length;
      out.push(run(a + last, at), node("code", [run(at, at + open, true), run(at + open, end - open), run(end - open, end, true)]));
    } else if (m[4] !== undefined || m[5] !== undefined) {
      out.push(run(a + last, at), node("strong", [run(at, at + 2, true), ...inline(text, at + 2, end - 2), run(end - 2, end, true)]));
    } else if (m[6] !== undefined) {
      const href = webUrl(m[7]);
      if (href === null) {
        out.push(run(a + last, end)); // not http(s): shown as the text it is
      } else {
        const textEnd = at + 1 + m[6].length;
        out.push(run(a + last, at), node("a", [run(at, at + 1, true), ...inline(text, at + 1, textEnd), run(textEnd, end, true)],
          { href, target: "_blank", rel: "noopener noreferrer nofollow" }));
      }
    } else {
      out.push(run(a + last, at), node("em", [run(at, at + 1, true), ...inline(text, at + 1, end - 1), run(end - 1, end, true)]));
    }
    last = m.index + m[0].length;
  }
  out.push(run(a + last, b));
  return out.filter((k) => !Array.isArray(k) || k[0] < k[1]);
}

// -- rendering ------------------------------------------------------------------------------------------

/**
 * Fills `container` with `text` rendered as Markdown: the `active` spans (the citation being read)
 * in `<mark class="cited active" data-span=i>`, other cited spans of the document in
 * `<mark class="cited">`. A span crossing elements has one mark per piece. Returns the active
 * marks in text order.
 */
export function renderDocument(container, text, active, others) {
  const source = String(text ?? "");
  const toUnit = unitOffsets(source);
  const act = validSpans(active, toUnit);
  const oth = validSpans(others, toUnit);
  const cuts = [...new Set([...act, ...oth].flat())].sort((x, y) => x - y);
  const marks = [];

  const pieces = (a, b, hidden) => {
    const points = [a, ...cuts.filter((p) => p > a && p < b), b];
    const out = [];
    for (let k = 0; k + 1 < points.length; k++) {
      const [s, e] = [points[k], points[k + 1]];
      const slice = source.slice(s, e);
      const ai = act.findIndex(([x, y]) => x <= s && e <= y);
      const other = ai < 0 && oth.some(([x, y]) => x <= s && e <= y);
      let piece;
      if (ai >= 0) {
        piece = h("mark", { class: "cited active", "data-span": ai }, slice);
        marks.push(piece);
      } else if (other) piece = h("mark", { class: "cited" }, slice);
      else piece = document.createTextNode(slice);
      out.push(piece);
    }
    return hidden ? [h("span", { class: "md" }, out)] : out;
  };
  const build = (kid) => {
    if (Array.isArray(kid)) return pieces(...kid);
    return [h(kid.tag, kid.attrs, kid.kids.flatMap(build))];
  };
  container.replaceChildren(...parseBlocks(source).flatMap(build));
  return marks;
}
