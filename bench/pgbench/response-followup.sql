-- The rows ActionHook stores for the benchmark's request, one request per transaction (P2's reference at 32
-- clients): the response, its idempotency key and its webhook follow-up (BEGIN, two INSERTs, COMMIT: what the
-- peer does).
-- Ids are time-ordered like ActionHook's (version 7 UUIDs): the first 48 bits are the Unix time in ms.
\set k random(1, 9223372036854775806)
\set ev random(1, 20000)
BEGIN;
WITH r AS (
INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, category_identifier,
    notification_identifier, user_text, user_info, device_token, client_response_id, responded_at, received_at,
    outcome, rule_id, subject, answer)
VALUES ('bench', encode(overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::int8) FROM 3) FROM 1 FOR 6), 'hex')::uuid, 'pgb-' || :client_id || '-' || :k, sha256(('pgb-' || :k)::bytea), 'accept',
    'event-invite', 'invite-' || :client_id || '-' || :ev, NULL,
    '{"aps": {"alert": {"title": "Rooftop party", "body": "Saturday 8pm at the Rooftop"}, "category": "event-invite", "mutable-content": 1, "thread-id": "calendar"}, "eventId": 4242, "calendarId": "team-1", "location": "Rooftop", "startsAt": "2026-11-28T20:00:00Z", "organizer": {"id": "u-31", "tier": "standard"}, "recurring": false, "attendees": 12}',
    '0000100000001000000010000000100000001000000010000000100000001000', NULL, '2026-11-20T10:00:00Z', now(),
    'accepted', 'invite-accept', :ev::text,
    '{"id":"0b6f3c1e-6f0c-4f6e-9a55-2f1d8e1c7a10","outcome":"accepted","ruleId":"invite-accept","subject":"4242","followUps":[{"id":"5d2a9f7e-1c3b-4e8d-b6a2-9e0f1d2c3b4a","channel":"webhook","dueAt":"2026-11-20T10:00:00.123Z"}]}')
RETURNING app_id, id, idempotency_key, request_hash
)
INSERT INTO idempotency_keys (app_id, key, response_id, request_hash) SELECT app_id, idempotency_key, id, request_hash FROM r
RETURNING response_id AS rid \gset
INSERT INTO followups (app_id, id, response_id, ordinal, channel, notification_identifier, payload, due_at)
VALUES ('bench', encode(overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::int8) FROM 3) FROM 1 FOR 6), 'hex')::uuid, :rid, 0, 'webhook', 'invite-' || :client_id || '-' || :ev,
    '{"url": null, "body": {"event": "invite.accepted", "eventId": 4242, "deviceToken": "0000100000001000000010000000100000001000000010000000100000001000", "responseId": "0b6f3c1e-6f0c-4f6e-9a55-2f1d8e1c7a10"}}',
    now());
COMMIT;
