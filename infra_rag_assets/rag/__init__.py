"""The RAG library, split by the stage of the data's way through it.

``ingest`` (sources, mirrors, page snapshots, parsing), ``index`` (build configuration, chunking,
embedding, vector and lexical stores, serving snapshots, fine-tuning), ``search`` (retrieval,
fusion, packing, the query engine), ``answer`` (answer generation and prompts), ``evaluate``
(benchmarks, metrics, gates, canaries) and ``operate`` (data home, warehouse, releases, traces,
lineage, processes). Import from the submodules; these packages re-export nothing.
"""
