"""Integration tests: real brokers on 127.0.0.1 port 0 driven by real clients (aiokafka,
kafka-python, confluent-kafka) and the command line; no mock of the broker."""
