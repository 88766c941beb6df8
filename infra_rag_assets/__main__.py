"""`python -m infra_rag_assets` is the `infra-rag` CLI."""

from .cli import main

main()
