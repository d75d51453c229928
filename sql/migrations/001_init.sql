-- ActionHook's data model. Every tenant table leads with app_id; every query filters on it.

-- Admin API tokens other than the bootstrap one from ACTIONHOOK_ADMIN_TOKEN. Only SHA-256
-- hashes are stored.
CREATE TABLE admin_tokens (
    id          uuid PRIMARY KEY,
    name        text NOT NULL,
    token_hash  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Tenants: one iOS app each. Secrets (APNs key, webhook secret) are write-only through the API.
CREATE TABLE apps (
    id                   text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._-]{1,64}$'),
    name                 text NOT NULL,
    apns_team_id         text,
    apns_key_id          text,
    apns_private_key     text,
    apns_topic           text,
    apns_environment     text CHECK (apns_environment IN ('sandbox', 'production')),
    webhook_url          text,
    webhook_secret       text,
    -- Set when the endpoint answered 410 Gone; cleared when the app's webhook is updated.
    webhook_disabled_at  timestamptz,
    -- Requests per second allowed for this app's ingest; NULL uses the server default.
    rate_limit_per_second integer CHECK (rate_limit_per_second > 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

-- Ingest keys. The secret is shown once on creation; only its SHA-256 hash is kept.
CREATE TABLE api_keys (
    app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id          uuid NOT NULL,
    secret_hash bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    PRIMARY KEY (app_id, id)
);

-- UNNotificationCategory as data.
CREATE TABLE categories (
    app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id          text NOT NULL CHECK (id ~ '^[A-Za-z0-9._-]{1,64}$'),
    definition  jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, id)
);

-- Rules: a match, a handler and follow-ups. `version` is the ETag.
CREATE TABLE rules (
    app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id          text NOT NULL CHECK (id ~ '^[A-Za-z0-9._-]{1,64}$'),
    priority    integer NOT NULL,
    enabled     boolean NOT NULL,
    definition  jsonb NOT NULL,
    version     bigint NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, id)
);

-- Stored notification responses. One row per (app, idempotency key).
CREATE TABLE responses (
    app_id                  text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id                      uuid NOT NULL,
    idempotency_key         text NOT NULL,
    -- SHA-256 of the normalised request, to tell a replay from a different body under one key.
    request_hash            bytea NOT NULL,
    action_identifier       text NOT NULL,
    category_identifier     text,
    notification_identifier text,
    user_text               text,
    user_info               jsonb NOT NULL DEFAULT '{}',
    device_token            text,
    -- The client's own responseId, when the body carried one.
    client_response_id      text,
    responded_at            timestamptz,
    received_at             timestamptz NOT NULL DEFAULT now(),
    outcome                 text NOT NULL CHECK (outcome IN
                              ('accepted', 'declined', 'snoozed', 'snooze_limit_reached', 'commented',
                               'recorded', 'unmatched')),
    rule_id                 text,
    subject                 text,
    -- The 202 body, replayed for the same key and body.
    answer                  json NOT NULL,
    PRIMARY KEY (app_id, id),
    UNIQUE (app_id, idempotency_key)
);
CREATE INDEX responses_history ON responses (app_id, received_at DESC, id DESC);
CREATE INDEX responses_subject ON responses (app_id, subject, received_at DESC) WHERE subject IS NOT NULL;
CREATE INDEX responses_notification ON responses (app_id, notification_identifier)
    WHERE notification_identifier IS NOT NULL;

-- The current decision (latest accept/decline) per subject and device.
CREATE TABLE subject_decisions (
    app_id       text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    subject      text NOT NULL,
    -- '' when the response carried no device token.
    device_token text NOT NULL,
    outcome      text NOT NULL CHECK (outcome IN ('accepted', 'declined')),
    response_id  uuid NOT NULL,
    decided_at   timestamptz NOT NULL,
    PRIMARY KEY (app_id, subject, device_token)
);

-- The outbox: follow-ups written in the same transaction as their response.
CREATE TABLE followups (
    app_id                  text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id                      uuid NOT NULL,
    response_id             uuid NOT NULL,
    -- The follow-up's position in its rule, or -1 for a snooze re-delivery.
    ordinal                 integer NOT NULL,
    channel                 text NOT NULL CHECK (channel IN ('webhook', 'apns')),
    -- For snooze re-deliveries: cancelled by a later non-snooze answer to the notification.
    is_snooze               boolean NOT NULL DEFAULT false,
    notification_identifier text,
    device_token            text,
    -- The rendered delivery: webhook {url?, body} or APNs {deviceToken, pushType, priority, ..., payload}.
    payload                 jsonb NOT NULL,
    status                  text NOT NULL DEFAULT 'pending' CHECK (status IN
                              ('pending', 'running', 'retrying', 'delivered', 'dead', 'cancelled', 'skipped')),
    due_at                  timestamptz NOT NULL,
    -- Incremented at every claim; later writes are fenced by it.
    attempt                 integer NOT NULL DEFAULT 0,
    lease_until             timestamptz,
    last_error              text,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, id),
    UNIQUE (app_id, response_id, ordinal),
    FOREIGN KEY (app_id, response_id) REFERENCES responses (app_id, id) ON DELETE CASCADE
);
CREATE INDEX followups_due ON followups (due_at) WHERE status IN ('pending', 'retrying');
CREATE INDEX followups_leased ON followups (lease_until) WHERE status = 'running';
CREATE INDEX followups_by_status ON followups (app_id, status, created_at DESC, id DESC);
CREATE INDEX followups_snoozes ON followups (app_id, notification_identifier)
    WHERE is_snooze AND notification_identifier IS NOT NULL;

-- One row per delivery attempt: outcome, error class and duration, never bodies.
CREATE TABLE delivery_attempts (
    app_id       text NOT NULL,
    followup_id  uuid NOT NULL,
    attempt      integer NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    result       text NOT NULL CHECK (result IN ('delivered', 'failed', 'skipped')),
    http_status  integer,
    error_class  text,
    duration_ms  integer NOT NULL,
    PRIMARY KEY (app_id, followup_id, attempt),
    FOREIGN KEY (app_id, followup_id) REFERENCES followups (app_id, id) ON DELETE CASCADE
);

-- APNs device tokens that APNs reported dead (410 Unregistered, 400 BadDeviceToken).
CREATE TABLE devices (
    app_id      text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    token       text NOT NULL,
    status      text NOT NULL CHECK (status IN ('active', 'dead')),
    reason      text,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, token)
);
