"""Server-sent events, parsed from bytes as they arrive (no I/O here: both clients use it)."""


class Event:
    """One event: ``type`` (``event:``, default ``message``), ``id`` (``id:`` or ``None``),
    ``data`` (the ``data:`` lines joined with newlines)."""

    __slots__ = ("type", "id", "data")

    def __init__(self, type_, id_, data):
        self.type, self.id, self.data = type_, id_, data

    def __repr__(self):
        return f"<Event {self.type} id={self.id} {self.data[:60]!r}>"


class Parser:
    """Feed it bytes; it returns the events they complete (the SSE rules: ``field: value``
    lines, ``:`` comments, a blank line dispatches, several ``data`` lines join)."""

    MAX_LINE = 16 << 20

    def __init__(self):
        self._buf = bytearray()
        self._type, self._id, self._data = None, None, []

    def feed(self, chunk):
        self._buf += chunk
        out = []
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                if len(self._buf) > self.MAX_LINE:
                    raise ValueError("server-sent event line over 16 MiB")
                return out
            line = bytes(self._buf[:nl]).rstrip(b"\r").decode("utf-8", "replace")
            del self._buf[:nl + 1]
            ev = self._line(line)
            if ev is not None:
                out.append(ev)

    def _line(self, line):
        if line == "":
            ev = None
            if self._data:
                ev = Event(self._type or "message", self._id, "\n".join(self._data))
            self._type, self._data = None, []
            return ev
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._type = value
        elif field == "data":
            self._data.append(value)
        elif field == "id":
            self._id = value
        return None
