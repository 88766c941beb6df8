"""Support judge: claim support and context relevance, judged by a cross-encoder trained here."""
