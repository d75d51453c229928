-- The key of an app's advisory lock (class 1; see 002): shared by every ingest transaction of the
-- app, taken exclusively by the app's deletion. One definition for both sides, so they cannot drift
-- apart. A single-SELECT SQL function is inlined where it is called, so it costs nothing per call.
-- The schema is part of the key: instances of separate schemas in one database do not block each other.
CREATE FUNCTION actionhook_app_lock_key(app_id text) RETURNS integer
LANGUAGE sql STABLE AS $$ SELECT hashtext(current_schema() || chr(31) || app_id) $$;
