/* errors.ts -- SPACE's errors as typed exceptions: one class per error code (docs/design/errors.md) */

/** What every error thrown by this SDK carries. */
export interface SpaceErrorInit {
  /** SPACE's error code, e.g. `not_found`; see {@link SpaceError.code}. */
  code: string;
  /** The HTTP status of the answer; 0 when no answer came. */
  status: number;
  /** The request that failed, e.g. `GET /v1/sandboxes/sb-0123`. */
  request?: string;
  /** The lower-level error, e.g. the network failure behind a {@link ConnectionError}. */
  cause?: unknown;
}

/**
 * The base of every error this SDK throws. Catch it to handle any failure, or one of its
 * subclasses for one kind.
 *
 * The API answers an error as `{"error": {"code", "message"}}`; `code` and `message` are those,
 * `status` the HTTP status. Errors made by the client itself have codes of their own:
 * `connection_error` (no answer), `operation_failed` (an awaited operation failed),
 * `stream_error` (a command's stream reported an error), `command_failed` (a non-zero exit with
 * `check: true`) and `timeout` (also the client's own waits running out).
 *
 * @example
 * try { await client.sandboxes.get("sb-0000000000000000") }
 * catch (e) { if (e instanceof NotFoundError) console.log(e.code, e.status) }  // not_found 404
 */
export class SpaceError extends Error {
  /** SPACE's error code: `bad_request`, `unauthorized`, `not_found`, `conflict`, `at_capacity`, ... */
  readonly code: string;
  /** The HTTP status (404, 409, ...); 0 when the error did not come from an HTTP answer. */
  readonly status: number;
  /** The request that failed (`POST /v1/sandboxes`), when there was one. */
  readonly request?: string;

  constructor(message: string, init: SpaceErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.request = init.request;
  }
}

/** 400 `bad_request`: malformed JSON, a wrong field type or value, an unknown field. */
export class BadRequestError extends SpaceError {}
/** 401 `unauthorized`: a missing or wrong API key, or a wrong or expired session token. */
export class UnauthorizedError extends SpaceError {}
/** 403 `permission_denied`: the guest refused a file operation to the user it ran as. */
export class PermissionDeniedError extends SpaceError {}
/** 403 `read_only`: a file operation on a read-only file system in the guest. */
export class ReadOnlyError extends PermissionDeniedError {}
/** 404 `not_found`: an unknown sandbox, operation, session, template, snapshot, secret or file. */
export class NotFoundError extends SpaceError {}
/** 405 `method_not_allowed`: a known path with the wrong method. */
export class MethodNotAllowedError extends SpaceError {}
/**
 * 409 `conflict`: the resource is in the wrong state (a paused sandbox asked to pause), another
 * operation is in flight, or a name is taken. The message names the state and the operation.
 */
export class ConflictError extends SpaceError {}
/** 409 `already_exists`: the file or directory exists. */
export class AlreadyExistsError extends ConflictError {}
/** 409 `not_empty`: a directory removed without `recursive` has entries. */
export class NotEmptyError extends ConflictError {}
/** 413 `payload_too_large`: a body over the daemon's limit (1 MiB control plane, 4 MiB stdin). */
export class PayloadTooLargeError extends SpaceError {}
/** 416 `range_not_satisfiable`: a read starting at or past the end of the file. */
export class RangeNotSatisfiableError extends SpaceError {}
/** 400 `not_a_directory`: a path used as a directory is not one. */
export class NotADirectoryError extends BadRequestError {}
/** 400 `is_a_directory`: a path used as a file is a directory. */
export class IsADirectoryError extends BadRequestError {}
/** 400 `invalid_argument`: the guest refused a path or argument (a relative path, a `..` in a tar). */
export class InvalidArgumentError extends BadRequestError {}

/**
 * 429 `at_capacity`: the node has no room (VMs, memory, vCPUs, snapshot space, sessions) or too
 * many connections or streams. Nothing was changed; retry once something is freed.
 */
export class AtCapacityError extends SpaceError {
  /** Seconds the daemon asked to wait (`Retry-After`), when it said. */
  retryAfter?: number;
}

/** 500 `internal`: a fault on SPACE's side; the message says what failed. */
export class InternalError extends SpaceError {}
/** 500 `io_error`: a file operation failed in the guest for another reason. */
export class IoError extends InternalError {}
/** 502 `bad_gateway`: the guest's agent answered something malformed. */
export class BadGatewayError extends SpaceError {}
/** 503 `unavailable`: retry later (a stdin queue full, the guest agent reconnecting, the store busy). */
export class UnavailableError extends SpaceError {}
/** 504 `timeout`, or a wait of this client's (an operation, a command) that ran out. */
export class TimeoutError extends SpaceError {}
/** 507 `no_space`: the guest's file system is full. */
export class NoSpaceError extends SpaceError {}

/** No answer: the daemon could not be reached or the connection broke (`connection_error`). */
export class ConnectionError extends SpaceError {}

/** The shape of an operation as far as errors need it (see `Operation` in types.ts). */
interface FailedOperation {
  id: string;
  kind: string;
  sandbox_id: string | null;
  error: string | null;
}

/** An operation this client awaited ended `failed` (`operation_failed`); `.operation` is it. */
export class OperationFailedError extends SpaceError {
  /** The failed operation's record, its `error` saying why. */
  readonly operation: FailedOperation;
  constructor(op: FailedOperation) {
    const what = op.sandbox_id ? `${op.kind} of ${op.sandbox_id}` : op.kind;
    super(`operation ${op.id} (${what}) failed: ${op.error ?? "no reason given"}`, {
      code: "operation_failed",
      status: 0,
    });
    this.operation = op;
  }
}

/** A command's output stream carried an `error` event: it could not start, or its sandbox failed. */
export class StreamError extends SpaceError {}

const BY_CODE: Record<string, new (m: string, i: SpaceErrorInit) => SpaceError> = {
  bad_request: BadRequestError,
  unauthorized: UnauthorizedError,
  permission_denied: PermissionDeniedError,
  read_only: ReadOnlyError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  conflict: ConflictError,
  already_exists: AlreadyExistsError,
  not_empty: NotEmptyError,
  payload_too_large: PayloadTooLargeError,
  range_not_satisfiable: RangeNotSatisfiableError,
  not_a_directory: NotADirectoryError,
  is_a_directory: IsADirectoryError,
  invalid_argument: InvalidArgumentError,
  at_capacity: AtCapacityError,
  internal: InternalError,
  io_error: IoError,
  bad_gateway: BadGatewayError,
  unavailable: UnavailableError,
  timeout: TimeoutError,
  no_space: NoSpaceError,
};

/** Codes for answers that are not SPACE's JSON error (libevent's own 413 page, a proxy's 502). */
const BY_STATUS: Record<number, string> = {
  400: "bad_request",
  401: "unauthorized",
  403: "permission_denied",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  413: "payload_too_large",
  416: "range_not_satisfiable",
  429: "at_capacity",
  500: "internal",
  502: "bad_gateway",
  503: "unavailable",
  504: "timeout",
  507: "no_space",
};

/** The typed error for an error code; an unknown code gives a plain {@link SpaceError}. */
export function errorForCode(code: string, message: string, init: Omit<SpaceErrorInit, "code">): SpaceError {
  const Cls = BY_CODE[code] ?? SpaceError;
  return new Cls(message, { ...init, code });
}

/**
 * The typed error for an HTTP error answer: its JSON envelope's code and message (verbatim: the
 * request is in `.request`) where it has one, else a code from the status and the body's first
 * bytes as the message.
 */
export function errorFromAnswer(status: number, body: string, request: string, retryAfter?: string | null): SpaceError {
  let code = BY_STATUS[status] ?? (status >= 500 ? "internal" : "bad_request");
  let message = body.trim().slice(0, 500) || `HTTP ${status}`;
  try {
    const j = JSON.parse(body) as { error?: { code?: unknown; message?: unknown } };
    if (j && typeof j.error === "object" && j.error && typeof j.error.code === "string") {
      code = j.error.code;
      if (typeof j.error.message === "string") message = j.error.message;
    }
  } catch {
    /* not JSON: keep what the status says */
  }
  const err = errorForCode(code, message, { status, request });
  if (err instanceof AtCapacityError && retryAfter && /^\d+$/.test(retryAfter)) err.retryAfter = Number(retryAfter);
  return err;
}
