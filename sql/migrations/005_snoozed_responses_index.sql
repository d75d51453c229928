-- Responses are looked up by notification only to count a notification's snoozes (a snooze rule's
-- maxSnoozes), and that count reads snoozed responses only. The index keeps entries for those alone,
-- so every other response is stored with one index entry fewer. Building it reads the responses
-- table once, with writes to it held back meanwhile.
DROP INDEX responses_notification;
CREATE INDEX responses_snoozes ON responses (app_id, notification_identifier)
    WHERE outcome = 'snoozed' AND notification_identifier IS NOT NULL;
