"""Ingest: source configuration, safe reads of mirrors, the sha256-addressed page blob store, the
ingest pipeline (listing, snapshotting and parsing pages), the ``parse`` subpackage and the
parsed-document model."""
