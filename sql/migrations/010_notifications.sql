-- The send side: notifications ActionHook sends itself, the replies bound to them, and what happens
-- when nobody answers.
--
-- Keys get a scope: `ingest` (the phone's key, `ahk_…`) or `send` (the app's backend, `ahs_…`: sends
-- and reads its notifications). Existing keys are ingest keys; a constant default rewrites no row.
ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'ingest' CHECK (scope IN ('ingest', 'send'));

-- One row per send. `answered_response_id` is set once, by the first reply that acts, in the same
-- transaction that stores it, while that transaction holds the row locked (FOR UPDATE): of two replies
-- in the same millisecond one sets it and the other, waiting for the lock, reads it set.
CREATE TABLE notifications (
    app_id               text NOT NULL,
    id                   uuid NOT NULL,
    -- The Idempotency-Key of the send, kept as long as the notification is (NULL without one).
    idempotency_key      text,
    request_hash         bytea NOT NULL,
    category             text,
    subject              text,
    answers              text NOT NULL CHECK (answers IN ('first', 'each')),
    collapse_id          text NOT NULL,
    -- Pushes that replace the shown notification on the other devices once it is answered, or NULL.
    replace_on_answer    jsonb,
    -- Webhook events asked for: answered, expired (unanswered is a no-reply step's follow-up).
    events               text[] NOT NULL DEFAULT '{}',
    -- [{"deviceToken": "…", "recipient": "…" | null, "followUpId": "…"}], in the order sent.
    devices              jsonb NOT NULL,
    -- [{"afterSeconds": n, "dueAt": "…"}], in order; their follow-ups are rows of `followups`.
    steps                jsonb NOT NULL DEFAULT '[]',
    -- When the first no-reply step comes due: from then an unanswered notification is `unanswered`.
    silence_at           timestamptz,
    expires_at           timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    answered_at          timestamptz,
    answered_response_id uuid,
    -- The 202's body, replayed for the same key and body.
    answer               json NOT NULL,
    PRIMARY KEY (app_id, id),
    UNIQUE (app_id, idempotency_key)
);
CREATE INDEX notifications_history ON notifications (app_id, created_at DESC, id DESC);
CREATE INDEX notifications_subject ON notifications (app_id, subject, created_at DESC) WHERE subject IS NOT NULL;

-- A reply that carried a notification's ActionHook key is stored with it and its device's recipient.
ALTER TABLE responses ADD COLUMN notification_id uuid;
ALTER TABLE responses ADD COLUMN recipient text;
CREATE INDEX responses_by_notification ON responses (app_id, notification_id, received_at)
    WHERE notification_id IS NOT NULL;

-- Outcome `superseded`: a reply to a notification another reply already answered (answers: first);
-- stored, and it acts on nothing.
ALTER TABLE responses DROP CONSTRAINT responses_outcome_check;
ALTER TABLE responses ADD CONSTRAINT responses_outcome_check CHECK (outcome IN
    ('accepted', 'declined', 'snoozed', 'snooze_limit_reached', 'commented', 'recorded', 'unmatched', 'expired',
     'superseded'))
    NOT VALID;
ALTER TABLE responses VALIDATE CONSTRAINT responses_outcome_check;

-- Follow-ups have a second producer: a send writes one push per device and the rows of its no-reply
-- steps and expiry; a winning reply writes the replacing pushes and `notification.answered`.
-- `kind` says which: rule (a rule's follow-up), snooze, push (a send's push to one device), step (a
-- no-reply step's follow-up), expiry (`notification.expired`), replace (a push that replaces the shown
-- notification on another device), answered (`notification.answered`). Steps and the expiry are fenced:
-- a claim that finds their notification answered cancels them instead of sending.
ALTER TABLE followups ALTER COLUMN response_id DROP NOT NULL;
ALTER TABLE followups ADD COLUMN notification_id uuid;
ALTER TABLE followups ADD COLUMN kind text NOT NULL DEFAULT 'rule'
    CHECK (kind IN ('rule', 'snooze', 'push', 'step', 'expiry', 'replace', 'answered'));
-- The no-reply step a `step` row belongs to (from 0). A `push` row's ordinal is its device's position in
-- the send; a `replace` row's is -100 minus that position, `answered`'s -2 (a snooze's is -1).
ALTER TABLE followups ADD COLUMN step integer;
UPDATE followups SET kind = 'snooze' WHERE is_snooze;
ALTER TABLE followups ADD CONSTRAINT followups_has_origin
    CHECK (response_id IS NOT NULL OR notification_id IS NOT NULL) NOT VALID;
CREATE INDEX followups_by_notification ON followups (app_id, notification_id)
    WHERE notification_id IS NOT NULL;

-- Erasure (DELETE …/subjects/{subject} or …/devices/{token}) of a notification's device list: a subject's
-- erasure clears every recipient label; a device's takes its token and label out of the list.
CREATE FUNCTION actionhook_erase_devices(devices jsonb, subject text, device text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_agg(
        CASE WHEN subject IS NOT NULL THEN d.value || '{"recipient": null}'::jsonb
            WHEN d.value ->> 'deviceToken' = device THEN d.value || '{"deviceToken": "", "recipient": null}'::jsonb
            ELSE d.value END ORDER BY d.ordinality), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(devices, '[]'::jsonb)) WITH ORDINALITY AS d(value, ordinality)
$$;

-- A notification's state, by the database's clock: answered once a reply answered it; else expired once
-- expiresAt passed; else unanswered once its first no-reply step came due; else pending. One definition
-- for the list's filter and its rows (a single-SELECT SQL function is inlined where it is called).
CREATE FUNCTION actionhook_notification_status(answered_at timestamptz, expires_at timestamptz,
    silence_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN answered_at IS NOT NULL THEN 'answered'
        WHEN expires_at <= now() THEN 'expired'
        WHEN silence_at <= now() THEN 'unanswered'
        ELSE 'pending' END
$$;
