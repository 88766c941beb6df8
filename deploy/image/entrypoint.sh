#!/bin/sh
# Entrypoint of the infra_rag_assets image: one image, four roles. Anything else runs as given
# (the Dagster Helm chart passes `dagster code-server start ...` or `dagster api grpc ...` as args).
set -eu
role="${1:-serve}"
[ "$#" -gt 0 ] && shift
case "$role" in
  serve)        # HTTP search/answer over the released index version (INFRA_RAG_HOME)
    exec infra-rag serve --host 0.0.0.0 --port "${PORT:-8000}" "$@" ;;
  code-server)  # the Dagster code location, over gRPC
    exec dagster code-server start -m infra_rag_assets.definitions -h 0.0.0.0 -p "${DAGSTER_GRPC_PORT:-4000}" "$@" ;;
  webserver)    # the Dagster UI, reading the workspace file that names the code server
    exec dagster-webserver -w "${DAGSTER_WORKSPACE:-/opt/dagster/workspace.yaml}" -h 0.0.0.0 -p "${DAGSTER_WEBSERVER_PORT:-3000}" "$@" ;;
  daemon)       # run queue, schedules, sensors, run monitoring: exactly one per instance
    exec dagster-daemon run -w "${DAGSTER_WORKSPACE:-/opt/dagster/workspace.yaml}" "$@" ;;
  *)
    exec "$role" "$@" ;;
esac
