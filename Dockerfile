# eni-ipam: one image for the product's commands (operator, agent, install-cni). The testbed (the
# emulators, the local cluster, the demo) is not in it: it runs from a clone (README).
# Build: docker build -t eni-ipam:0.1.0 .

FROM node:20.20.2-bookworm-slim AS build
# A C compiler and libc's static archive for eni-ipam-cni, the static plugin binary (scripts/build-cni.sh).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
RUN npm ci --ignore-scripts
COPY tsconfig.json ./
COPY scripts/build-cni.sh ./scripts/build-cni.sh
COPY src ./src
RUN npm run build:product

FROM node:20.20.2-bookworm-slim AS runtime
ENV NODE_ENV=production
# iproute2: the agent sets up the node's datapath (ENI devices, route tables, rules) with `ip -json` and `ip -batch`.
RUN apt-get update && apt-get install -y --no-install-recommends iproute2 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
# Production dependencies only: no compiler, test or tool packages in the image.
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/bin ./dist/bin
# bin/eni-ipam-cni links to dist/bin/eni-ipam-cni, the static binary install-cni copies to the host.
COPY bin ./bin
COPY examples/10-eni-ipam.conflist ./examples/10-eni-ipam.conflist
RUN ln -s /app/bin/eni-ipam /usr/local/bin/eni-ipam && ln -s /app/bin/eni-ipam-cni /usr/local/bin/eni-ipam-cni
# The agent DaemonSet overrides this with root (it shares a socket with the CNI plugin); the operator keeps it.
USER 65532:65532
ENTRYPOINT ["node", "/app/bin/eni-ipam"]
