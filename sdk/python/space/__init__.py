"""SPACE's Python SDK: sandboxes (microVMs), their commands and files, over SPACE's own API.

Standard library only. Two clients with the same resources and methods:

- :class:`Client` (blocking; http.client),
- :class:`AsyncClient` (asyncio; its own HTTP/1.1 over ``asyncio.open_connection``, no
  threads), whose methods are coroutines.

::

    from space import Client
    sb = Client().sandboxes.create(template="base")      # SPACE_URL, SPACE_API_KEY(_FILE)
    r = sb.run(["python3", "-c", "print(6*7)"])         # r.stdout == "42\\n", r.exit_code == 0
    sb.files.write("/home/user/a.txt", b"hi")
    kid = sb.fork(count=1)[0]; kid.delete(); sb.delete()

Errors are :class:`SpaceError` subclasses carrying SPACE's error code (:mod:`space.errors`).
"""

from .aio import (AsyncClient, AsyncCommand, AsyncCommands, AsyncFiles, AsyncPorts,
                  AsyncSandbox, AsyncSandboxes, AsyncWatch)
from .client import (Client, Command, Commands, Events, Files, Operations, Ports, Sandbox, Sandboxes,
                     Secrets, Snapshots, Templates, Watch, Webhooks, verify_signature)
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors_all
from .records import (CommandResult, Delivery, Entry, EventPage, FsEvent, LifecycleEvent, Operation,
                      PortToken, Record, SandboxInfo, Secret, SessionInfo, Snapshot, Template, Webhook)

__version__ = "0.1.0"

__all__ = ["Client", "AsyncClient", "Sandboxes", "Sandbox", "Operations", "Commands", "Command",
           "Files", "Watch", "Ports", "Snapshots", "Secrets", "Templates", "AsyncSandboxes",
           "AsyncSandbox", "AsyncCommands", "AsyncCommand", "AsyncFiles", "AsyncWatch",
           "AsyncPorts", "CommandResult", "Entry", "FsEvent", "Operation", "PortToken", "Record",
           "SandboxInfo", "Secret", "SessionInfo", "Snapshot", "Template", "Events", "Webhooks",
           "verify_signature", "LifecycleEvent", "EventPage", "Webhook", "Delivery"] + list(_errors_all)
