"""page_ranker: the learned page ranker of one index version, fitted on its own candidates.

After both indexes (it asks the version's QueryEngine for hybrid-page's candidates of labelled
*train* questions), before eval_run (whose ``hybrid-learned`` regime, like serving, then ranks
with it). Writes ``<home>/serving/<version>/ranker.json`` and ``page_vectors.npz`` (each page's
centroid vector, which the ranker's centroid features read at query time). Fitting is
content-addressed in the data home's ranker cache (``rag/search/ranking/training.fit_or_reuse``;
key: train questions, catalog, model weights, searchers, features and fit settings), so an
unchanged rebuild reuses the weights instead of re-asking ~3,400 questions. A rebuilt snapshot
keeps ranker.json when the chunks are unchanged; when they changed it drops it, and the version
serves hybrid-page's order until this asset runs again (it is downstream of lexical_index, so
every build does).
"""

import dagster as dg
import polars as pl

from ...rag.evaluate.benchmarks import TRAIN_BENCHMARK, answerable_sample, load_benchmark
from ...rag.index.config import stable_hash
from ...rag.operate.files import write_json_atomic
from ...rag.search.page_vectors import PageVectors
from ...rag.search.ranking.features import FEATURE_NAMES
from ..partitions import index_version
from ..reporting import log_progress, md_table
from ..resources import DataHomeResource


class PageRankerConfig(dg.Config):
    train: str = TRAIN_BENCHMARK  # TRAIN split only: the eval split and own set stay for reporting
    max_questions: int = 0  # 0 = every covered train question (~3,400, ~2.5 min); a seeded sample otherwise
    min_questions: int = 50  # fewer covered train questions (a small or non-k8s corpus): no ranker is fitted
    seed: int = 0


@dg.asset(
    partitions_def=index_version,
    deps=["vectors", "lexical_index"],
    group_name="evaluation",
    kinds={"numpy"},
    owners=["team:search-platform"],
    description="Learned page ranker of this version: hybrid-page's candidates of a seeded sample of k8s "
    f"train questions, {len(FEATURE_NAMES)} page features (incl. the question's cosine to each page's centroid "
    "vector), listwise softmax fit. Written as ranker.json and page_vectors.npz in the serving snapshot, "
    "where the hybrid-learned config (CLI, service, eval_run) reads them. Content-addressed: an unchanged "
    "rebuild reuses the weights.",
)
def page_ranker(
    context: dg.AssetExecutionContext, config: PageRankerConfig, store: DataHomeResource
) -> dg.MaterializeResult:
    from ...rag.search.engine import QueryEngine
    from ...rag.search.ranking.training import fit_or_reuse

    version = context.partition_key
    home = store.data_home()
    target = home.version(version).ranker
    target.unlink(missing_ok=True)  # a stale ranker must not outlive this run
    engine = QueryEngine(home, version)
    page_vectors = PageVectors.of_version(home.vectors_uri(), version, engine.catalog)
    page_vectors.save(home.version(version).page_vectors)
    benchmark = load_benchmark(config.train)
    records = answerable_sample(benchmark.records, home.warehouse().doc_ids(version), config.max_questions, config.seed)
    if len(records) < config.min_questions:
        why = f"{len(records)} covered train questions (< {config.min_questions}): hybrid-learned serves hybrid-page"
        context.log.warning(f"{version}: no ranker fitted, {why}")
        return dg.MaterializeResult(
            metadata={"fitted": False, "reason": why},
            data_version=dg.DataVersion(stable_hash(["unfitted", len(records)], 16)),
        )
    ranker, reused = fit_or_reuse(
        engine,
        records,
        home.cache("ranker"),
        page_vectors,
        train=(config.train, benchmark.version_hash),
        progress=log_progress(context, "questions", 250),
    )
    write_json_atomic(target, ranker.to_dict())
    weights = pl.DataFrame({"feature": ranker.feature_names, "weight": [round(w, 4) for w in ranker.weights]})
    return dg.MaterializeResult(
        metadata={
            "fitted": True,
            "ranker_hash": ranker.hash,
            "reused_existing": reused,
            "train_questions": len(records),
            "with_relevant_candidate": int(ranker.meta.get("questions_with_relevant_candidate", 0)),
            "pairs": int(ranker.meta.get("pairs", 0)),
            "page_vectors": len(page_vectors.pages),
            "loss": dg.MetadataValue.float(ranker.meta.get("loss", 0.0)),
            "largest_weights": md_table(weights.sort(pl.col("weight").abs(), descending=True), 12),
            "path": dg.MetadataValue.path(str(target)),
        },
        data_version=dg.DataVersion(ranker.hash),
    )
