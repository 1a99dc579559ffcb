// Building DOM nodes from data: text is always a text node, attributes are set one by one,
// and a link gets an href only when its URL is http or https. No HTML string is ever parsed
// (the page's Content-Security-Policy requires Trusted Types, so the browser would refuse it anyway).

/**
 * h("p", {class: "x"}, "text", child, ...): an element; strings become text nodes.
 * Attribute names are the page's own; values are data and set with setAttribute (never `on*`).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) throw new Error(`event handlers are attached with addEventListener: ${name}`);
    el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return parent;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** The URL if it is an absolute http(s) URL, else null: only those become links. */
export function webUrl(url) {
  try {
    const parsed = new URL(String(url));
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

/** A link to `url` (opened in a new tab, no referrer) when it is http(s); plain text otherwise. */
export function link(url, text = url) {
  const href = webUrl(url);
  if (href === null) return h("span", { class: "plain-url" }, String(text));
  return h("a", { href, target: "_blank", rel: "noopener noreferrer nofollow" }, String(text));
}

export function show(el, visible = true) {
  el.hidden = !visible;
  return el;
}
