// A document's text with its cited spans highlighted. Spans are the graph's character offsets
// (Python: code points); JavaScript strings count UTF-16 units, so offsets are converted first.

import { h } from "./dom.js";

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

/**
 * Fills `container` with `text`: the `active` spans (the citation being read) in
 * `<mark class="cited active" data-span=i>`, other cited spans of the document in
 * `<mark class="cited">`, the rest as text nodes. Returns the active marks in text order.
 */
export function renderDocument(container, text, active, others) {
  const source = String(text ?? "");
  const toUnit = unitOffsets(source);
  const act = validSpans(active, toUnit);
  const oth = validSpans(others, toUnit);
  const cuts = new Set([0, source.length]);
  for (const [s, e] of [...act, ...oth]) cuts.add(s).add(e);
  const points = [...cuts].filter((p) => p >= 0 && p <= source.length).sort((a, b) => a - b);

  const pieces = []; // [start, end, activeIndex, other]
  for (let k = 0; k + 1 < points.length; k++) {
    const [a, b] = [points[k], points[k + 1]];
    const ai = act.findIndex(([s, e]) => s <= a && b <= e);
    const other = ai < 0 && oth.some(([s, e]) => s <= a && b <= e);
    const prev = pieces[pieces.length - 1];
    if (prev && prev[2] === ai && prev[3] === other) prev[1] = b;
    else pieces.push([a, b, ai, other]);
  }

  const marks = [];
  container.replaceChildren();
  for (const [a, b, ai, other] of pieces) {
    const slice = source.slice(a, b);
    if (ai >= 0) {
      const mark = h("mark", { class: "cited active", "data-span": ai }, slice);
      marks.push(mark);
      container.append(mark);
    } else if (other) {
      container.append(h("mark", { class: "cited" }, slice));
    } else {
      container.append(document.createTextNode(slice));
    }
  }
  return marks;
}
