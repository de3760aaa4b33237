#!/bin/sh
# Entrypoint of the CDC task image. The CDK stack passes the spec as TIDEMARK_SPEC_YAML (no file
# to mount on Fargate); it is written to a private file and TIDEMARK_SPEC_FILE points at it.
# Locally, mount the spec and set TIDEMARK_SPEC_FILE instead.
set -eu
if [ -n "${TIDEMARK_SPEC_YAML:-}" ]; then
  umask 077
  printf '%s\n' "$TIDEMARK_SPEC_YAML" > /tmp/tidemark.yaml
  TIDEMARK_SPEC_FILE=/tmp/tidemark.yaml
  export TIDEMARK_SPEC_FILE
  unset TIDEMARK_SPEC_YAML
fi
exec "$@"
