// Replies: the newest replies with filters, refreshed every 2 seconds, and one reply's detail
// (its text and userInfo as text, the rule it matched, its follow-ups with every attempt). Each reply
// shows its user with a verified or unverified mark.

import { query, seg } from "./api.js";
import { h, json, replace, signatureMark, time, userMark } from "./dom.js";
import { OUTCOMES } from "./chart.js";

function field(id, label, input) {
  return h("label", { for: id, class: "field" }, h("span", {}, label), input);
}

function isoFromLocal(value) {
  if (!value) return "";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString();
}

/** A follow-up with its attempts, as a reply's detail and the follow-ups page show it. */
export function followUpView(followUp) {
  const attempts = followUp.attempts || [];
  return h(
    "div", { class: "followup", "data-id": followUp.id, "data-status": followUp.status },
    h(
      "p", {},
      h("strong", {}, followUp.channel),
      " ",
      h("span", { class: `badge status status-${followUp.status}` }, followUp.status),
      ` attempt ${followUp.attempt}, due ${time(followUp.dueAt)}`,
      followUp.lastError ? h("span", { class: "last-error" }, ` — ${followUp.lastError}`) : null,
    ),
    attempts.length
    ? h(
      "table", { class: "attempts" },
      h("thead", {}, h("tr", {}, ["#", "started", "result", "HTTP", "error", "ms"].map((name) => h("th", {}, name)))),
      h(
        "tbody", {},
        attempts.map((attempt) =>
          h(
            "tr", { class: `attempt result-${attempt.result}` },
            h("td", {}, attempt.attempt),
            h("td", {}, time(attempt.startedAt)),
            h("td", { class: "result" }, attempt.result),
            h("td", {}, attempt.httpStatus ?? "—"),
            h("td", {}, attempt.errorClass ?? "—"),
            h("td", {}, attempt.durationMs),
          ),
        ),
      ),
    )
    : h("p", { class: "muted" }, "No attempt yet."),
    h("details", {}, h("summary", {}, "Payload"), h("pre", { class: "payload" }, json(followUp.payload))),
  );
}

export function render(context) {
  const app = context.app;
  const inputs = {
    subject: h("input", { id: "filter-subject", type: "text" }),
    action: h("input", { id: "filter-action", type: "text" }),
    category: h("input", { id: "filter-category", type: "text" }),
    user: h("input", { id: "filter-user", type: "text" }),
    outcome: h("select", { id: "filter-outcome" }, h("option", { value: "" }, "any"), OUTCOMES.map((o) => h("option", { value: o }, o))),
    since: h("input", { id: "filter-since", type: "datetime-local" }),
    until: h("input", { id: "filter-until", type: "datetime-local" }),
  };
  const form = h(
    "form", { class: "filters", id: "reply-filters" },
    field("filter-subject", "Subject", inputs.subject),
    field("filter-action", "Action", inputs.action),
    field("filter-category", "Category", inputs.category),
    field("filter-user", "User", inputs.user),
    field("filter-outcome", "Outcome", inputs.outcome),
    field("filter-since", "Since", inputs.since),
    field("filter-until", "Until", inputs.until),
    h("button", { type: "submit" }, "Filter"),
  );
  const feed = h("tbody", { id: "reply-feed" });
  const updated = h("p", { class: "muted", id: "feed-updated" });
  const detail = h("div", { id: "reply-detail", class: "detail" }, h("p", { class: "muted" }, "Select a reply to see its text, userInfo, rule and follow-ups."));
  replace(
    context.container,
    h("h1", {}, "Replies"),
    form,
    h(
      "div", { class: "split" },
      h(
        "div", { class: "feed" },
        updated,
        h(
          "table", { class: "replies" },
          h("thead", {}, h("tr", {}, ["received", "action", "category", "subject", "outcome", "user", "signature"].map((name) => h("th", {}, name)))),
          feed,
        ),
      ),
      detail,
    ),
  );

  let selected = null;
  let lastKey = null;
  let lastDetail = "";

  async function openDetail(id) {
    if (selected !== id) lastDetail = "";
    selected = id;
    for (const row of feed.querySelectorAll("tr")) row.classList.toggle("selected", row.dataset.id === id);
    try {
      const reply = await context.call("GET", `/v1/apps/${seg(app)}/responses/${seg(id)}`);
      if (!context.alive() || selected !== id) return;
      // Refreshed with the feed, redrawn only when something changed (an open <details> stays open).
      const key = JSON.stringify(reply);
      if (key === lastDetail) return;
      lastDetail = key;
      replace(
        detail,
        h("h2", {}, "Reply ", h("code", {}, reply.id)),
        h(
          "dl", {},
          h("dt", {}, "Action"), h("dd", { class: "action" }, reply.actionIdentifier),
          h("dt", {}, "Category"), h("dd", {}, reply.categoryIdentifier ?? "—"),
          h("dt", {}, "Outcome"), h("dd", {}, h("span", { class: `badge outcome-${reply.outcome}` }, reply.outcome)),
          h("dt", {}, "Matched rule"), h("dd", { class: "matched-rule" }, reply.ruleId ?? "none"),
          h("dt", {}, "Subject"), h("dd", {}, reply.subject ?? "—"),
          h("dt", {}, "Device"), h("dd", { class: "mono" }, reply.deviceToken ?? "—"),
          h("dt", {}, "User"), h("dd", { class: "user" }, userMark(reply.user)),
          h("dt", {}, "Signature"), h("dd", { class: "signature" }, signatureMark(reply.signature)),
          h("dt", {}, "Responded"), h("dd", {}, time(reply.respondedAt)),
          h("dt", {}, "Received"), h("dd", {}, time(reply.receivedAt)),
        ),
        h("h3", {}, "Typed text"),
        h("pre", { class: "user-text" }, reply.userText ?? "(none)"),
        h("h3", {}, "userInfo"),
        h("pre", { class: "user-info" }, json(reply.userInfo)),
        h("h3", {}, "Follow-ups"),
        reply.followUps.length ? reply.followUps.map(followUpView) : h("p", { class: "muted" }, "None."),
      );
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }

  function filters() {
    return {
      subject: inputs.subject.value.trim(),
      action: inputs.action.value.trim(),
      category: inputs.category.value.trim(),
      user: inputs.user.value.trim(),
      outcome: inputs.outcome.value,
      since: isoFromLocal(inputs.since.value),
      until: isoFromLocal(inputs.until.value),
      limit: 50,
    };
  }

  async function refresh() {
    try {
      const page = await context.call("GET", `/v1/apps/${seg(app)}/responses${query(filters())}`);
      if (!context.alive()) return;
      if (selected) openDetail(selected);
      replace(updated, `Updated ${new Date().toLocaleTimeString()}; refreshes every 2 s.`);
      const key = page.items.map((reply) => `${reply.id}:${reply.outcome}`).join(",");
      if (key === lastKey) return;
      lastKey = key;
      replace(
        feed,
        page.items.length
        ? page.items.map((reply) => {
          const row = h(
            "tr", { "data-id": reply.id, class: reply.id === selected ? "selected" : "", tabindex: 0 },
            h("td", {}, time(reply.receivedAt)),
            h("td", { class: "action" }, reply.actionIdentifier),
            h("td", {}, reply.categoryIdentifier ?? "—"),
            h("td", {}, reply.subject ?? "—"),
            h("td", {}, h("span", { class: `badge outcome-${reply.outcome}` }, reply.outcome)),
            h("td", { class: "user" }, userMark(reply.user)),
            h("td", { class: "signature" }, signatureMark(reply.signature, { short: true })),
          );
          row.addEventListener("click", () => openDetail(reply.id));
          row.addEventListener("keydown", (event) => {
            if (event.key === "Enter") openDetail(reply.id);
          });
          return row;
        })
        : h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No replies match.")),
      );
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    lastKey = null;
    refresh();
  });
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => clearInterval(timer);
}
