"""One module per Kafka API key; see ``registry.py`` for the list."""
