"""One module per Kafka API key (Kafka's ``KafkaApis``, one ``handle*Request`` a module).

Each module has ``API_KEY``, ``MIN_VERSION``, ``MAX_VERSION``, ``handle(ctx, request)`` --
a response, a Future of one when it parks an operation in a purgatory, or None (acks=0) --
and ``error_response(ctx, request, error)``, the API's answer carrying ``error`` where
Kafka's ``getErrorResponse`` puts it, built without handling the request (injected faults,
a handler that raised); a module whose requests name topics also has ``topic_partitions``
(``base.HandlerModule``). ``registry.py`` is the one explicit list: ApiVersions and the
fault injector's API keys are built from it, and a module without ``error_response`` is
refused.

A handler sees its request's ``RequestContext`` and, through it, the parts it may use (the
replica manager, the coordinators, the quota managers...), never the broker. With an
authorizer every client API checks what ``KafkaApis`` checks, through
``broker/security/authorizer/authorization.py`` (``group_common.group_denied``,
``txn_common.txn_id_denied``, ``config_authorization.py``), with Kafka's messages
(``base.AUTHORIZATION_MESSAGES``). Shared helpers: ``group_common`` (the group APIs'
callbacks), ``group_describe`` (the modern groups' Describe APIs), ``txn_common``,
``topic_names`` (names or ids), ``topic_configs``,
``broker_configs`` and ``group_configs`` (the config APIs' resources), ``share_common``,
``share_offsets_common`` and ``share_state_common`` (KIP-932).
"""
