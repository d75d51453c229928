-- When each attempt was due (the follow-up's due time when it was claimed). With it, an attempt's
-- schedule and its lateness can be read from what was recorded: the wait the retry policy chose is
-- this attempt's due_at minus the previous attempt's finished_at, and the claim's lateness is
-- started_at minus due_at. Rows recorded before this migration have none. Adding a nullable column
-- rewrites nothing.
ALTER TABLE delivery_attempts ADD COLUMN due_at timestamptz;
