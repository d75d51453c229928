-- The devices a send may reach through its subject: only those the app's backend named itself.
--
-- A send without `to` goes to its subject's devices. They used to be read from the replies stored for the
-- subject, so anyone holding the app's (public) ingest key could enrol a device for any subject by posting
-- a reply that claimed it. Now a device belongs to a subject only once a send of the backend (a server
-- key) named it in `to` for that subject; erasing the subject or the device takes it out.
CREATE TABLE subject_devices (
    -- No cascade from apps: a deleted app's rows are purged in batches (013_app_deletions.sql).
    app_id       text NOT NULL,
    subject      text NOT NULL,
    device_token text NOT NULL,
    -- The recipient label the latest send gave the device.
    recipient    text,
    -- When a send last named it: a subject's newest devices come first.
    named_at     timestamptz NOT NULL,
    PRIMARY KEY (app_id, subject, device_token)
);
CREATE INDEX subject_devices_newest ON subject_devices (app_id, subject, named_at DESC);
CREATE INDEX subject_devices_token ON subject_devices (app_id, device_token);

-- What the backend already vouched for: the devices its earlier sends named (not those an escalation added,
-- nor those erased), the latest send's label winning.
INSERT INTO subject_devices (app_id, subject, device_token, recipient, named_at)
SELECT DISTINCT ON (n.app_id, n.subject, d.value ->> 'deviceToken')
    n.app_id, n.subject, d.value ->> 'deviceToken', d.value ->> 'recipient', n.created_at
FROM notifications n
CROSS JOIN LATERAL jsonb_array_elements(n.devices) AS d(value)
WHERE n.subject IS NOT NULL AND coalesce(d.value ->> 'deviceToken', '') <> ''
    AND NOT coalesce((d.value ->> 'escalation')::boolean, false)
ORDER BY n.app_id, n.subject, d.value ->> 'deviceToken', n.created_at DESC;
