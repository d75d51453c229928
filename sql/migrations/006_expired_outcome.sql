-- Outcome `expired`: a reply older than its category's or rule's age limit (maxReplyAgeSeconds) is
-- stored with it and acts on nothing. The new check allows every value the old one did, so existing
-- rows need no rewrite; it is added NOT VALID (no scan under the table's exclusive lock) and then
-- validated, which reads the rows without blocking writes longer than the ALTER itself.
ALTER TABLE responses DROP CONSTRAINT responses_outcome_check;
ALTER TABLE responses ADD CONSTRAINT responses_outcome_check CHECK (outcome IN
    ('accepted', 'declined', 'snoozed', 'snooze_limit_reached', 'commented', 'recorded', 'unmatched', 'expired'))
    NOT VALID;
ALTER TABLE responses VALIDATE CONSTRAINT responses_outcome_check;
