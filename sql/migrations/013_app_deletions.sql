-- Deleting an app answers at once and removes its history in the background. The `apps` row goes in the
-- deleting transaction (with its keys, categories and rules, which are few), so every route and key of
-- the app stops at once; its id is recorded here until the rows it owns in the tables that grow with
-- traffic are gone. `AppPurger` deletes them in batches of its own transactions, woken by `NOTIFY
-- actionhook_app_deleted`, and removes the record last. An app of the same id cannot be created before:
-- the purge would take its rows too.
CREATE TABLE app_deletions (
    app_id       text PRIMARY KEY,
    requested_at timestamptz NOT NULL DEFAULT now()
);

-- Devices grow with the app's users: purged in batches like the history, not cascaded inside the delete.
ALTER TABLE devices DROP CONSTRAINT devices_app_id_fkey;
