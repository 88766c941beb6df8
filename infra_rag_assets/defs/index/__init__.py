"""Index assets: chunks, domain_model (the adapted encoder), vectors (LanceDB) and lexical_index
(Tantivy), with their checks."""
