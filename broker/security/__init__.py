"""Security as a listener concern: who a connection is (its principal), over which listener.

Kafka's seam: the channel builder authenticates a connection (TLS, SASL) and gives it a
`KafkaPrincipal`; handlers and the quota managers only read that principal. Until a
listener authenticates, every connection is `User:ANONYMOUS` on the `PLAINTEXT` listener,
as in Kafka.
"""
