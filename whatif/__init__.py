"""What-if in virtual time (issue 24): a capture replayed inside a simulated cluster, and grids
of broker configs x seeds on Spark. It may import broker, simulation, protocol, spark_jobs and
client_io; nothing imports it.

Why a package of its own: a Spark task here runs a whole simulated cluster in-process (the
virtual-time loop and network, ``MiniKafka``) with the replay's client on it, so it needs both
``broker`` and ``spark_jobs``, which must not import each other (``spark_jobs`` talks to
brokers only over TCP). ``minikafka simulate --capture`` runs it in a child process
(``python -m whatif``), as ``minikafka/cli.py`` runs the Spark jobs.
``virtual_replay`` (one capture, one cell), ``grid_cells`` and ``grid`` (configs x seeds,
one Spark task per cell), ``grid_compare`` (the comparison page).
"""
