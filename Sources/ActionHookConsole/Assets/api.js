// Every call goes to this server's admin API with the token as a bearer credential. The token is
// kept in sessionStorage: it lives as long as the tab, is never put in a URL (where logs, history and
// Referer would keep it) and never in a cookie (which the browser would send without being asked).

const TOKEN_KEY = "actionhook.adminToken";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An answer that was not 2xx, with the problem's title and detail. */
export class APIError extends Error {
  constructor(status, problem) {
    super(problem && (problem.detail || problem.title) ? `${problem.title || "Error"}: ${problem.detail || ""}` : `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

/** Calls the admin API; resolves with the parsed JSON body (null for 204). */
export async function call(method, path, body) {
  const headers = { Authorization: `Bearer ${token() || ""}`, Accept: "application/json" };
  const init = { method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const answer = await fetch(path, init);
  const text = await answer.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!answer.ok) throw new APIError(answer.status, parsed);
  return parsed;
}

/** A path segment, percent-encoded. */
export function seg(value) {
  return encodeURIComponent(value);
}

/**
 * Follows a list's pages: `get(cursor)` fetches one (the first with a null cursor) until a page has no
 * next cursor or `pages` pages are in. Resolves with their items and the cursor of the page after them
 * (empty when there is none).
 */
export async function allPages(get, pages = Infinity) {
  const items = [];
  let cursor = null;
  for (let index = 0; index < pages; index += 1) {
    const page = await get(cursor);
    items.push(...page.items);
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  return { items, cursor };
}

/** A query string from the non-empty members of an object. */
export function query(values) {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined && value !== null && value !== "") params.set(name, value);
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}
