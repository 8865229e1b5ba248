"""The client-side tools: Kafka's command line tools as ``minikafka`` subcommands and the
small Kafka client under them (issue 23: they are not broker code, so they left ``broker/``).

``admin_cli`` (the subcommands' parsers and dispatch, which ``minikafka/cli.py`` reaches:
nothing in ``broker/`` imports this package), ``admin_commands``, ``admin_consumer_groups``,
``admin_share_groups``, ``admin_acls``, ``console_commands`` and ``client/`` (``KafkaClient``
on ``client_io.ClientShell``). They work with the base install against any bootstrap, in
real time. It imports only ``protocol`` and ``client_io`` (an import-linter contract).
"""
