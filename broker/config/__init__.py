"""Configuration under Kafka's own names: static (``broker_config``), the table of every
broker config with its type, default and update mode (``broker_config_defs``), and the
dynamic layers KIP-226 adds (``dynamic_config``)."""
