"""The control endpoint and fault injection.

``faults`` sits on the request path and imports nothing heavy (the error responses
are the handler modules' own); ``server`` (aiohttp) and ``client`` (urllib) are
imported only by whoever runs or calls the endpoint, so importing this package costs
nothing.
"""
