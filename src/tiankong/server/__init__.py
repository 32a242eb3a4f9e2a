"""The HTTP service: ``create_app(settings)`` builds it, ``tiankong serve`` runs it."""

from tiankong.server.app import create_app

__all__ = ["create_app"]
