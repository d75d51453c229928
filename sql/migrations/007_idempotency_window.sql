-- Idempotency keys are kept for a window (ACTIONHOOK_IDEMPOTENCY_TTL_HOURS, default 24): after it, the
-- same key is a new request. A response gives its key up by having it cleared (NULL), either when the
-- key is used again or by the background sweep; the unique constraint holds only among kept keys,
-- since NULLs are distinct. Dropping NOT NULL changes no row and reads none.
ALTER TABLE responses ALTER COLUMN idempotency_key DROP NOT NULL;
