/// Failures the store reports, for the HTTP layer to map to statuses and for the delivery worker to act
/// on: the ports' error, so that neither reads a database's error codes.
public enum StoreError: Error, Sendable, Equatable {
    /// The database did not answer in time or could not be reached (a lost connection, a timeout, no
    /// free connection in time, a statement cancelled at its timeout). Trying again later may succeed.
    case unavailable
    /// The object does not exist (or belongs to another app).
    case notFound
    /// An object with this id already exists.
    case alreadyExists
    /// `If-Match` named a version that is no longer current.
    case versionMismatch
    /// The object is not in a state that allows the operation (e.g. cancelling a delivered follow-up).
    case wrongState(String)
    /// A request with this idempotency key is still being processed.
    case idempotencyKeyInFlight
    /// This idempotency key was used before with a different body.
    case idempotencyKeyReused
    /// The ingest key's app was deleted after the key was checked.
    case appDeleted
    /// The ingest key's app is being deleted at this moment.
    case appBeingDeleted
}
