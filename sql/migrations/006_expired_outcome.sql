-- Outcome `expired`: a reply older than its category's or rule's age limit (maxReplyAgeSeconds) is
-- stored with it and acts on nothing. The new check allows every value the old one did, so no row is
-- rewritten; validating it reads every response once, and since a migration is one transaction it
-- does so under the ALTER's exclusive lock (ingest waits for that scan).
ALTER TABLE responses DROP CONSTRAINT responses_outcome_check;
ALTER TABLE responses ADD CONSTRAINT responses_outcome_check CHECK (outcome IN
    ('accepted', 'declined', 'snoozed', 'snooze_limit_reached', 'commented', 'recorded', 'unmatched', 'expired'))
    NOT VALID;
ALTER TABLE responses VALIDATE CONSTRAINT responses_outcome_check;
