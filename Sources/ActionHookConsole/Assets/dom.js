// Builds DOM nodes from data without ever parsing it as HTML: strings become text nodes, so reply
// text and userInfo (written by whoever holds an ingest key) can only ever show as text.

const SVG_NS = "http://www.w3.org/2000/svg";

function setAttributes(node, attributes) {
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    // Event handler attributes would run code and CSP forbids them anyway; links only ever point
    // inside the console, so a javascript: URL from data can never become one.
    if (/^on/i.test(name)) throw new Error(`refused attribute ${name}`);
    if (name === "href" && !String(value).startsWith("#")) throw new Error("refused link outside the console");
    node.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h("td", {class: "x"}, "text", otherNode). */
export function h(tag, attributes, ...children) {
  const node = document.createElement(tag);
  setAttributes(node, attributes);
  return append(node, children);
}

/** An SVG element, for the charts. */
export function svg(tag, attributes, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttributes(node, attributes);
  return append(node, children);
}

/** Replaces a node's children. */
export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** A time as the operator's locale shows it, or a dash. */
export function time(text) {
  if (!text) return "—";
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(text) : date.toLocaleString();
}

/** JSON as indented text, for a <pre>. */
export function json(value) {
  return JSON.stringify(value, null, 2);
}

/**
 * What a reply's signature proved (`{"status", "key"}` or null): "signed" with the device key's fingerprint
 * (`short`: its first 8 digits, for tables; the whole in the title), "invalid signature", or a dash when the
 * reply was not signed.
 */
export function signatureMark(signature, { short = false } = {}) {
  if (!signature || !signature.status) return h("span", { class: "signature-mark", "data-signature": "absent" }, "—");
  const valid = signature.status === "valid";
  return h(
    "span", { class: `signature-mark ${valid ? "valid" : "invalid"}`, "data-signature": valid ? "valid" : "invalid" },
    h(
      "span", {
        class: `badge signature ${valid ? "valid" : "invalid"}`,
        title: valid ? "Signed by the device's registered key." : "The signature did not verify against the device's keys.",
      },
      valid ? "signed" : "invalid signature",
    ),
    valid && signature.key
    ? h("span", { class: "mono key", title: signature.key }, " ", short ? `${signature.key.slice(0, 8)}…` : signature.key)
    : "",
  );
}

/**
 * A reply's user (`{"id", "verified"}` or null) as its id and a "verified" or "unverified" mark: verified
 * when the reply came with a user token the app's keys proved, unverified when it is only the user the
 * send reached the device as. A dash when the reply has no user.
 */
export function userMark(user) {
  if (!user || user.id === undefined || user.id === null) return h("span", { class: "user-mark", "data-verified": "none" }, "—");
  const verified = user.verified === true;
  const word = verified ? "verified" : "unverified";
  return h(
    "span", { class: `user-mark ${word}`, "data-verified": verified ? "true" : "false" },
    h("span", { class: "user-id" }, user.id),
    " ",
    h(
      "span", {
        class: `badge verification ${word}`,
        title: verified ? "The reply came with a user token the app's keys verified." : "No user token: the user the send reached this device as.",
      },
      word,
    ),
  );
}
