#!/usr/bin/env bash
# run-fuzzer.sh BINARY SEEDS_DIR CORPUS_DIR — run one libFuzzer target for XGR_FUZZ_SECONDS
# (default 30) with a per-input timeout; fails on any crash, leak or sanitizer report.
set -euo pipefail
bin=$(realpath "$1") seeds=$(realpath "$2") corpus=$3
mkdir -p "$corpus"; corpus=$(realpath "$corpus")
secs=${XGR_FUZZ_SECONDS:-30}
cd "$corpus"
# libFuzzer exits 77 on a crash by default, which meson reads as "skipped": fail with 1 instead
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$corpus/" "$corpus" "$seeds"
