"""What one request costs: over sockets (``request_cost``), in-process (``dispatch_cost``),
and encoding a response body (``encode_bench``)."""
