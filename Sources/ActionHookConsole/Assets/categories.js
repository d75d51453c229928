// Categories drawn as the phone shows an expanded notification: title, body, then the action
// buttons (destructive ones in red) and, for a text-input action, its text field and button.
// The title and body come from the category's latest reply (userInfo.aps.alert) when there is one.

import { allPages, query, seg } from "./api.js";
import { h, replace } from "./dom.js";

function alertOf(reply) {
  const alert = reply && reply.userInfo && reply.userInfo.aps && reply.userInfo.aps.alert;
  if (typeof alert === "string") return { title: null, body: alert };
  if (alert && typeof alert === "object") {
    return { title: typeof alert.title === "string" ? alert.title : null, body: typeof alert.body === "string" ? alert.body : null };
  }
  return { title: null, body: null };
}

function phone(category, appName, alert) {
  const actions = category.actions.map((action) => {
    const options = action.options || [];
    const destructive = options.includes("destructive");
    const button = h(
      "button", { type: "button", class: destructive ? "action destructive" : "action", "data-id": action.identifier, disabled: true },
      action.title,
    );
    const notes = [
      options.includes("foreground") ? "opens the app" : null,
      options.includes("authenticationRequired") ? "needs unlock" : null,
    ].filter(Boolean);
    return h(
      "div", { class: "action-row" },
      button,
      notes.length ? h("span", { class: "muted" }, notes.join(", ")) : null,
      action.textInput
      ? h(
        "div", { class: "text-input-row" },
        h("input", { type: "text", class: "text-input", placeholder: action.textInput.placeholder, disabled: true, "aria-label": action.title }),
        h("button", { type: "button", class: "send", disabled: true }, action.textInput.buttonTitle),
      )
      : null,
    );
  });
  return h(
    "article", { class: "phone-preview", "data-id": category.identifier },
    h(
      "div", { class: "notification" },
      h("p", { class: "notif-app" }, appName),
      h("p", { class: "notif-title" }, alert.title || category.identifier),
      h("p", { class: "notif-body" }, alert.body || "A notification of this category."),
    ),
    h("div", { class: "actions" }, actions.length ? actions : h("p", { class: "muted" }, "No action buttons.")),
    h(
      "p", { class: "muted meta" },
      `Category ${category.identifier}`,
      category.options.length ? `; options ${category.options.join(", ")}` : "",
      category.subjectKey ? `; subject from userInfo.${category.subjectKey}` : "",
    ),
  );
}

export function render(context) {
  const app = context.app;
  const appName = (context.apps.find((a) => a.id === app) || {}).name || app;
  const grid = h("div", { class: "phones", id: "category-list" });
  replace(context.container, h("h1", {}, "Categories"), grid);
  (async () => {
    try {
      const { items: categories } = await allPages((cursor) => context.call("GET", `/v1/apps/${seg(app)}/categories${query({ limit: 500, cursor })}`));
      const latest = await Promise.all(
        categories.map((category) =>
          context.call("GET", `/v1/apps/${seg(app)}/responses?category=${encodeURIComponent(category.identifier)}&limit=1`).then((page) => page.items[0]),
        ),
      );
      if (!context.alive()) return;
      replace(
        grid,
        categories.length
        ? categories.map((category, index) => phone(category, appName, alertOf(latest[index])))
        : h("p", { class: "empty" }, "No categories yet."),
      );
    } catch (error) {
      if (context.alive()) context.error(error);
    }
  })();
  return null;
}
