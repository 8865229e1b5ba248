"""Another checkout's codec, for a bench that compares brokers of two checkouts.

``bench/request_cost`` encodes its frames with the ``protocol`` package of the checkout
whose broker it measures (``--broker-cwd``), so a frame is what that checkout's own
clients would send. Rather than putting the checkout on ``sys.path`` (which would also
swap ``bench`` and ``testkit`` for that checkout's), only ``protocol`` is loaded from it,
before anything imports ours.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def use_protocol_of(checkout: Path) -> ModuleType:
    """Make ``import protocol`` (and its submodules) load ``checkout/protocol``; the
    package. Call it before anything imports ``protocol``; a no-op for the checkout whose
    ``protocol`` is already loaded."""
    init = checkout.resolve() / "protocol" / "__init__.py"
    loaded = sys.modules.get("protocol")
    if loaded is not None:
        if Path(loaded.__file__ or "").resolve() != init:
            raise RuntimeError(f"protocol already imported from {loaded.__file__}, not {init}")
        return loaded
    spec = importlib.util.spec_from_file_location(
        "protocol", init, submodule_search_locations=[str(init.parent)]
    )
    if spec is None or spec.loader is None:
        raise RuntimeError(f"no protocol package in {checkout}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["protocol"] = module
    spec.loader.exec_module(module)
    return module
