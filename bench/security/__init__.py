"""TLS and SASL: throughput beside PLAINTEXT, hostile clients on the secured listeners."""
