"""Client telemetry (KIP-714): the broker's side of GetTelemetrySubscriptions and
PushTelemetry.

- ``client_metrics_configs``: a CLIENT_METRICS subscription's configs and their checks;
- ``client_metrics_store``: the cluster's subscriptions, durable;
- ``client_metrics_instance``: one client instance and its push interval;
- ``client_metrics_manager``: Kafka's ``ClientMetricsManager`` (APIs 71 and 72);
- ``otlp_payload``: a push's payload decompressed and decoded (OTLP protobuf);
- ``client_telemetry_receiver``: what keeps the pushed metrics (Kafka's exporter plugin);
- ``telemetry_metrics``: those metrics at ``/metrics``;
- ``client_telemetry_builder``: a broker's manager and receiver, built when on.

On when ``metric.reporters`` names ``CLIENT_TELEMETRY_RECEIVER``
(``minikafka serve --client-telemetry``); off, the broker neither advertises nor
serves 71 and 72, as a Kafka broker without a telemetry plugin.
"""
