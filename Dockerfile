# One image for every role: APP_ROLE=api|worker|all selects what the process runs.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production PORT=3000 DATA_DIR=/data STORAGE_DIR=/data/storage
# A V8 old-space limit sized for a ~512 MB container: without one V8 grows the heap lazily on a large
# machine (an API process peaked above 300 MB RSS under load; with it, about 180 MB; bench/RESULTS.md).
ENV NODE_OPTIONS="--max-old-space-size=384"
WORKDIR /app
RUN mkdir -p /data/storage && chown -R node:node /data
COPY --from=build --chown=node:node /app/package.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
USER node
EXPOSE 3000
VOLUME ["/data"]
# The API answers /health; a worker (no HTTP server) refreshes HEARTBEAT_FILE instead.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD node dist/healthcheck.js
CMD ["node", "dist/main.js"]
