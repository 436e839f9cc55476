"""What both clients send: request bodies and queries built from keyword arguments, checked
before they leave (so a mistake is a clear error here, not a round trip)."""

from .errors import BadRequest

LIFECYCLE = ("pause", "resume", "suspend", "restore", "stop", "start")
SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10, "SIGUSR2": 12,
           "SIGTERM": 15, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20, "SIGWINCH": 28}


def drop_none(**fields):
    return {k: v for k, v in fields.items() if v is not None}


def create_body(template=None, snapshot=None, **fields):
    if (template is None) == (snapshot is None):
        if template is None and snapshot is None:
            template = "base"
        else:
            raise BadRequest("give a template or a snapshot, not both")
    body = drop_none(**fields)
    if snapshot is not None:
        body["snapshot"] = snapshot
    else:
        body["template"] = template
    return body


def argv_of(cmd):
    """A command as argv: a list of strings as is, a string run by ``/bin/sh -c``."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    argv = list(cmd)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise BadRequest("argv must be a non-empty list of strings (or one shell string)")
    return argv


def pty_of(pty):
    """``True`` (24x80), ``(rows, cols)`` or ``{"rows", "cols"}`` -> the API's object."""
    if pty is None or pty is False:
        return None
    if pty is True:
        return {"rows": 24, "cols": 80}
    if isinstance(pty, dict):
        return {"rows": int(pty["rows"]), "cols": int(pty["cols"])}
    rows, cols = pty
    return {"rows": int(rows), "cols": int(cols)}


def session_body(cmd, env=None, cwd=None, user=None, stdin=False, pty=None, token_ttl_s=None):
    body = drop_none(argv=argv_of(cmd), env=env, cwd=cwd, user=user, token_ttl_s=token_ttl_s,
                     pty=pty_of(pty))
    if stdin:
        body["stdin"] = True
    return body


def signal_value(sig):
    """A signal as the API takes it: its number, or a name (``"TERM"`` or ``"SIGTERM"``)."""
    if isinstance(sig, int):
        return int(sig)
    name = str(sig).upper()
    if not name.startswith("SIG"):
        name = "SIG" + name
    return name


def stdin_chunks(data, size=1 << 20):
    """Bytes to send as stdin, cut into requests under the daemon's 4 MiB body limit."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    data = bytes(data)
    if not data:
        return [b""]
    return [data[i:i + size] for i in range(0, len(data), size)]


def network_body(policy=None, allow=None, deny=None, inject=None):
    body = dict(policy or {})
    body.update(drop_none(allow=allow, deny=deny, inject=inject))
    return body


def files_query(path, user=None, **extra):
    if not isinstance(path, str) or not path.startswith("/"):
        raise BadRequest(f"path must be absolute: {path!r}")
    return drop_none(path=path, user=user, **extra)


def mode_str(mode):
    """0o644 or "0644" -> "0644"."""
    if mode is None:
        return None
    if isinstance(mode, int):
        return f"{mode:04o}"
    return str(mode)
