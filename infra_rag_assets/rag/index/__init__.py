"""Index: build configuration and version names, chunking, corpus chunks, text analysis,
embedding, the vector and lexical stores, BM25, serving snapshots and embedding fine-tuning."""
