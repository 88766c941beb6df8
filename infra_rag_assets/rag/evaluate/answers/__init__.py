"""Answer evaluation: every benchmark question answered as the service would answer it, judged
sentence by sentence and scored (answer_eval, answer_rows, answer_metrics), which answer runs are
reused (answer_plan), the gate fire-drill faults (answer_faults), lineage from a scored answer to
its source bytes (answer_lineage), and live traces scored the same way (trace_judging)."""
