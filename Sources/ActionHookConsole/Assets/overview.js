// Overview: every app with its last hour and day (replies by outcome, follow-ups by status, dead
// letters) and two charts of the last hour, refreshed every 10 seconds.

import { seg } from "./api.js";
import { h, replace } from "./dom.js";
import { latencyChart, OUTCOMES, repliesChart } from "./chart.js";

const STATUSES = ["pending", "running", "retrying", "delivered", "dead", "cancelled", "skipped"];

function countsTable(title, names, hour, day) {
  return h(
    "table", { class: "counts" },
    h("caption", {}, title),
    h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "1 h"), h("th", {}, "24 h"))),
    h(
      "tbody", {},
      names.map((name) =>
        h("tr", { "data-name": name }, h("th", {}, name), h("td", { class: "hour" }, hour[name] || 0), h("td", { class: "day" }, day[name] || 0)),
      ),
    ),
  );
}

function card(app, hour, day) {
  return h(
    "article", { class: "app-card", "data-app": app.id },
    h("h2", {}, app.name || app.id, " ", h("small", {}, app.id)),
    h(
      "p", { class: "dead-letters" },
      "Dead letters: ",
      h("strong", { class: hour.deadLetters ? "bad" : "" }, hour.deadLetters),
      hour.deadLetters ? h("a", { href: "#followups" }, " review") : null,
    ),
    h(
      "div", { class: "tables" },
      countsTable("Replies by outcome", OUTCOMES, hour.replies, day.replies),
      countsTable("Follow-ups by status", STATUSES, hour.followUps, day.followUps),
    ),
    h("h3", {}, "Last hour"),
    repliesChart(hour.series, hour.bucketSeconds),
    h("ul", { class: "legend" }, OUTCOMES.map((outcome) => h("li", { class: `outcome-${outcome}` }, outcome))),
    latencyChart(hour.series),
  );
}

export function render(context) {
  const list = h("div", { class: "cards" });
  replace(context.container, h("h1", {}, "Overview"), list);
  if (!context.apps.length) {
    replace(list, h("p", { class: "empty" }, "No app exists yet. Create one with POST /v1/apps."));
    return null;
  }
  async function refresh() {
    try {
      const cards = [];
      for (const app of context.apps) {
        const base = `/v1/apps/${seg(app.id)}/stats`;
        const [hour, day] = await Promise.all([context.call("GET", `${base}?window=1h`), context.call("GET", `${base}?window=24h`)]);
        cards.push(card(app, hour, day));
      }
      if (context.alive()) replace(list, cards);
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }
  refresh();
  const timer = setInterval(refresh, 10000);
  return () => clearInterval(timer);
}
