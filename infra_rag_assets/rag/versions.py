"""Version stamps that address stored artifacts (ground level: imports nothing from rag/).

Bumping one moves every content address that includes it, so caches and versions built under
the old rules are never reused. They live here, below every stage, because more than one stage
reads each of them (ingest and index read the pipeline version; adapt and index the pairs one).
"""

PIPELINE_VERSION = "1"  # bump when stage semantics change so caches and versions move too
PAIRS_VERSION = "1"  # bump when the label-free pair rules (adapt/pairs.py) change: adapted models are addressed by it
