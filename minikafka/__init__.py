"""The product's entry points: ``python -m minikafka``, the ``minikafka`` console script
(``cli``) and the pytest plugin (``pytest_plugin``). It may import every package of the
project; nothing imports it."""
