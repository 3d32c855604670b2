# Source this (". scripts/offline.sh") to use the offline material in ../shared when it exists:
# a writable copy of its ir_datasets cache, its models as BENCHMARK_MODEL_DIR, and no hub calls.
# Without ../shared it changes nothing, and data and models come from the internet as usual.
_bench_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
if [ -d "$_bench_root/../shared/ir_datasets_home" ]; then
  _copy="$_bench_root/.cache/ir_datasets_home"
  if [ ! -f "$_copy/.complete" ]; then
    rm -rf "$_copy" && mkdir -p "$_copy"
    cp -r "$_bench_root/../shared/ir_datasets_home/." "$_copy/" && chmod -R u+w "$_copy" && touch "$_copy/.complete"
  fi
  export IR_DATASETS_HOME="$_copy"
fi
if [ -d "$_bench_root/../shared/models" ]; then
  export BENCHMARK_MODEL_DIR="$_bench_root/../shared/models"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
fi
unset _bench_root _copy
