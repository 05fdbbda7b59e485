#!/usr/bin/env bash
# Regenerates boards/upstream/** and src/boards_upstream.rs from 78/xiaozhi-esp32 at the pinned
# commit (docs/boards.md, "Every upstream build"). Usage:
#
#   boardgen/regen.sh [--check] [COMMIT]
#
# COMMIT defaults to the one the committed files were read at. The tree is fetched once into
# target/boardgen-upstream/<commit> (only main/ and the sdkconfig.defaults files are kept).
# XIAOZHI_UPSTREAM_GIT names a local clone or mirror to read instead of GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."
check=()
if [[ "${1:-}" == "--check" ]]; then
    check=(--check)
    shift
fi
commit="${1:-$(sed -n 's/^pub const UPSTREAM_COMMIT: &str = "\([0-9a-f]*\)";/\1/p' src/boards_upstream.rs)}"
if [[ ! "$commit" =~ ^[0-9a-f]{40}$ ]]; then
    echo "regen.sh: give the full 40-hex-digit commit (got '$commit')" >&2
    exit 2
fi
tree="target/boardgen-upstream/$commit"
if [[ ! -d "$tree/main/boards" ]]; then
    rm -rf "$tree.tmp" && mkdir -p "$tree.tmp"
    source="${XIAOZHI_UPSTREAM_GIT:-}"
    if [[ -n "$source" ]]; then
        git -C "$source" archive "$commit" main $(git -C "$source" ls-tree --name-only "$commit" | grep '^sdkconfig.defaults') \
            | tar -x -C "$tree.tmp"
    else
        repo="$tree.git"
        rm -rf "$repo"
        git init -q --bare "$repo"
        git -C "$repo" fetch -q --depth 1 https://github.com/78/xiaozhi-esp32.git "$commit"
        git -C "$repo" archive "$commit" main $(git -C "$repo" ls-tree --name-only "$commit" | grep '^sdkconfig.defaults') \
            | tar -x -C "$tree.tmp"
        rm -rf "$repo"
    fi
    mv "$tree.tmp" "$tree"
fi
cargo run --quiet --release --locked -p xiaozhi-boardgen -- "$tree" --commit "$commit" "${check[@]}"
if [[ ${#check[@]} -eq 0 ]]; then
    # The index is Rust; keep it as rustfmt leaves it (it is #[rustfmt::skip]ped, so unchanged).
    git --no-pager diff --stat -- boards/upstream src/boards_upstream.rs || true
fi
