"""ASGI middleware: the request guard (metrics, drain, body limits, disconnects), slow clients' head
deadline, keys and rate limits."""
