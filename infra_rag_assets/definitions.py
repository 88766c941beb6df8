"""The code location: each domain's Definitions (defs/<domain>/definitions.py) merged, plus what
spans domains: the build jobs derived from the whole asset graph, the sensor that requests the
whole chain after an upstream sync, and the resources (``stage_graph``: what is upstream of the
assets that report lineage, from the whole graph).

``domain_model`` is a stage of the build chain (chunks → domain_model → vectors): it adapts the
embedding model per version, or reuses an adapted model by content address, or names the base
model in a quick build (``BuildResource.adapt``).

Resources are wired here and only here: CLI builds run these jobs (in-process or through the
run queue) and override resource fields with run config, never with other objects.
"""

import dagster as dg

from . import settings
from .defs import jobs
from .defs.asset_lineage import upstream_of
from .defs.evaluate import definitions as evaluate
from .defs.index import definitions as index
from .defs.ingest import definitions as ingest
from .defs.operate import definitions as operate
from .defs.operate.upstream import reindex_after_sync
from .defs.resources import BuildResource, DataHomeResource, EmbedderResource, StageGraphResource, from_env

# A tuple, not a merged Definitions: a code location module holds exactly one Definitions object.
DOMAINS = (ingest.defs, index.defs, evaluate.defs, operate.defs)
ASSETS = [asset for domain in DOMAINS for asset in domain.assets or ()]
BUILD_JOBS = jobs.build_jobs(ASSETS)
REINDEX = next(job for job in BUILD_JOBS if job.name == "reindex")

defs = dg.Definitions.merge(
    *DOMAINS,
    dg.Definitions(
        jobs=BUILD_JOBS,
        sensors=[reindex_after_sync(REINDEX)],
        resources={
            "store": DataHomeResource(home=from_env("HOME", settings.home()), lancedb_uri=from_env("LANCEDB_URI", "")),
            "settings": BuildResource(sources_file=from_env("SOURCES", settings.sources_file())),
            "embedding": EmbedderResource(),
            "stage_graph": StageGraphResource(upstream={a: upstream_of(ASSETS, a) for a in ("eval_run", "release")}),
        },
    ),
)
