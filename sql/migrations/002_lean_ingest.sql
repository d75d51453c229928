-- Ingest writes only the rows it must, and no per-row checks it does not need.
--
-- Foreign keys on the two tables every ingest writes cost a lookup and a row lock per row (on the
-- app's row, shared by every concurrent batch). Their two jobs are kept another way:
-- - a response or follow-up is only written for an app that exists: each ingest transaction
--   takes a shared advisory lock on its app (class 1, `hashtext(current_schema() || chr(31) || app_id)`) and then checks the
--   app; deleting an app takes the same lock exclusively;
-- - deleting an app deletes its follow-ups and responses in the same transaction (delivery
--   attempts still follow their follow-up through their own foreign key).
ALTER TABLE responses DROP CONSTRAINT responses_app_id_fkey;
ALTER TABLE followups DROP CONSTRAINT followups_app_id_fkey;
ALTER TABLE followups DROP CONSTRAINT followups_app_id_response_id_fkey;

-- A subject's current decision is read from the responses themselves (the newest `accepted` or
-- `declined` per device, through `responses_subject`) instead of being upserted at every ingest.
DROP TABLE subject_decisions;
