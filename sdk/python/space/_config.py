"""Where the daemon is and the API key: constructor arguments, else the environment."""

import os
import stat
import urllib.parse

from .errors import ConfigError

DEFAULT_URL = "http://127.0.0.1:7070"


def read_key_file(path):
    """The key in ``path``, checked as spacectl and spaced check it: a regular file of this
    user or root, no access for group and others, one word of printable ASCII."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ConfigError(f"opening key file {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"key file {path} is not a regular file")
        if st.st_uid not in (os.geteuid(), 0):
            raise ConfigError(f"key file {path} belongs to uid {st.st_uid}, not to us "
                              f"(uid {os.geteuid()}) or root")
        if st.st_mode & 0o077:
            raise ConfigError(f"key file {path} has mode {st.st_mode & 0o7777:04o}: group and "
                              f"others must have no access (chmod 600 {path})")
        data = os.read(fd, 1024)
    finally:
        os.close(fd)
    if len(data) >= 1023:
        raise ConfigError(f"key file {path} is too large for a key")
    lines = data.decode("ascii", "replace").split("\n")
    if any(line.strip() for line in lines[1:]):
        raise ConfigError(f"key file {path}: more than one line")
    key = lines[0].rstrip(" \t\r")
    if not key:
        raise ConfigError(f"key file {path} is empty")
    if any(ord(c) <= 0x20 or ord(c) >= 0x7f for c in key):
        raise ConfigError(f"key file {path}: the key must be one word of printable ASCII")
    return key


def resolve(url=None, api_key=None, api_key_file=None):
    """(url, api_key): the arguments first, then SPACE_URL, SPACE_API_KEY, SPACE_API_KEY_FILE."""
    url = (url or os.environ.get("SPACE_URL") or DEFAULT_URL).rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"bad URL {url!r}: want http://host:port or https://host:port")
    if parts.path or parts.query:
        raise ConfigError(f"bad URL {url!r}: the control plane's root, without a path")
    if api_key is None and api_key_file:
        api_key = read_key_file(api_key_file)
    if api_key is None:
        api_key = os.environ.get("SPACE_API_KEY") or None
    if api_key is None and os.environ.get("SPACE_API_KEY_FILE"):
        api_key = read_key_file(os.environ["SPACE_API_KEY_FILE"])
    if not api_key:
        raise ConfigError("no API key: pass api_key= or api_key_file=, or set SPACE_API_KEY "
                          "or SPACE_API_KEY_FILE")
    if any(ord(c) <= 0x20 or ord(c) >= 0x7f for c in api_key):
        raise ConfigError("the API key must be one word of printable ASCII")
    return url, api_key
