"""ASGI middleware: body limits, disconnects, drain, slow clients, keys and rate limits."""
