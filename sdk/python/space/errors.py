"""Errors: every failure SPACE reports is raised as a subclass of :class:`SpaceError`.

SPACE answers an error as ``{"error": {"code": "...", "message": "..."}}`` with an HTTP status
(docs/design/errors.md, docs/api/reference.md). The SDK raises the class registered for the
``code`` (else for the status), so a caller can tell "wait and retry" (:class:`Conflict`,
:class:`AtCapacity`, :class:`Unavailable`) from "wrong request" (:class:`BadRequest`) from
"not there" (:class:`NotFound`)::

    try:
        sb.files.read("/nope")
    except space.NotFound as e:
        print(e.code, e.status, e.message)   # not_found 404 open /nope: No such file ...

Every error carries ``.code`` (SPACE's error code), ``.status`` (the HTTP status, ``None``
when no answer came), ``.message`` (SPACE's text, with context) and ``.method`` / ``.path`` of
the request.
"""

import json
import re

__all__ = [
    "SpaceError", "ConfigError", "ConnectionFailed", "BadRequest", "Unauthorized", "PermissionDenied",
    "NotFound", "MethodNotAllowed", "Conflict", "PayloadTooLarge", "RangeNotSatisfiable",
    "AtCapacity", "InternalError", "BadGateway", "Unavailable", "Timeout", "NoSpace",
    "AlreadyExists", "NotEmpty", "ReadOnly", "NotADirectory", "IsADirectory", "InvalidArgument",
    "FileIOError", "OperationFailed", "CommandError", "CommandTimeout", "error_for",
]


class SpaceError(Exception):
    """Base class of every error the SDK raises.

    Attributes: ``code`` (SPACE's error code, e.g. ``"not_found"``), ``status`` (HTTP status
    or ``None``), ``message`` (SPACE's message), ``method`` and ``path`` (the request, when
    there was one)."""

    default_code = "error"

    def __init__(self, message, code=None, status=None, method=None, path=None):
        self.message = message
        self.code = code or self.default_code
        self.status = status
        self.method = method
        self.path = path
        where = f"{method} {path}: " if method and path else ""
        shown = f"{status} {self.code}" if status else self.code
        super().__init__(f"{where}{shown}: {message}")


class ConfigError(SpaceError):
    """The client could not be configured: no API key, an unreadable or too open key file,
    a malformed URL."""

    default_code = "config"


class ConnectionFailed(SpaceError):
    """No answer from the daemon: the connection was refused, reset or timed out."""

    default_code = "connection_failed"


class BadRequest(SpaceError):
    """400 ``bad_request``: malformed or invalid input (the message names the field)."""

    default_code = "bad_request"


class InvalidArgument(BadRequest):
    """400 ``invalid_argument``: a file operation's argument is invalid (e.g. ``..``, a
    loop, a name too long)."""

    default_code = "invalid_argument"


class NotADirectory(BadRequest):
    """400 ``not_a_directory``: a path component is not a directory."""

    default_code = "not_a_directory"


class IsADirectory(BadRequest):
    """400 ``is_a_directory``: a file operation met a directory."""

    default_code = "is_a_directory"


class Unauthorized(SpaceError):
    """401 ``unauthorized``: missing or wrong API key; a wrong, expired or foreign token."""

    default_code = "unauthorized"


class PermissionDenied(SpaceError):
    """403 ``permission_denied``: the guest refused a file operation to its user."""

    default_code = "permission_denied"


class ReadOnly(PermissionDenied):
    """403 ``read_only``: a read-only file system in the guest."""

    default_code = "read_only"


class NotFound(SpaceError):
    """404 ``not_found``: unknown sandbox, operation, session, template, snapshot, secret,
    route, or a file that does not exist."""

    default_code = "not_found"


class MethodNotAllowed(SpaceError):
    """405 ``method_not_allowed``."""

    default_code = "method_not_allowed"


class Conflict(SpaceError):
    """409 ``conflict``: the sandbox is in the wrong state, another operation is in flight,
    or a name is taken. The message names the state and the operation in flight."""

    default_code = "conflict"


class AlreadyExists(Conflict):
    """409 ``already_exists``: a file or directory is already there."""

    default_code = "already_exists"


class NotEmpty(Conflict):
    """409 ``not_empty``: a directory removed without ``recursive`` has entries."""

    default_code = "not_empty"


class PayloadTooLarge(SpaceError):
    """413 ``payload_too_large``: a body over the daemon's limit."""

    default_code = "payload_too_large"


class RangeNotSatisfiable(SpaceError):
    """416 ``range_not_satisfiable``: a read starting at or past the end of the file."""

    default_code = "range_not_satisfiable"


class AtCapacity(SpaceError):
    """429 ``at_capacity``: no room now (VMs, memory, vCPUs, sessions, connections);
    nothing was changed, retry once something is suspended, stopped or deleted."""

    default_code = "at_capacity"


class InternalError(SpaceError):
    """500 ``internal``: a fault on the daemon's side; the message says what failed."""

    default_code = "internal"


class FileIOError(InternalError):
    """500 ``io_error``: an I/O error in the guest."""

    default_code = "io_error"


class BadGateway(SpaceError):
    """502 ``bad_gateway``: the guest's answer could not be used."""

    default_code = "bad_gateway"


class Unavailable(SpaceError):
    """503 ``unavailable``: retry later (a queue is full, the guest agent is reconnecting,
    the store is busy)."""

    default_code = "unavailable"


class Timeout(SpaceError, TimeoutError):
    """504 ``timeout``, or an operation or wait of the SDK that ran past its time."""

    default_code = "timeout"


class NoSpace(SpaceError):
    """507 ``no_space``: the guest's disk is full."""

    default_code = "no_space"


class OperationFailed(SpaceError):
    """A lifecycle operation (create, pause, fork, ...) ended ``failed``. ``.operation`` is
    the operation record; ``.message`` its error."""

    default_code = "operation_failed"

    def __init__(self, operation):
        self.operation = operation
        super().__init__(f"operation {operation.get('id')} ({operation.get('kind')}) of "
                         f"{operation.get('sandbox_id')} failed: {operation.get('error')}")


class CommandError(SpaceError):
    """A command could not run to its end: it could not start, or its sandbox failed
    (SPACE's ``error`` event), or, with ``check=True``, it exited non-zero. ``.result`` is
    the :class:`~space.CommandResult` so far."""

    default_code = "command_failed"

    def __init__(self, message, result):
        self.result = result
        super().__init__(message)


class CommandTimeout(CommandError, TimeoutError):
    """A command ran past ``timeout``; it was killed (SIGKILL). ``.result`` holds the output
    received until then."""

    default_code = "timeout"


_BY_CODE = {cls.default_code: cls for cls in (
    BadRequest, InvalidArgument, NotADirectory, IsADirectory, Unauthorized, PermissionDenied,
    ReadOnly, NotFound, MethodNotAllowed, Conflict, AlreadyExists, NotEmpty, PayloadTooLarge,
    RangeNotSatisfiable, AtCapacity, InternalError, FileIOError, BadGateway, Unavailable, Timeout,
    NoSpace)}
_BY_STATUS = {400: BadRequest, 401: Unauthorized, 403: PermissionDenied, 404: NotFound,
              405: MethodNotAllowed, 409: Conflict, 413: PayloadTooLarge,
              416: RangeNotSatisfiable, 429: AtCapacity, 500: InternalError, 502: BadGateway,
              503: Unavailable, 504: Timeout, 507: NoSpace}


def error_for(status, body, method=None, path=None):
    """The exception for an error answer: ``status`` and its raw ``body`` (bytes). The class
    is chosen by SPACE's code, else by the status; a body that is not SPACE's JSON envelope
    (the HTML of a 413 from the HTTP layer, a proxy's page) keeps the status's class."""
    code, message = None, None
    try:
        err = json.loads(body.decode("utf-8"))["error"]
        code, message = str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        text = body[:2000].decode("utf-8", "replace").strip() if body else ""
        title = re.search(r"<title>(.*?)</title>", text, re.I | re.S)
        if title:
            text = title.group(1).strip()  # an HTML page (libevent's 413, a proxy's error)
        message = text[:300] or f"HTTP {status}"
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or SpaceError
    return cls(message, code=code or cls.default_code, status=status, method=method, path=path)
