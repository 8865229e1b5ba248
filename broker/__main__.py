"""``python -m broker`` is the ``minikafka`` command."""

import sys

from broker.cli import main

sys.exit(main())
