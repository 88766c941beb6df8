"""The evaluate domain: abstention_calibration, page_ranker, support_judge, answer_reader and eval_run, with the
gates as eval_run's checks."""

import dagster as dg

from .abstention_calibration import abstention_calibration
from .answer_reader import answer_reader
from .eval_run import critical_gates, eval_run, warning_gates
from .judge_asset import support_judge
from .page_ranker import page_ranker

defs = dg.Definitions(
    assets=[abstention_calibration, page_ranker, support_judge, answer_reader, eval_run],
    asset_checks=[critical_gates, warning_gates],
)
