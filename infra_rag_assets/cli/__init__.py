"""`infra-rag`: the command-line entry point (commands in this package, logic in control/ and rag/)."""

from .main import main

__all__ = ["main"]
