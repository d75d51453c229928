-- Signed replies: a device's P-256 public key, and what each reply's signature proved.
--
-- A device has at most a current key and the one it replaced: a reply queued on the phone before the key
-- changed still verifies with the old key for the idempotency window after the change (the service checks
-- the time). A device that is removed (signed out, erased, pushed out past its user's bound) loses both
-- keys, whatever removed it: the trigger below.
ALTER TABLE devices
    ADD COLUMN public_key              bytea,
    ADD COLUMN key_fingerprint         text,
    ADD COLUMN key_registered_at       timestamptz,
    ADD COLUMN previous_public_key     bytea,
    ADD COLUMN previous_key_fingerprint text,
    ADD COLUMN previous_key_retired_at timestamptz;

CREATE FUNCTION actionhook_forget_removed_device_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'removed' THEN
        NEW.public_key := NULL;
        NEW.key_fingerprint := NULL;
        NEW.key_registered_at := NULL;
        NEW.previous_public_key := NULL;
        NEW.previous_key_fingerprint := NULL;
        NEW.previous_key_retired_at := NULL;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER devices_forget_removed_keys BEFORE INSERT OR UPDATE ON devices
    FOR EACH ROW WHEN (NEW.status = 'removed') EXECUTE FUNCTION actionhook_forget_removed_device_keys();

-- signature: `valid` (verified with the key `signature_key` names), `invalid`, or NULL (the reply was not
-- signed). Outcome `unverified`: the reply's category, rule or notification requires a valid signature and
-- it had none; stored for the record, it acts on nothing and answers nothing.
ALTER TABLE responses
    ADD COLUMN signature     text CHECK (signature IN ('valid', 'invalid')),
    ADD COLUMN signature_key text;
-- The partitioned table's check was named when the table was made (011), beside the old table's: found by
-- what it checks.
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN SELECT conname FROM pg_constraint WHERE conrelid = 'responses'::regclass AND contype = 'c'
        AND pg_get_constraintdef(oid) LIKE '%outcome%'
    LOOP
        EXECUTE format('ALTER TABLE responses DROP CONSTRAINT %I', name);
    END LOOP;
END $$;
ALTER TABLE responses ADD CONSTRAINT responses_outcome_check CHECK (outcome IN
    ('accepted', 'declined', 'snoozed', 'snooze_limit_reached', 'commented', 'recorded', 'unmatched', 'expired',
     'superseded', 'unverified'));

-- A send whose replies must be signed (its category's requireSignedReplies, or the send's own).
ALTER TABLE notifications ADD COLUMN signed_replies boolean NOT NULL DEFAULT false;
