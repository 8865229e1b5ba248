"""A process's resident set size, from Linux's ``/proc/PID/status`` (``VmRSS``)."""

from __future__ import annotations

import os


def rss_mb(pid: int | None = None) -> float | None:
    """RSS of ``pid`` (this process when None) in MB; None when it cannot be read (the
    process is gone, or no /proc)."""
    try:
        with open(f"/proc/{os.getpid() if pid is None else pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
