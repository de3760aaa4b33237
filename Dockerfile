# syntax=docker/dockerfile:1
# The CDC task image (infra/cdc-service.ts deploys it as an image asset; docs/deploy.md).
# Build stage: install from the lockfile and bundle functions/cdc/main.ts with esbuild.
FROM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npx tsx functions/build-cdc.ts /out/cdc

# Runtime stage: the bundle only (no node_modules, no sources), curl for the health check, non-root.
FROM node:22-bookworm-slim
RUN apt-get update \
  && apt-get install -y --no-install-recommends curl ca-certificates \
  && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/cdc /app/cdc
COPY --chmod=0755 scripts/cdc-entrypoint.sh /app/entrypoint.sh
ENV NODE_ENV=production \
    TIDEMARK_HEALTH_PORT=8080
EXPOSE 8080
# The image's "node" user (uid 1000): the task needs no root.
USER node
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD curl -f "http://127.0.0.1:${TIDEMARK_HEALTH_PORT:-8080}/health" || exit 1
ENTRYPOINT ["/app/entrypoint.sh"]
CMD ["node", "/app/cdc/index.js"]
