// The console's shell: sign-in, the app picker, the page chosen by the URL's fragment, and the
// status line. Each page module exports render(context) and may return a function that stops it
// (its polling) when another page is shown.

import { allPages, APIError, call, clearToken, query, setToken, token } from "./api.js";
import { h, replace } from "./dom.js";
import * as categories from "./categories.js";
import * as followups from "./followups.js";
import * as notifications from "./notifications.js";
import * as overview from "./overview.js";
import * as replies from "./replies.js";
import * as rules from "./rules.js";
import * as users from "./users.js";

const pages = { overview, replies, notifications, users, followups, rules, categories };
const APP_KEY = "actionhook.app";

const elements = {
  login: document.getElementById("login"),
  tokenInput: document.getElementById("token-input"),
  loginError: document.getElementById("login-error"),
  nav: document.getElementById("nav"),
  session: document.getElementById("session"),
  appSelect: document.getElementById("app-select"),
  logout: document.getElementById("logout"),
  page: document.getElementById("page"),
  status: document.getElementById("status"),
};

let apps = [];
let stopPage = null;
let generation = 0;

/** Shows a message in the status line; errors stay until the next page or success. */
function showStatus(message, kind = "info") {
  elements.status.hidden = !message;
  elements.status.className = `status ${kind}`;
  replace(elements.status, message || "");
}

function reportError(error) {
  if (error instanceof APIError && error.status === 401) {
    signOut("The admin token was refused. Sign in again.");
    return;
  }
  showStatus(error instanceof Error ? error.message : String(error), "error");
}

function currentApp() {
  return elements.appSelect.value || null;
}

function signOut(message) {
  clearToken();
  if (stopPage) stopPage();
  stopPage = null;
  apps = [];
  replace(elements.appSelect);
  replace(elements.page);
  elements.nav.hidden = true;
  elements.session.hidden = true;
  elements.login.hidden = false;
  elements.loginError.hidden = !message;
  replace(elements.loginError, message || "");
  showStatus("");
}

async function loadApps() {
  // Every page of apps: an operator rarely has more than a few, but the list is paginated.
  const { items } = await allPages((cursor) => call("GET", `/v1/apps${query({ limit: 500, cursor })}`));
  return items;
}

async function signIn(candidate) {
  setToken(candidate);
  try {
    apps = await loadApps();
  } catch (error) {
    clearToken();
    elements.loginError.hidden = false;
    replace(
      elements.loginError,
      error instanceof APIError && error.status === 401 ? "This token was refused." : `Could not sign in: ${error.message}`,
    );
    return;
  }
  elements.login.hidden = true;
  elements.loginError.hidden = true;
  elements.nav.hidden = false;
  elements.session.hidden = false;
  const remembered = sessionStorage.getItem(APP_KEY);
  replace(elements.appSelect, apps.map((app) => h("option", { value: app.id }, app.name ? `${app.name} (${app.id})` : app.id)));
  if (remembered && apps.some((app) => app.id === remembered)) elements.appSelect.value = remembered;
  show();
}

function show() {
  if (!token()) return;
  if (stopPage) stopPage();
  stopPage = null;
  generation += 1;
  showStatus("");
  const name = (location.hash || "#overview").slice(1);
  const page = pages[name] ? name : "overview";
  for (const link of elements.nav.querySelectorAll("a")) {
    link.classList.toggle("current", link.dataset.page === page);
  }
  const container = h("section", { class: `page page-${page}`, id: `page-${page}` });
  replace(elements.page, container);
  const mine = generation;
  const context = {
    app: currentApp(),
    apps,
    container,
    call,
    // A page whose answers arrive after another page was shown drops them.
    alive: () => mine === generation,
    error: reportError,
    status: showStatus,
  };
  if (!context.app && page !== "overview") {
    replace(container, h("p", { class: "empty" }, "No app exists yet. Create one with POST /v1/apps."));
    return;
  }
  try {
    const stop = pages[page].render(context);
    stopPage = typeof stop === "function" ? stop : null;
  } catch (error) {
    reportError(error);
  }
}

elements.login.addEventListener("submit", (event) => {
  event.preventDefault();
  const candidate = elements.tokenInput.value.trim();
  elements.tokenInput.value = "";
  if (candidate) signIn(candidate);
});
elements.logout.addEventListener("click", () => signOut(""));
elements.appSelect.addEventListener("change", () => {
  sessionStorage.setItem(APP_KEY, currentApp() || "");
  show();
});
window.addEventListener("hashchange", show);
window.addEventListener("unhandledrejection", (event) => reportError(event.reason));

if (token()) {
  signIn(token());
} else {
  signOut("");
}
