"""The console's smaller pages: client quotas and who is throttled, ACLs, the capture.

Who is throttled comes from each broker's quota managers: every (user, client-id)
whose requests were throttled, with how often and the average throttle time, and the
channels muted right now (the ThrottledChannel timer). The capture page lists the
capture directory's files and the replay reports and what-if pages beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.control.cluster_control import ClusterControl
from broker.quota.throttled_channel import throttled_channels

__all__ = ["acls", "capture", "quotas"]

_REPORT_SUFFIXES = (".html", ".md", ".json")


def _name(name: str | None) -> str:
    return name if name is not None else "<default>"


def quotas(app: ClusterControl) -> dict[str, Any]:
    entries = [
        {
            "entity": ", ".join(
                f"{kind}={name if name is not None else '<default>'}" for kind, name in entity
            ),
            "quotas": ", ".join(f"{k}={v:g}" for k, v in sorted(values.items())),
        }
        for entity, values in sorted(app.client_quotas.entries().items(), key=lambda e: str(e[0]))
    ]
    throttled: list[dict[str, Any]] = []
    muted: list[dict[str, Any]] = []
    for broker in sorted(app.brokers, key=lambda b: b.broker_id):
        endpoint = app.cluster.brokers.get(broker.broker_id)
        managers = broker.services.quota_managers
        if endpoint is None or not endpoint.alive or managers is None:
            continue
        for manager in (managers.produce, managers.fetch, managers.request):
            for (user, client_id), sensors in sorted(manager.sensors.items()):
                if sensors.throttle_count:
                    throttled.append(
                        {
                            "broker": broker.broker_id,
                            "quota": str(manager.quota_type.value),
                            "user": user or "-",
                            "client_id": client_id or "-",
                            "times": sensors.throttle_count,
                            "avg_ms": round(sensors.throttle_time_avg(), 1),
                        }
                    )
        now = broker.services.clock.now_ms()
        view = throttled_channels(managers.reaper, now)
        for op in view["operations"]:  # type: ignore[attr-defined]
            muted.append({"broker": broker.broker_id, **op})
    return {"entries": entries, "throttled": throttled, "muted": muted}


def acls(app: ClusterControl) -> list[dict[str, str]]:
    return [
        {
            "principal": acl.principal,
            "host": acl.host,
            "operation": acl.operation.name,
            "permission": acl.permission_type.name,
            "resource_type": acl.resource_type.name,
            "resource": acl.resource_name,
            "pattern": acl.pattern_type.name,
        }
        for acl in app.acls.acls()
    ]


def capture(app: ClusterControl) -> dict[str, Any]:
    captures = app.captures
    if captures is None:
        return {"on": False}
    directory = Path(captures.directory)
    files: list[dict[str, Any]] = []
    reports: list[str] = []
    if directory.is_dir():
        for path in sorted(directory.rglob("*")):
            if not path.is_file():
                continue
            if path.suffix in _REPORT_SUFFIXES:
                reports.append(str(path.relative_to(directory)))
            else:
                files.append(
                    {"name": str(path.relative_to(directory)), "bytes": path.stat().st_size}
                )
    return {
        "on": True,
        "directory": str(directory),
        "files": files,
        "bytes": sum(f["bytes"] for f in files),
        "reports": reports,
        "brokers": sorted(captures.captures),
    }
