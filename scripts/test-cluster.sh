#!/usr/bin/env bash
# The cluster suites (npm run test:cluster), each against real three-node dqlite clusters on
# loopback that the harness starts and removes (crates/dqlite-wire/src/harness.rs):
#   1. piw-dqlite-node itself: forming, restarts, SIGTERM hand-over, refused identities, no
#      bootstrap unless told, no join with another cluster's data (one cluster at a time);
#   2. the wire client (one cluster per client: tests/split.rs), the cluster engine's statements
#      held back for a later request (src/sql/remote/tests.rs) and 3. the store (trace replay,
#      failover, split clusters, hosts with wrong clocks (libfaketime), the tutorial, a frozen
#      leader and a paused lease holder) on piw-dqlite-node nodes;
#   4. the wire client again on go-dqlite's dqlite-demo nodes: another implementation of the
#      node side, so that the client is not only right about our own program.
set -euo pipefail
cd "$(dirname "$0")/.."
node_program="$PWD/target/debug/piw-dqlite-node"
cargo test -p dqlite-node -- --test-threads=1
PIW_DQLITE_NODE="$node_program" cargo test -p dqlite-wire --test cluster --test split -- --ignored --test-threads=1
PIW_DQLITE_NODE="$node_program" cargo test --lib sql::remote -- --ignored --test-threads=1
PIW_DQLITE_NODE="$node_program" TZ=UTC npx jest -c jest.cluster.config.js
PIW_DQLITE_NODE=demo cargo test -p dqlite-wire --test cluster --test split -- --ignored --test-threads=1
