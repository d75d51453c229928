// Follow-ups by status: retry a dead one, cancel a pending one, each confirmed before it is sent.
// The list refreshes every 3 seconds so a retried follow-up is seen being delivered.

import { query, seg } from "./api.js";
import { h, replace, time } from "./dom.js";

const STATUSES = ["dead", "pending", "retrying", "running", "delivered", "cancelled", "skipped"];

export function render(context) {
  const app = context.app;
  const status = h("select", { id: "followup-status" }, h("option", { value: "" }, "all"), STATUSES.map((s) => h("option", { value: s }, s)));
  const list = h("tbody", { id: "followup-list" });
  replace(
    context.container,
    h("h1", {}, "Follow-ups"),
    h("label", { for: "followup-status", class: "field inline" }, h("span", {}, "Status"), status),
    h(
      "table", { class: "followups" },
      h("thead", {}, h("tr", {}, ["created", "channel", "status", "attempts", "last error", ""].map((name) => h("th", {}, name)))),
      list,
    ),
  );
  // The follow-up whose action waits for confirmation: the list is not redrawn under the operator.
  let confirming = null;
  let lastKey = null;

  function actions(followUp) {
    const cell = h("td", { class: "actions" });
    const canRetry = followUp.status === "dead";
    const canCancel = followUp.status === "pending" || followUp.status === "retrying";
    if (!canRetry && !canCancel) return cell;
    const verb = canRetry ? "retry" : "cancel";
    const ask = h("button", { type: "button", class: verb }, canRetry ? "Retry" : "Cancel");
    ask.addEventListener("click", () => {
      confirming = followUp.id;
      const yes = h("button", { type: "button", class: `confirm danger` }, canRetry ? "Confirm retry" : "Confirm cancel");
      const no = h("button", { type: "button", class: "keep" }, "Keep as is");
      yes.addEventListener("click", async () => {
        yes.disabled = true;
        try {
          const path = `/v1/apps/${seg(app)}/followups/${seg(followUp.id)}${canRetry ? "/retry" : ""}`;
          await context.call(canRetry ? "POST" : "DELETE", path);
          context.status(canRetry ? "Retry scheduled." : "Follow-up cancelled.", "info");
        } catch (error) {
          context.error(error);
        }
        confirming = null;
        lastKey = null;
        refresh();
      });
      no.addEventListener("click", () => {
        confirming = null;
        lastKey = null;
        refresh();
      });
      replace(cell, h("span", { class: "confirm-question" }, canRetry ? "Send it again? " : "Never send it? "), yes, no);
    });
    return replace(cell, ask);
  }

  async function refresh() {
    if (confirming) return;
    try {
      const page = await context.call("GET", `/v1/apps/${seg(app)}/followups${query({ status: status.value, limit: 100 })}`);
      if (!context.alive() || confirming) return;
      const key = page.items.map((f) => `${f.id}:${f.status}:${f.attempt}`).join(",");
      if (key === lastKey) return;
      lastKey = key;
      replace(
        list,
        page.items.length
        ? page.items.map((followUp) =>
          h(
            "tr", { class: "followup-row", "data-id": followUp.id, "data-status": followUp.status },
            h("td", {}, time(followUp.createdAt)),
            h("td", {}, followUp.channel),
            h("td", {}, h("span", { class: `badge status status-${followUp.status}` }, followUp.status)),
            h("td", {}, followUp.attempt),
            h("td", { class: "last-error" }, followUp.lastError ?? "—"),
            actions(followUp),
          ),
        )
        : h("tr", {}, h("td", { colspan: 6, class: "empty" }, "No follow-ups.")),
      );
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }
  status.addEventListener("change", () => {
    confirming = null;
    lastKey = null;
    refresh();
  });
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}
