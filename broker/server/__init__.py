"""The request path: a connection's frames, a request's life, the purgatories it parks in.

Kafka splits this between ``kafka.network`` (SocketServer, RequestChannel) and the request
handling of ``kafka.server`` (KafkaRequestHandler, KafkaApis, BrokerServer). Here:
``connection`` frames and orders, ``dispatch`` owns a request from decode to response,
``context``/``services`` are what a handler is given, ``request_timing`` is RequestChannel's
timing breakdown, ``purgatories`` and ``scheduler`` are the broker's timers, and
``broker_server`` is one broker's listener and lifecycle.
"""
