-- Idempotency keys by time: the table holds a reply's key for the idempotency window
-- (ACTIONHOOK_IDEMPOTENCY_TTL_HOURS) and is dropped a partition at a time after it, as the history is,
-- instead of being swept row by row. Replies sent without a key (neither `Idempotency-Key` nor
-- `responseId`) store none: a key the server made up for them could never be sent again.
--
-- A partitioned table's unique keys must include the partition key, so (app, key) is no longer unique
-- in the table as a whole: a key is unique among the keys within the window. Ingest keeps that: it
-- holds the key's advisory lock while it looks for the key within the window and stores it (in one
-- statement), so two writers of one key never both find it missing. Keys past the window stay in their
-- partition until it is dropped, and are never read: every read asks for the window.
--
-- The partitions share the history's width and are made with theirs (`actionhook_create_partitions`,
-- now for four tables); the maintainer drops one once its whole range is older than the window.

ALTER TABLE idempotency_keys RENAME TO idempotency_keys_unpartitioned;
ALTER INDEX idempotency_keys_pkey RENAME TO idempotency_keys_unpartitioned_pkey;
ALTER INDEX idempotency_keys_stored RENAME TO idempotency_keys_unpartitioned_stored;

CREATE TABLE idempotency_keys (
    app_id       text NOT NULL,
    key          text NOT NULL,
    response_id  uuid NOT NULL,
    request_hash bytea NOT NULL,
    stored_at    timestamptz NOT NULL DEFAULT now(),
    -- Named as before: ingest's "key already stored" error names it (actionhook_idempotency_key_stored).
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (app_id, key, stored_at)
) PARTITION BY RANGE (stored_at);

CREATE OR REPLACE FUNCTION actionhook_create_partitions(from_time timestamptz, to_time timestamptz, width interval)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    seconds  double precision := extract(epoch FROM width);
    made     integer := 0;
    target   text;
    cell     timestamptz;
    cell_end timestamptz;
    start_at timestamptz;
    existing record;
    name     text;
BEGIN
    IF seconds < 3600 THEN
        RAISE EXCEPTION 'partition width % is shorter than an hour', width;
    END IF;
    -- One maker at a time (instances making tomorrow's partitions at once, or a write making a missing one).
    PERFORM pg_advisory_xact_lock(hashtext('actionhook.partitions.' || current_schema()));
    FOREACH target IN ARRAY ARRAY['responses', 'followups_done', 'delivery_attempts', 'idempotency_keys'] LOOP
        cell := to_timestamp(floor(extract(epoch FROM from_time) / seconds) * seconds);
        WHILE cell < to_time LOOP
            cell_end := cell + make_interval(secs => seconds);
            start_at := cell;
            FOR existing IN
                SELECT p.lower, p.upper FROM actionhook_partitions p
                WHERE p.parent = target AND p.lower < cell_end AND p.upper > cell
                ORDER BY p.lower
            LOOP
                IF existing.lower > start_at THEN
                    name := target || '_p' || to_char(start_at AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI');
                    PERFORM actionhook_attach_partition(target, name, start_at, existing.lower);
                    made := made + 1;
                END IF;
                start_at := greatest(start_at, existing.upper);
            END LOOP;
            IF start_at < cell_end THEN
                name := target || '_p' || to_char(start_at AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MI');
                PERFORM actionhook_attach_partition(target, name, start_at, cell_end);
                made := made + 1;
            END IF;
            cell := cell_end;
        END LOOP;
    END LOOP;
    RETURN made;
END
$$;

-- Partitions for the keys there are and for the present, of the width of the history's newest partition
-- (gaps of the other tables in that range are filled too, and dropped by the maintainer if old).
SELECT actionhook_create_partitions(
    least(now(), (SELECT min(stored_at) FROM idempotency_keys_unpartitioned)), now() + w, w)
FROM (SELECT coalesce((SELECT upper - lower FROM actionhook_partitions ORDER BY lower DESC LIMIT 1),
    interval '1 day') AS w) AS x;

INSERT INTO idempotency_keys (app_id, key, response_id, request_hash, stored_at)
SELECT app_id, key, response_id, request_hash, stored_at FROM idempotency_keys_unpartitioned;

DROP TABLE idempotency_keys_unpartitioned;
