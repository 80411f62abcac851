#!/usr/bin/env bash
# Puts the SQLite amalgamation that better-sqlite3 bundles (the SQLite the reference store runs
# on) into vendor/libsqlite3-sys, the copy of rusqlite's libsqlite3-sys that Cargo.toml patches
# in. Run it after `npm ci` when package-lock.json moves better-sqlite3 to another SQLite; the
# Jest suite fails until the two agree (__test__/connection.spec.ts).
#
# Besides the three amalgamation files, only the version constants of the pre-generated
# bindings change: bindgen is not available offline, and the bindings of the older header are
# a subset of the newer API (SQLite adds functions and constants, never renumbers them).
set -euo pipefail
cd "$(dirname "$0")/.."
from=node_modules/better-sqlite3/deps/sqlite3
to=vendor/libsqlite3-sys/sqlite3
cp "$from/sqlite3.c" "$from/sqlite3.h" "$from/sqlite3ext.h" "$to/"
version=$(sed -n 's/^#define SQLITE_VERSION  *"\(.*\)"$/\1/p' "$to/sqlite3.h")
number=$(sed -n 's/^#define SQLITE_VERSION_NUMBER  *\([0-9]*\)$/\1/p' "$to/sqlite3.h")
source_id=$(sed -n 's/^#define SQLITE_SOURCE_ID  *"\(.*\)"$/\1/p' "$to/sqlite3.h")
[ -n "$version" ] && [ -n "$number" ] && [ -n "$source_id" ] || { echo "no version in $to/sqlite3.h" >&2; exit 1; }
for bindings in "$to/bindgen_bundled_version.rs" "$to/bindgen_bundled_version_ext.rs"; do
  # SQLITE_SOURCE_ID's value is on the line after its name.
  sed -i \
    -e "s/^pub const SQLITE_VERSION: &::std::ffi::CStr = c\"[^\"]*\";/pub const SQLITE_VERSION: \&::std::ffi::CStr = c\"$version\";/" \
    -e "s/^pub const SQLITE_VERSION_NUMBER: i32 = [0-9]*;/pub const SQLITE_VERSION_NUMBER: i32 = $number;/" \
    -e "/^pub const SQLITE_SOURCE_ID: &::std::ffi::CStr =$/{n;s/c\"[^\"]*\"/c\"$source_id\"/}" \
    "$bindings"
done
echo "vendored SQLite $version ($number)"
