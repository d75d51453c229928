-- Ingest finds a stored idempotency key through the unique constraint on (app_id, idempotency_key)
-- instead of looking every key up first: the batch's responses are inserted with
-- `ON CONFLICT DO NOTHING`, and when fewer rows went in than were sent, this function fails the
-- statement (and with it the transaction) as the constraint would have, so the batch is written
-- again with the keys looked up. Raising it here rather than letting the insert fail keeps the key's
-- value out of the server log (a unique violation's DETAIL line quotes it).
CREATE FUNCTION actionhook_idempotency_key_stored() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an idempotency key of this batch is already stored'
        USING ERRCODE = 'unique_violation', CONSTRAINT = 'responses_app_id_idempotency_key_key';
END
$$;
