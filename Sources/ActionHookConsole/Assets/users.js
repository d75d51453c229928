// Users: one user looked up by id (the devices registered under it, from GET /v1/apps/{app}/users/{user},
// and its latest replies, from GET /v1/apps/{app}/responses?user=), and the app's registered devices page
// by page, grouped by user. The API has no list of users: the devices are where they show. Both are
// refreshed every 5 seconds. User ids come from the app's backend (and the user tokens it signs), device
// details from phones: all of it is inserted as text only.

import { allPages, APIError, query, seg } from "./api.js";
import { h, replace, time, userMark } from "./dom.js";
import { reasonText, shortToken } from "./notifications.js";

const DEVICE_PAGE = 100;
const REPLIES = 20;

function field(id, label, input) {
  return h("label", { for: id, class: "field" }, h("span", {}, label), input);
}

function deviceStatus(device) {
  return [
    h("span", { class: `badge status status-${device.status}` }, device.status),
    device.reason ? [" ", h("span", { class: "reason" }, reasonText(device.reason))] : null,
  ];
}

/** Devices, one row each: what the app reported, the status APNs or the user left it in, and when. */
function deviceTable(devices) {
  return h(
    "div", { class: "table-wrap" },
    h(
      "table", { class: "devices" },
      h("thead", {}, h("tr", {}, ["device", "platform", "environment", "status", "app", "OS", "model", "registered", "updated"].map((name) => h("th", {}, name)))),
      h(
        "tbody", {},
        devices.map((device) =>
          h(
            "tr", { class: "device", "data-token": device.deviceToken, "data-status": device.status },
            h("td", { class: "token-cell" }, shortToken(device.deviceToken)),
            h("td", { class: "platform" }, device.platform ?? "—"),
            h("td", { class: "environment" }, device.environment ?? "—"),
            h("td", { class: "device-status" }, deviceStatus(device)),
            h("td", { class: "app-version" }, device.appVersion ?? "—"),
            h("td", { class: "os-version" }, device.osVersion ?? "—"),
            h("td", { class: "model" }, device.model ?? "—"),
            h("td", { class: "registered" }, time(device.registeredAt)),
            h("td", { class: "updated" }, time(device.updatedAt)),
          ),
        ),
      ),
    ),
  );
}

function replyTable(replies) {
  return h(
    "div", { class: "table-wrap" },
    h(
      "table", { class: "user-replies" },
      h("thead", {}, h("tr", {}, ["received", "action", "outcome", "subject", "device", "user"].map((name) => h("th", {}, name)))),
      h(
        "tbody", {},
        replies.map((reply) =>
          h(
            "tr", { class: "user-reply", "data-id": reply.id, "data-outcome": reply.outcome },
            h("td", {}, time(reply.receivedAt)),
            h("td", { class: "action" }, reply.actionIdentifier),
            h("td", { class: "outcome" }, h("span", { class: `badge outcome-${reply.outcome}` }, reply.outcome)),
            h("td", { class: "subject" }, reply.subject ?? "—"),
            h("td", {}, shortToken(reply.deviceToken)),
            h("td", { class: "user" }, userMark(reply.user)),
          ),
        ),
      ),
    ),
  );
}

/** Devices grouped by user, users in order of their ids, devices without a user last. */
function groups(devices) {
  const byUser = new Map();
  for (const device of devices) {
    const key = device.user ?? null;
    if (!byUser.has(key)) byUser.set(key, []);
    byUser.get(key).push(device);
  }
  return [...byUser.entries()].toSorted(([a], [b]) => {
    if (a === null || b === null) return a === null ? 1 : -1;
    return a < b ? -1 : a > b ? 1 : 0;
  });
}

/**
 * Whether a user id can be a path segment: the server decodes the path before routing, so an id with a
 * slash (or "." and "..", which the browser resolves) is asked for with the devices list's query instead.
 */
function pathSafe(user) {
  return !user.includes("/") && user !== "." && user !== "..";
}

export function render(context) {
  const app = context.app;
  const input = h("input", { id: "user-id", type: "text", autocomplete: "off", spellcheck: "false" });
  const form = h("form", { class: "filters", id: "user-lookup" }, field("user-id", "User id", input), h("button", { type: "submit" }, "Look up"));
  const detail = h("div", { id: "user-detail", class: "detail" }, h("p", { class: "muted" }, "Look a user up by id, or pick one among the registered devices below."));
  const list = h("div", { id: "device-groups" });
  const more = h("button", { type: "button", id: "devices-more", hidden: true }, "More");
  const updated = h("p", { class: "muted", id: "users-updated" });
  replace(
    context.container,
    h("h1", {}, "Users"),
    form,
    detail,
    h("h2", {}, "Registered devices, by user"),
    updated,
    list,
    h("p", { class: "more" }, more),
  );

  let selected = null;
  let lastDetail = "";
  let lastList = "";
  // How many pages of devices the operator asked for; each refresh reloads that many.
  let pages = 1;
  // Only the latest refresh draws: a slow answer never replaces a newer one.
  let latest = 0;

  async function userDevices(user) {
    if (!pathSafe(user)) {
      const { items } = await allPages((cursor) => context.call("GET", `/v1/apps/${seg(app)}/devices${query({ user, limit: 500, cursor })}`));
      // As GET /users/{user} orders them: active first, newest first.
      return items.toSorted((a, b) => (b.status === "active") - (a.status === "active") || String(b.registeredAt).localeCompare(String(a.registeredAt)));
    }
    try {
      const answer = await context.call("GET", `/v1/apps/${seg(app)}/users/${seg(user)}`);
      return answer.devices;
    } catch (error) {
      if (error instanceof APIError && error.status === 404) return [];
      throw error;
    }
  }

  async function showUser(user, mine) {
    const [devices, replies] = await Promise.all([
      userDevices(user),
      context.call("GET", `/v1/apps/${seg(app)}/responses${query({ user, limit: REPLIES })}`),
    ]);
    if (!context.alive() || mine !== latest || selected !== user) return;
    const key = JSON.stringify([user, devices, replies.items]);
    if (key === lastDetail) return;
    lastDetail = key;
    const active = devices.filter((device) => device.status === "active").length;
    replace(
      detail,
      h("h2", {}, "User ", h("code", { class: "user-id" }, user)),
      h("p", { class: "user-summary" }, `${devices.length} ${devices.length === 1 ? "device" : "devices"}, ${active} active.`),
      h("h3", {}, "Devices"),
      devices.length ? deviceTable(devices) : h("p", { class: "muted no-devices" }, "No device is registered under this user."),
      h("h3", {}, `Latest replies (up to ${REPLIES})`),
      replies.items.length ? replyTable(replies.items) : h("p", { class: "muted no-replies" }, "No reply from this user."),
    );
  }

  function group([user, devices]) {
    const heading = user === null
      ? h("h3", {}, "No user ", h("span", { class: "muted" }, "(anonymous devices)"))
      : h("h3", {}, h("span", { class: "user-id" }, user), " ", h("button", { type: "button", class: "open-user" }, "Open"));
    if (user !== null) heading.querySelector("button").addEventListener("click", () => lookUp(user));
    return h("section", { class: "device-group", "data-user": user ?? "", "data-anonymous": user === null ? "true" : "false" }, heading, deviceTable(devices));
  }

  async function refresh() {
    latest += 1;
    const mine = latest;
    try {
      const [{ items, cursor }] = await Promise.all([
        allPages((after) => context.call("GET", `/v1/apps/${seg(app)}/devices${query({ limit: DEVICE_PAGE, cursor: after })}`), pages),
        selected === null ? null : showUser(selected, mine),
      ]);
      if (!context.alive() || mine !== latest) return;
      more.hidden = !cursor;
      replace(updated, `Updated ${new Date().toLocaleTimeString()}; refreshes every 5 s.`);
      const key = JSON.stringify(items);
      if (key === lastList) return;
      lastList = key;
      replace(list, items.length ? groups(items).map(group) : h("p", { class: "empty" }, "No device is registered."));
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }

  function lookUp(user) {
    input.value = user;
    selected = user || null;
    lastDetail = "";
    if (!selected) replace(detail, h("p", { class: "muted" }, "Look a user up by id, or pick one among the registered devices below."));
    refresh();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    lookUp(input.value.trim());
  });
  more.addEventListener("click", () => {
    pages += 1;
    refresh();
  });
  refresh();
  const timer = setInterval(refresh, 5000);
  return () => clearInterval(timer);
}
