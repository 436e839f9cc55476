"""A command's output stream, without I/O: events in, result and callback calls out.

Both clients attach to ``/v1/sessions/{sid}/attach`` and hand every parsed event to
:class:`OutputState`, which checks the offsets (ids are byte offsets: nothing is lost or seen
twice across a reconnect), fills the :class:`~space.CommandResult` and says which callbacks
to call with what.
"""

import base64
import codecs
import json


class StreamProtocolError(ValueError):
    """The daemon's stream broke its own rules (an id that does not add up)."""


class OutputState:
    def __init__(self, result, on_stdout=None, on_stderr=None, offset=0):
        self.result = result
        self.offset = offset
        self.done = False
        self.callbacks = {"stdout": on_stdout, "stderr": on_stderr}
        self.decoders = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in self.callbacks}

    def handle(self, ev):
        """Takes one event; returns ``[(callback, text), ...]`` to call in order."""
        if ev.type in ("stdout", "stderr"):
            return self._output(ev)
        if ev.type == "exit":
            data = json.loads(ev.data)
            self.result.exit_code = data.get("exit_code")
            self.result.signal = data.get("signal")
            self.result.exited = True
            self.done = True
            return self._flush()
        if ev.type == "error":
            try:
                self.result.error = json.loads(ev.data).get("message") or ev.data
            except ValueError:
                self.result.error = ev.data
            self.done = True
            return self._flush()
        if ev.type == "dropped":
            data = json.loads(ev.data)
            self.result.dropped.append((int(data["from"]), int(data["to"])))
            self.offset = max(self.offset, int(data["to"]))
            self.result.offset = self.offset
        return []

    def _output(self, ev):
        raw = base64.b64decode(ev.data)
        try:
            end = int(ev.id)
        except (TypeError, ValueError):
            raise StreamProtocolError(f"output event without a numeric id: {ev!r}") from None
        start = end - len(raw)
        if end <= self.offset:
            return []  # already seen (a resume overlapping what we have)
        if start < self.offset:
            raw = raw[self.offset - start:]
        elif start > self.offset:
            self.result.dropped.append((self.offset, start))
        self.offset = end
        self.result.offset = end
        self.result._add(ev.type, raw)
        fn = self.callbacks[ev.type]
        if fn is None:
            return []
        text = self.decoders[ev.type].decode(raw)
        return [(fn, text)] if text else []

    def _flush(self):
        calls = []
        for name, fn in self.callbacks.items():
            tail = self.decoders[name].decode(b"", final=True)
            if fn is not None and tail:
                calls.append((fn, tail))
        return calls
