"""Operating the release: release approval and serving_release, release/rollback jobs, canary,
served traces, sensors."""
