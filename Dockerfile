# One image for both roles: CALLGATE_ROLE=gateway|worker|all (default all).
# Node 24 LTS in both stages. Build stage: compiles TypeScript and the native modules
# (@discordjs/opus, callgate's RTP sockets) against this Node; the runtime's Node must be the same
# major version (@discordjs/opus finds its binary by Node's ABI).
FROM node:24-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libsrtp2-dev libspandsp-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY config ./config
COPY jobs ./jobs
COPY agents ./agents
COPY gateway ./gateway
RUN npm run build \
 && npm run build:native \
 && cp --parents gateway/media/native/build/Release/rtp_udp.node gateway/media/native/build/Release/srtp_binding.node gateway/media/native/build/Release/g722_codec.node dist/ \
 && cp config/*.yaml dist/config/ \
 && find jobs agents -name '*.lua' -exec cp --parents {} dist/ \; \
 && find gateway -name '*.yaml' -exec cp --parents {} dist/ \; \
 && npm prune --omit=dev

FROM node:24-bookworm-slim AS runtime
# espeak-ng renders the simulator's prompts; redis-server is only for a self-contained demo run
# (production sets REDIS_URL). libssl3: the SRTP module links libcrypto when the build stage has it
# (gateway/media/native/binding.gyp).
RUN apt-get update \
 && apt-get install -y --no-install-recommends espeak-ng redis-server curl libsrtp2-1 libspandsp2 libssl3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production CALLGATE_ROLE=all
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# The image's `node` user by number, so Kubernetes can verify runAsNonRoot (helm/callgate runs
# pods as 1000:1000 with a read-only root filesystem; /app stays root-owned and read-only).
USER 1000:1000
# SIP (UDP and TCP), probes and metrics (8080), the operator API (8081); RTP uses the configured range (default 20000-29999/udp).
EXPOSE 5060/udp 5060/tcp 8080/tcp 8081/tcp
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
# A fixed 16 MB young generation (V8's own maximum, reserved from the start): with the default,
# resizing one, the audio paths' short-lived garbage drove bursts of full collections (5-20 ms
# each) into the media and realtime latency tails. Not settable through NODE_OPTIONS.
# `production`: an agents module's `import ... from 'callgate'` resolves to the built public API
# (package.json exports); in the image a module is JavaScript (.js or .mjs).
CMD ["node", "--enable-source-maps", "--conditions=production", "--min-semi-space-size=16", "--max-semi-space-size=16", "dist/gateway/main.js"]
