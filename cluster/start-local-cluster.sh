#!/usr/bin/env bash
# Start a multi-node Ray cluster on this machine, bound to 127.0.0.1 only.
#
#   cluster/start-local-cluster.sh                          # 3 nodes x 1 CPU (privlab's defaults)
#   cluster/start-local-cluster.sh --nodes 2 --cpus-per-node 2
#   cluster/start-local-cluster.sh --state-dir /tmp/mycluster
#
# A thin wrapper: all arguments go to `privlab cluster up` (see `privlab cluster up --help`). It
# prints the cluster's address and the `export` lines a driver needs; then
#   privlab run SPEC --address 127.0.0.1:PORT     (in a shell with those exports)
#   privlab cluster status / privlab cluster down (same --state-dir, default .privlab/cluster)
# Set PRIVLAB to use a specific installation, e.g. PRIVLAB=/path/to/venv/bin/privlab.
set -euo pipefail
exec "${PRIVLAB:-privlab}" cluster up "$@"
