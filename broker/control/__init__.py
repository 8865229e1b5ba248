"""The control endpoint and fault injection.

``faults`` and ``error_responses`` sit on the request path and import nothing heavy;
``server`` (aiohttp) and ``client`` (urllib) are imported only by whoever runs or calls
the endpoint, so importing this package costs nothing.
"""
