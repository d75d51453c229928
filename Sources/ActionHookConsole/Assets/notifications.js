// Notifications sent through the send API: the newest first with status and subject filters, one
// page more at a time, refreshed every 3 seconds, and one notification's receipt (each device's push
// and what APNs said, the reply that answered it and its latency, the replies it superseded, the
// no-reply steps and the other follow-ups). Subjects and recipient labels come from the app's
// backend and reply fields from phones: all of it is inserted as text only. Each reply shows its user with
// a verified or unverified mark.

import { allPages, query, seg } from "./api.js";
import { h, replace, signatureMark, time, userMark } from "./dom.js";

const STATUSES = ["pending", "answered", "unanswered", "expired"];
const PAGE_SIZE = 50;

function field(id, label, input) {
  return h("label", { for: id, class: "field" }, h("span", {}, label), input);
}

/** A device token cut to its ends, whole in the tooltip; a dash when there is none. */
export function shortToken(token) {
  if (!token) return "—";
  const text = String(token);
  const shown = text.length > 16 ? `${text.slice(0, 8)}…${text.slice(-4)}` : text;
  return h("span", { class: "mono token", title: text }, shown);
}

/** Milliseconds as "850 ms" or "12.3 s". */
function latency(ms) {
  if (ms === undefined || ms === null) return "—";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

/** A reason code such as no_apns_credentials, with line breaks allowed after its underscores only. */
export function reasonText(reason) {
  if (reason === undefined || reason === null || reason === "") return "—";
  return String(reason).split(/(?<=_)/).flatMap((part, index) => (index ? [h("wbr", {}), part] : [part]));
}

function seconds(value) {
  if (value % 86400 === 0) return `${value / 86400} d`;
  if (value % 3600 === 0) return `${value / 3600} h`;
  if (value % 60 === 0) return `${value / 60} min`;
  return `${value} s`;
}

function stateBadge(status) {
  return h("span", { class: `badge state state-${status}` }, status);
}

function followUpStatus(followUp) {
  return h("span", { class: `badge status status-${followUp.status}` }, followUp.status);
}

/** Replies bound to the notification, one row each. */
function replyTable(replies, kind) {
  return h(
    "table", { class: `receipt-table receipt-replies ${kind}` },
    h("thead", {}, h("tr", {}, ["received", "action", "outcome", "device", "recipient", "user", "latency"].map((name) => h("th", {}, name)))),
    h(
      "tbody", {},
      replies.map((reply) =>
        h(
          "tr", { class: "receipt-reply", "data-id": reply.responseId, "data-outcome": reply.outcome },
          h("td", {}, time(reply.receivedAt)),
          h("td", { class: "action" }, reply.actionIdentifier),
          h("td", { class: "outcome" }, h("span", { class: `badge outcome-${reply.outcome}` }, reply.outcome)),
          h("td", {}, shortToken(reply.deviceToken)),
          h("td", { class: "recipient" }, reply.recipient ?? "—"),
          // The signature, when the reply was signed, under its user: the table stays within a laptop's width.
          h("td", { class: "user" }, userMark(reply.user), reply.signature ? h("div", {}, signatureMark(reply.signature, { short: true })) : ""),
          h("td", { class: "latency" }, latency(reply.latencyMs)),
        ),
      ),
    ),
  );
}

/** Follow-ups of a step or of the notification itself: what they push or call and how it went. */
function followUpTable(followUps) {
  return h(
    "table", { class: "receipt-table receipt-followups" },
    h("thead", {}, h("tr", {}, ["kind", "to", "status", "attempts", "HTTP", "reason"].map((name) => h("th", {}, name)))),
    h(
      "tbody", {},
      followUps.map((followUp) =>
        h(
          "tr", { class: "receipt-followup", "data-id": followUp.id, "data-kind": followUp.kind, "data-status": followUp.status },
          h("td", { class: "kind" }, followUp.kind),
          h("td", {}, followUp.deviceToken ? shortToken(followUp.deviceToken) : followUp.channel),
          h("td", { class: "status" }, followUpStatus(followUp)),
          h("td", {}, followUp.attempts),
          h("td", {}, followUp.httpStatus ?? "—"),
          h("td", { class: "reason" }, reasonText(followUp.reason)),
        ),
      ),
    ),
  );
}

function deviceTable(devices) {
  return h(
    "table", { class: "receipt-table receipt-devices" },
    h("thead", {}, h("tr", {}, ["device", "recipient", "push", "HTTP", "reason", "dead token"].map((name) => h("th", {}, name)))),
    h(
      "tbody", {},
      devices.map((device, index) => {
        const push = device.push || null;
        return h(
          "tr", { class: "receipt-device", "data-index": index, "data-token": device.deviceToken, "data-status": push ? push.status : "none" },
          h("td", { class: "device" }, shortToken(device.deviceToken)),
          h("td", { class: "recipient" }, device.recipient ?? "—"),
          h("td", { class: "push" }, push ? followUpStatus(push) : "—"),
          h("td", {}, push && push.httpStatus !== null && push.httpStatus !== undefined ? push.httpStatus : "—"),
          h("td", { class: "reason" }, reasonText(push && push.reason)),
          h("td", { class: "dead" }, push && push.deviceDead ? h("span", { class: "badge bad" }, "dead") : "no"),
        );
      }),
    ),
  );
}

function answerView(answer) {
  if (!answer) return h("p", { class: "muted no-answer" }, "Not answered.");
  return h(
    "dl", { class: "answer", "data-id": answer.responseId },
    h("dt", {}, "Action"), h("dd", { class: "action" }, answer.actionIdentifier),
    h("dt", {}, "Outcome"), h("dd", { class: "outcome" }, h("span", { class: `badge outcome-${answer.outcome}` }, answer.outcome)),
    h("dt", {}, "Rule"), h("dd", { class: "matched-rule" }, answer.ruleId ?? "none"),
    h("dt", {}, "Device"), h("dd", {}, shortToken(answer.deviceToken)),
    h("dt", {}, "Recipient"), h("dd", { class: "recipient" }, answer.recipient ?? "—"),
    h("dt", {}, "User"), h("dd", { class: "user" }, userMark(answer.user)),
    h("dt", {}, "Signature"), h("dd", { class: "signature" }, signatureMark(answer.signature, { short: true })),
    h("dt", {}, "Received"), h("dd", {}, time(answer.receivedAt)),
    h("dt", {}, "Latency"), h("dd", { class: "latency" }, latency(answer.latencyMs)),
    h("dt", {}, "Reply"), h("dd", { class: "mono" }, answer.responseId),
  );
}

function stepView(step, index) {
  const followUps = step.followUps || [];
  return h(
    "div", { class: "step", "data-index": index, "data-fired": step.fired ? "true" : "false" },
    h(
      "p", {},
      h("strong", {}, `Step ${index + 1}`),
      ` after ${seconds(step.afterSeconds)}, due ${time(step.dueAt)}: `,
      h("span", { class: "fired" }, step.fired ? "fired" : "not fired"),
    ),
    followUps.length ? followUpTable(followUps) : h("p", { class: "muted" }, "No follow-up."),
  );
}

/** A notification's receipt. */
function receiptView(receipt) {
  const devices = receipt.devices || [];
  const steps = receipt.steps || [];
  const others = receipt.otherFollowUps || [];
  const superseded = receipt.superseded || [];
  const otherReplies = receipt.otherReplies || [];
  return [
    h("h2", {}, "Notification ", h("code", {}, receipt.id)),
    h(
      "dl", { class: "summary" },
      h("dt", {}, "Status"), h("dd", { class: "state" }, stateBadge(receipt.status)),
      h("dt", {}, "Category"), h("dd", {}, receipt.category ?? "—"),
      h("dt", {}, "Subject"), h("dd", { class: "subject" }, receipt.subject ?? "—"),
      h("dt", {}, "Answers"), h("dd", {}, receipt.answers),
      h("dt", {}, "Collapse id"), h("dd", { class: "mono" }, receipt.collapseId),
      h("dt", {}, "Replace on answer"), h("dd", {}, receipt.replaceOnAnswer ? "yes" : "no"),
      h("dt", {}, "Webhook events"), h("dd", {}, (receipt.webhookEvents || []).length ? receipt.webhookEvents.join(", ") : "none"),
      h("dt", {}, "Created"), h("dd", {}, time(receipt.createdAt)),
      h("dt", {}, "Expires"), h("dd", {}, time(receipt.expiresAt)),
      h("dt", {}, "Answered"), h("dd", {}, time(receipt.answeredAt)),
    ),
    h("h3", {}, `Devices (${devices.length})`),
    devices.length ? deviceTable(devices) : h("p", { class: "muted" }, "None."),
    h("h3", {}, "Answer"),
    answerView(receipt.answer),
    h("h3", {}, "Superseded replies"),
    superseded.length ? replyTable(superseded, "superseded") : h("p", { class: "muted" }, "None."),
    h("h3", {}, "Other replies"),
    otherReplies.length ? replyTable(otherReplies, "other-replies") : h("p", { class: "muted" }, "None."),
    h("h3", {}, "No-reply steps"),
    steps.length ? h("div", { class: "steps" }, steps.map(stepView)) : h("p", { class: "muted" }, "None."),
    h("h3", {}, "Other follow-ups"),
    others.length ? followUpTable(others) : h("p", { class: "muted" }, "None."),
  ];
}

export function render(context) {
  const app = context.app;
  const inputs = {
    status: h("select", { id: "notification-status" }, h("option", { value: "" }, "all"), STATUSES.map((s) => h("option", { value: s }, s))),
    subject: h("input", { id: "notification-subject", type: "text" }),
  };
  const form = h(
    "form", { class: "filters", id: "notification-filters" },
    field("notification-status", "Status", inputs.status),
    field("notification-subject", "Subject", inputs.subject),
    h("button", { type: "submit" }, "Filter"),
  );
  const list = h("tbody", { id: "notification-list" });
  const more = h("button", { type: "button", id: "notification-more", hidden: true }, "More");
  const updated = h("p", { class: "muted", id: "notifications-updated" });
  const detail = h("div", { id: "notification-detail", class: "detail" }, h("p", { class: "muted" }, "Select a notification to see its receipt."));
  replace(
    context.container,
    h("h1", {}, "Notifications"),
    form,
    h(
      "div", { class: "split" },
      h(
        "div", { class: "feed" },
        updated,
        h(
          "table", { class: "notifications" },
          h("thead", {}, h("tr", {}, ["created", "status", "category", "subject", "devices", "answered"].map((name) => h("th", {}, name)))),
          list,
        ),
        h("p", { class: "more" }, more),
      ),
      detail,
    ),
  );

  let selected = null;
  let lastKey = null;
  let lastDetail = "";
  // How many pages the operator asked for; each refresh reloads that many from the newest.
  let pages = 1;
  // Only the latest refresh draws: a slow answer never replaces a newer one.
  let latest = 0;

  async function openDetail(id) {
    if (selected !== id) lastDetail = "";
    selected = id;
    for (const line of list.querySelectorAll("tr")) line.classList.toggle("selected", line.dataset.id === id);
    try {
      const receipt = await context.call("GET", `/v1/apps/${seg(app)}/notifications/${seg(id)}`);
      if (!context.alive() || selected !== id) return;
      // Refreshed with the list, redrawn only when something changed.
      const key = JSON.stringify(receipt);
      if (key === lastDetail) return;
      lastDetail = key;
      replace(detail, receiptView(receipt));
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }

  function filters() {
    return { status: inputs.status.value, subject: inputs.subject.value.trim(), limit: PAGE_SIZE };
  }

  function row(notification) {
    const tr = h(
      "tr", { "data-id": notification.id, "data-status": notification.status, class: notification.id === selected ? "selected" : "", tabindex: 0 },
      h("td", {}, time(notification.createdAt)),
      h("td", { class: "state" }, stateBadge(notification.status)),
      h("td", {}, notification.category ?? "—"),
      h("td", { class: "subject" }, notification.subject ?? "—"),
      h("td", { class: "devices" }, notification.devices),
      h("td", {}, time(notification.answeredAt)),
    );
    tr.addEventListener("click", () => openDetail(notification.id));
    tr.addEventListener("keydown", (event) => {
      if (event.key === "Enter") openDetail(notification.id);
    });
    return tr;
  }

  async function refresh() {
    latest += 1;
    const mine = latest;
    try {
      const { items, cursor } = await allPages((after) => context.call("GET", `/v1/apps/${seg(app)}/notifications${query({ ...filters(), cursor: after })}`), pages);
      if (!context.alive() || mine !== latest) return;
      if (selected) openDetail(selected);
      more.hidden = !cursor;
      replace(updated, `Updated ${new Date().toLocaleTimeString()}; refreshes every 3 s.`);
      const key = items.map((n) => `${n.id}:${n.status}:${n.answeredAt}`).join(",");
      if (key === lastKey) return;
      lastKey = key;
      replace(list, items.length ? items.map(row) : h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No notifications match.")));
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    pages = 1;
    lastKey = null;
    refresh();
  });
  more.addEventListener("click", () => {
    pages += 1;
    lastKey = null;
    refresh();
  });
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}
