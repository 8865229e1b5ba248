"""``python -m minikafka`` is the ``minikafka`` command."""

import sys

from minikafka.cli import main

sys.exit(main())
