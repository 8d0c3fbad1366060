# syntax=docker/dockerfile:1
# Multi-stage build: compile with dev dependencies, ship only production dependencies and dist/.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json .swcrc ./
COPY src ./src
COPY migrations ./migrations
# tsc here: the image build is also a type check.
RUN npm run build:tsc && npm prune --omit=dev --omit=optional

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json ./package.json
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# The app handles SIGTERM itself: it drains for up to SHUTDOWN_GRACE_MS, then exits.
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
