// Rules in evaluation order (ascending priority, then id), and a dry run: a reply body run through
// them by POST /v1/apps/{app}/rules/test, which stores nothing.

import { allPages, query, seg } from "./api.js";
import { h, json, replace } from "./dom.js";

const SAMPLE = {
  actionIdentifier: "accept",
  userText: null,
  userInfo: { aps: { category: "event-invite" }, eventId: "42" },
};

export function render(context) {
  const app = context.app;
  const list = h("ol", { id: "rule-list", class: "rules" });
  const body = h("textarea", { id: "dryrun-body", rows: 10, spellcheck: "false" });
  body.value = json(SAMPLE);
  const run = h("button", { type: "submit", id: "dryrun-run" }, "Run");
  const result = h("div", { id: "dryrun-result", class: "detail" });
  const form = h("form", { id: "dryrun" }, h("label", { for: "dryrun-body" }, "Reply body (as the app would send it)"), body, run);
  replace(
    context.container,
    h("h1", {}, "Rules"),
    h("div", { class: "split" }, h("div", {}, h("h2", {}, "Evaluation order"), list), h("div", {}, h("h2", {}, "Dry run"), form, result)),
  );

  async function load() {
    try {
      const { items: rules } = await allPages((cursor) => context.call("GET", `/v1/apps/${seg(app)}/rules${query({ limit: 500, cursor })}`));
      rules.sort((a, b) => a.priority - b.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      if (!context.alive()) return;
      replace(
        list,
        rules.length
        ? rules.map((rule) =>
          h(
            "li", { "data-id": rule.id, class: rule.enabled ? "rule" : "rule disabled" },
            h("p", {}, h("strong", { class: "rule-id" }, rule.id), ` priority ${rule.priority}, handler ${rule.handler.type}`, rule.enabled ? "" : " (disabled)"),
            rule.description ? h("p", { class: "muted" }, rule.description) : null,
            h("details", {}, h("summary", {}, "Definition"), h("pre", {}, json(rule))),
          ),
        )
        : h("li", { class: "empty" }, "No rules: every reply is stored as unmatched."),
      );
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let parsed;
    try {
      parsed = JSON.parse(body.value);
    } catch (error) {
      replace(result, h("p", { class: "error" }, `The body is not JSON: ${error.message}`));
      return;
    }
    try {
      const answer = await context.call("POST", `/v1/apps/${seg(app)}/rules/test`, parsed);
      if (!context.alive()) return;
      replace(
        result,
        h(
          "p", { class: answer.matched ? "match" : "no-match" },
          answer.matched ? "Matched rule " : "No rule matched",
          answer.matched ? h("strong", { class: "matched-rule" }, answer.ruleId) : null,
          `; outcome ${answer.outcome}`,
          answer.subject !== null && answer.subject !== undefined ? `; subject ${answer.subject}` : "",
        ),
        h("h3", {}, "Follow-ups it would create"),
        h("pre", { class: "rendered" }, json(answer.followUps)),
      );
    } catch (error) {
      if (!context.alive()) return;
      const problem = error.problem;
      replace(
        result,
        h("p", { class: "error" }, error.message),
        problem && problem.errors ? h("ul", {}, problem.errors.map((e) => h("li", {}, `${e.pointer}: ${e.detail}`))) : null,
      );
    }
  });
  load();
  return null;
}
