#!/usr/bin/env bash
# npm run build:node: piw-dqlite-node (crates/dqlite-node), the optional dqlite node program,
# built in release mode; then where it landed and how to install it. It links the system's
# libdqlite (Debian: libdqlite-dev to build, libdqlite0 to run), so it is never part of the
# addon's build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p dqlite-node
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/piw-dqlite-node"
echo
echo "piw-dqlite-node is built: $bin"
echo "  $("$bin" --version)"
echo "Install it on each machine that runs a node (which needs libdqlite0: apt-get install libdqlite0):"
echo "  sudo install -m 0755 $bin /usr/local/bin/piw-dqlite-node"
echo "Then: piw-dqlite-node --help, and docs/cluster.md (\"Tutorial\") for a first cluster."
