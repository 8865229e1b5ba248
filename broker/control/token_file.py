"""Where a running control endpoint's token is kept, so tools on this machine find it.

``minikafka serve`` prints the token on its ready line and writes it to
``control-PORT.token`` in a directory only its user can read (``MINIKAFKA_RUNTIME_DIR``,
else ``$XDG_RUNTIME_DIR/minikafka``, else ``~/.minikafka/run``), as Jupyter keeps its
servers' tokens. ``minikafka fault`` (``broker/control/client.py``) reads it for the
port it calls, so nobody types the token. The file goes when ``serve`` exits.
Keyed by port alone: one process at a time can listen on a port of this machine.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TOKEN_ENV", "read_token", "remove_token", "runtime_dir", "write_token"]

#: A token given by environment: ``serve`` uses it (instead of generating one) and
#: ``minikafka fault`` sends it.
TOKEN_ENV = "MINIKAFKA_CONTROL_TOKEN"


def runtime_dir() -> Path:
    explicit = os.environ.get("MINIKAFKA_RUNTIME_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "minikafka"
    return Path.home() / ".minikafka" / "run"


def _path(port: int) -> Path:
    return runtime_dir() / f"control-{port}.token"


def write_token(port: int, token: str) -> Path:
    """Write the token of the endpoint on ``port`` (mode 0600 in a 0700 directory)."""
    directory = runtime_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = _path(port)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    return path


def read_token(port: int) -> str | None:
    try:
        return _path(port).read_text().strip() or None
    except OSError:
        return None


def remove_token(port: int, token: str) -> None:
    """Remove the file if it still holds ``token`` (a newer serve may own the port)."""
    if read_token(port) == token:
        _path(port).unlink(missing_ok=True)
