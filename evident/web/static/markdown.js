// Markdown of an answer, rendered to DOM nodes by our own small renderer: every piece of input
// becomes a text node or an element we create, so no input character is ever parsed as HTML.
// Supported: paragraphs, headings, bullet and numbered lists, tables, block quotes, fenced code, rules,
// **bold**, *italic*, `code`, [text](http-url) links, and `[id]` citation markers, which the
// caller turns into citation chips (`cite(id, sentence)` returns a node, or null for plain text).

import { h, link, webUrl } from "./dom.js";

const FENCE = /^\s*(```|~~~)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const ROW = /^\s*\|.*\|\s*$/;
const TABLE_RULE = /^\s*\|?[\s:-]*-[\s|:-]*$/;

// One alternative per inline form, tried left to right at each position.
const INLINE = new RegExp([
  /\\([\\`*_{}[\]()#+\-.!>])/.source,                      // 1: an escaped character
  /(`+)([^`]|[^`][\s\S]*?[^`])\2(?!`)/.source,             // 2, 3: code
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source,                     // 4: bold
  /(?<![\w_])__(?=\S)([\s\S]*?\S)__(?![\w_])/.source,       // 5: bold (not inside a word)
  /\[([^[\]]+)\]\(([^()\s]+)\)/.source,                    // 6, 7: a link
  /\[([^[\]\s]+)\]/.source,                                // 8: a citation marker
  /(?<![\w*])\*(?=[^\s*])([\s\S]*?[^\s*])\*(?![\w*])/.source, // 9: italic
  /(?<![\w_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\w_])/.source,   // 10: italic
].join("|"), "g");

/** The answer `text` as a DocumentFragment; `cite(id, sentence)` makes the chip of a marker. */
export function renderMarkdown(text, cite = () => null) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let para = [];
  const flush = () => {
    if (para.length) frag.append(h("p", {}, inline(para.join(" "), cite)));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    let m;
    if (FENCE.test(line)) {
      flush();
      const fence = line.trim().slice(0, 3);
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence); i++) body.push(lines[i]);
      frag.append(h("pre", {}, h("code", {}, body.join("\n"))));
    } else if (!line.trim()) {
      flush();
    } else if ((m = HEADING.exec(line))) {
      flush();
      // The page's own headings are h1 and h2: an answer's headings sit below them.
      frag.append(h(`h${Math.min(6, m[1].length + 2)}`, {}, inline(m[2], cite)));
    } else if (ROW.test(line) && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
      flush();
      i = table(lines, i, frag, cite) - 1;
    } else if (RULE.test(line)) {
      flush();
      frag.append(h("hr"));
    } else if (ITEM.test(line)) {
      flush();
      i = list(lines, i, frag, cite) - 1;
    } else if (QUOTE.test(line)) {
      flush();
      const body = [];
      for (; i < lines.length && (m = QUOTE.exec(lines[i])); i++) body.push(m[1]);
      i--;
      frag.append(h("blockquote", {}, renderMarkdown(body.join("\n"), cite)));
    } else {
      para.push(line.trim());
    }
  }
  flush();
  return frag;
}

/** The cells of a `| a | b |` row. */
function cells(line) {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
}

/** A table (header row, rule, rows) starting at lines[start]; returns the index of the first line after it. */
function table(lines, start, frag, cite) {
  const head = h("tr", {}, cells(lines[start]).map((c) => h("th", { scope: "col" }, inline(c, cite))));
  const body = [];
  let i = start + 2;
  for (; i < lines.length && ROW.test(lines[i]); i++) {
    body.push(h("tr", {}, cells(lines[i]).map((c) => h("td", {}, inline(c, cite)))));
  }
  frag.append(h("div", { class: "table-wrap" }, h("table", {}, h("thead", {}, head), h("tbody", {}, body))));
  return i;
}

/** A list starting at lines[start]; returns the index of the first line after it. */
function list(lines, start, frag, cite) {
  const first = ITEM.exec(lines[start]);
  const ordered = /\d/.test(first[2]);
  const el = h(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) el.setAttribute("start", String(parseInt(first[2], 10)));
  let i = start;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || /\d/.test(m[2]) !== ordered) break;
    const item = [m[3]];
    // Continuation lines: indented, not blank, not a new item.
    for (i++; i < lines.length && /^\s+\S/.test(lines[i]) && !ITEM.test(lines[i]); i++) item.push(lines[i].trim());
    el.append(h("li", {}, inline(item.join(" "), cite)));
  }
  frag.append(el);
  return i;
}

/**
 * Inline nodes of `text`. `ctx.sentence` collects the source text since the last citation marker,
 * so a marker knows which sentence it follows; consecutive markers share one sentence.
 */
export function inline(text, cite, ctx = { sentence: "", afterCite: false }) {
  const out = [];
  let last = 0;
  const note = (s) => {
    if (ctx.afterCite && s.trim()) {
      ctx.sentence = "";
      ctx.afterCite = false;
    }
    ctx.sentence += s;
  };
  const addText = (s) => {
    if (!s) return;
    note(s);
    out.push(s);
  };
  for (const m of text.matchAll(INLINE)) {
    addText(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1] !== undefined) {
      addText(m[1]);
    } else if (m[3] !== undefined) {
      note(m[3]);
      out.push(h("code", {}, m[3]));
    } else if (m[4] !== undefined || m[5] !== undefined) {
      out.push(h("strong", {}, inline(m[4] ?? m[5], cite, ctx)));
    } else if (m[6] !== undefined) {
      if (webUrl(m[7]) === null) addText(m[0]); // not http(s): shown as the text it is
      else {
        note(m[6]);
        out.push(link(m[7], m[6]));
      }
    } else if (m[8] !== undefined) {
      const chip = cite(m[8], ctx.sentence);
      if (chip) {
        out.push(chip);
        ctx.afterCite = true;
      } else addText(m[0]);
    } else {
      out.push(h("em", {}, inline(m[9] ?? m[10], cite, ctx)));
    }
  }
  addText(text.slice(last));
  return out;
}
