"""What a broker tells about itself: the request capture (``capture``), Kafka's metrics in
Prometheus form (``metrics``), and the process's garbage-collector policy and pause log
(``gc_policy``)."""
