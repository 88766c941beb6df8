"""Search: retrieval and its configuration, fusion of lexical and vector hits, context packing,
the query engine that resolves a version and serves queries, and question validation."""
