-- Which claim holds a running follow-up. A worker whose claim timed out on its side (the database was
-- stopped, or slow) does not know whether the claim committed; it remembers the claim's token and, once
-- the database answers, gives back the rows that claim took, instead of leaving them leased to nobody
-- until the lease expires and the sweep returns them. Adding a nullable column rewrites nothing.
ALTER TABLE followups ADD COLUMN lease_token uuid;
