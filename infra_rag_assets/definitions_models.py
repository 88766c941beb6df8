"""A second code location for the expensive model training (``domain_model``).

It is its own location so that nothing cheap ever launches it by accident: the main location's
"Materialize all", its jobs and its sensors do not contain it. It reads the main location's
``chunks`` (a cross-location dependency, drawn in the asset graph) and is launched on purpose
from its own job, ``train_domain_model``.
"""

import dagster as dg

from .defs.index import models
from .defs.resources import RagStore

COST = "EXPENSIVE: ~30 min of both CPU cores (fine-tunes the embedding model). "

domain_model = dg.map_asset_specs(
    lambda spec: spec.replace_attributes(description=COST + (spec.description or ""),
                                         kinds={*spec.kinds, "expensive"}),
    [models.domain_model])[0]

train_domain_model = dg.define_asset_job(
    name="train_domain_model", selection=dg.AssetSelection.assets(domain_model),
    executor_def=dg.in_process_executor, tags={"infra_rag/cost": "expensive"},
    description=COST + "Materialize domain_model once, on purpose.")

defs = dg.Definitions(assets=[domain_model], jobs=[train_domain_model], resources={"store": RagStore()})
