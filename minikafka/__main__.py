"""``python -m minikafka`` is the ``minikafka`` command.

kio imports Hypothesis whenever it is installed (the dev extra installs it), only to
register test strategies for its types: a third of the command's start-up, which the
tests pay for every ``minikafka`` they run and ``minikafka simulate`` twice (it re-runs
itself pinned). Nothing in the command uses Hypothesis, so this process marks it
missing before kio is imported; the pytest plugin and in-process imports of
``minikafka.cli`` are left alone (a test may use Hypothesis there).
"""

import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from minikafka.cli import main  # noqa: E402 - after the line above, or kio imports it

sys.exit(main())
