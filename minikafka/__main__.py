"""``python -m minikafka`` is the ``minikafka`` command.

It never imports hypothesis: kio imports it whenever it is installed (to register
strategies for its primitive types, which only tests use), and hypothesis then builds a
table of Unicode characters into ``.hypothesis/`` of the working directory — ~0.3 s of
every start (a simulation starts two: the command and its pinned child), ~1.9 s and a
folder left behind in a directory new to it (a user's, a campaign task's). The console
script (``minikafka.cli:main``) does not come through here, and the pytest plugin must not
lose hypothesis: so here, and only here.
"""

import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # import fails: kio skips it

from minikafka.cli import main  # noqa: E402

sys.exit(main())
