"""Records: SPACE's JSON objects as dicts whose keys are also attributes.

Each is a ``dict`` (so ``json.dumps`` and ``rec["state"]`` work) with attribute access
(``rec.state``); a key SPACE adds later is there too. The fields are those of
docs/api/reference.md.
"""

__all__ = ["Record", "SandboxInfo", "Operation", "SessionInfo", "Entry", "FsEvent", "Snapshot",
           "Template", "Secret", "PortToken", "CommandResult", "LifecycleEvent", "EventPage", "Webhook",
           "Delivery"]


class Record(dict):
    """A JSON object with attribute access; a missing attribute raises AttributeError."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __repr__(self):
        return f"{type(self).__name__}({dict.__repr__(self)})"


class SandboxInfo(Record):
    """A sandbox's record: ``id``, ``state`` (creating, running, pausing, paused, suspending,
    suspended, restoring, stopping, stopped, deleting, deleted, failed), ``template``,
    ``template_digest``, ``vcpus``, ``memory_mib``, ``env``, ``metadata``, ``timeout_s``,
    ``on_timeout``, ``created_at``, ``updated_at``, ``expires_at``, ``error``, ``start_kind``
    (boot, clone, pool, fork), ``parent_id``, ``snapshot``, ``suspended_bytes``, ``network``."""


class Operation(Record):
    """An operation: ``id``, ``kind`` (create, pause, resume, suspend, restore, fork,
    snapshot, stop, start, delete, build), ``sandbox_id``, ``state`` (pending, running,
    succeeded, failed), ``error``, ``created_at``, ``updated_at``, ``result`` (fork:
    ``{"children": [...]}``, snapshot: ``{"snapshot_id", "name"}``)."""

    @property
    def done(self):
        """True once it succeeded or failed."""
        return self.get("state") in ("succeeded", "failed")


class SessionInfo(Record):
    """A command session: ``id``, ``sandbox_id``, ``kind`` (process, pty), ``pty``, ``argv``,
    ``env``, ``cwd``, ``user``, ``stdin``, ``state`` (created, running, exited, failed),
    ``pid``, ``exit_code``, ``signal``, ``error``, ``output_bytes``, ``output_start``,
    ``created_at``, ``started_at``, ``ended_at``."""


class Entry(Record):
    """A file's metadata (``lstat``): ``name``, ``path``, ``type`` (file, dir, symlink,
    other), ``size``, ``mode`` (int), ``permissions`` (``-rw-r--r--``), ``uid``, ``gid``,
    ``owner``, ``group``, ``mtime`` (Unix seconds, float), ``symlink_target`` (symlinks)."""

    @property
    def is_dir(self):
        return self.get("type") == "dir"

    @property
    def is_file(self):
        return self.get("type") == "file"


class FsEvent(Record):
    """A change seen by a watch: ``type`` (create, write, remove, rename, chmod, overflow),
    ``path`` (absolute), ``dir`` (bool)."""


class Snapshot(Record):
    """A snapshot: ``id``, ``name``, ``kind`` (ready, named, suspend, fork), ``state``
    (creating, ready, failed), ``sandbox_id``, ``template``, ``template_digest``, ``vcpus``,
    ``memory_mib``, ``bytes``, ``created_at``, ``error``."""


class Template(Record):
    """A template: ``name``, ``digest``, ``tags``, ``vcpus``, ``memory_mib``,
    ``default_user``, ``env``, ``image_bytes``, ``created_at``, ``pool``,
    ``ready_snapshot``, ..."""


class Secret(Record):
    """A secret's public part: ``name``, ``hosts``, ``created_at``, ``updated_at`` (the
    value is never returned)."""


class LifecycleEvent(Record):
    """A lifecycle event: ``id`` and ``seq`` (its cursor), ``type`` (``sandbox.created``,
    ``running``, ``paused``, ``resumed``, ``suspended``, ``restored``, ``forked``, ``stopped``,
    ``deleted``, ``failed``, ``timeout_warning``, ``timeout_set``, ``snapshotted``), ``time``,
    ``sandbox_id``, ``template``, ``state`` (the sandbox's, after it), ``operation_id``,
    ``reason``, ``data``."""


class EventPage(Record):
    """A page of events: ``events`` (:class:`LifecycleEvent`), ``cursor`` (the next page's
    ``after``), ``has_more``."""


class Webhook(Record):
    """A webhook: ``id``, ``url``, ``name``, ``events``, ``format`` (space, e2b), ``enabled``,
    ``created_at``, ``cursor`` (the last event it is done with), ``pending`` (the event being
    tried again: ``attempts``, ``last_error``; or ``None``). Its secret is never returned."""


class Delivery(Record):
    """One delivery attempt: ``event_id``, ``seq``, ``type``, ``sandbox_id``, ``attempt``,
    ``ok``, ``status`` (the receiver's, or ``None``), ``error``, ``time``, ``duration_ms``."""


class PortToken(Record):
    """A token opening one port: ``token``, ``id``, ``sandbox_id``, ``port``, ``header``
    (``X-Space-Token``), ``url``, ``browser_url``, ``tunnel_url``, ``expires_at``."""


class CommandResult:
    """What a command produced.

    - ``stdout``, ``stderr``: the output decoded as UTF-8 (invalid bytes become U+FFFD);
      ``stdout_bytes``, ``stderr_bytes``: the raw bytes; ``output``: stdout and stderr bytes
      interleaved in the order the process wrote them (a PTY's output is all stdout).
    - ``exit_code`` (``None`` when killed by a signal), ``signal`` (its number, else ``None``).
    - ``error``: SPACE's message when the command could not run to its end, else ``None``.
    - ``dropped``: ``[(from, to), ...]`` byte ranges the output caps discarded before they
      were read.
    - ``session_id``, ``offset`` (the output offset reached).
    """

    def __init__(self, session_id=None):
        self.session_id = session_id
        self._out, self._err, self._all = bytearray(), bytearray(), bytearray()
        self.exit_code = None
        self.signal = None
        self.error = None
        self.dropped = []
        self.offset = 0
        self.exited = False

    def _add(self, stream, data):
        (self._out if stream == "stdout" else self._err).extend(data)
        self._all.extend(data)

    @property
    def stdout_bytes(self):
        return bytes(self._out)

    @property
    def stderr_bytes(self):
        return bytes(self._err)

    @property
    def output(self):
        return bytes(self._all)

    @property
    def stdout(self):
        return self._out.decode("utf-8", "replace")

    @property
    def stderr(self):
        return self._err.decode("utf-8", "replace")

    @property
    def ok(self):
        """True when the command exited with status 0."""
        return self.exit_code == 0

    def __repr__(self):
        return (f"CommandResult(exit_code={self.exit_code}, signal={self.signal}, "
                f"error={self.error!r}, stdout={self.stdout[:200]!r}, stderr={self.stderr[:200]!r})")
