#!/usr/bin/env bash
# GPU figures in one device call (one H200, at most 8 minutes): the recipe's MFU eager vs regional compile at the
# 210m and 610m shapes with peak memory, the MLM head vs native, 40 steps of the 210m paper config through a PFS
# switch (compiles counted, losses vs eager), the GPU-only tests and the grid's runs/hour (bench/gpu_check.py lists
# the sections). Each section runs under `timeout`, so one that fails or hangs keeps the others' figures.
#
#   bash bench/gpu_check.sh               # on the device, after ../shared/device/stage.sh (installs .whl into .site)
#   bash bench/gpu_check.sh --dry_run     # the same sections, tiny, on a CPU (about 2-3 minutes on 2 cores)
#   options: --dry_compile (dry run with regional compile: slow on CPU), --one_process (every section in one
#   Python process, one time limit: the CI test)
# Figures: $OUT/gpu_check.json, $OUT/gpu_check.md (also printed at the end), $OUT/gpu_check.log (all output);
# OUT defaults to out/gpu_check.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
dry=() compile=() one=0
for arg in "$@"; do
  case $arg in
    --dry_run) dry=(--dry_run) ;;
    --dry_compile) compile=(--dry_compile) ;;
    --one_process) one=1 ;;
    *) echo "error: unknown argument $arg; use --dry_run, --dry_compile or --one_process" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
OUT=${OUT:-out/gpu_check}
started=$(date +%s)
work=$(mktemp -d) || exit 1
if [ ${#dry[@]} -eq 0 ] && [ -d .whl ]; then  # the device: the staged wheels, as ../shared/device/stage.sh says
  timeout 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site .whl/*.whl \
    > "$work/install.log" 2>&1 || echo "gpu_check: installing .whl failed (see $OUT/gpu_check.log)"
  export PYTHONPATH="$PWD/.site:$PWD"
fi
[ ${#dry[@]} -eq 0 ] && [ -d .devdata ] && export MLM_VS_CLM_DATA="$PWD/.devdata"
export PYTHONPATH="${PYTHONPATH:-$PWD}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  TOKENIZERS_PARALLELISM=false TQDM_DISABLE=1
# Every section needs the project's environment: a missing one is named in one line, before anything is written.
problem=""
if ! command -v "$PY" > /dev/null; then
  problem="$PY not found"
else
  missing=$("$PY" -c 'import importlib.util as u
print(", ".join(m for m in ("torch", "transformers", "datasets", "accelerate", "peft", "pytest") if not u.find_spec(m)))')
  [ -n "$missing" ] && problem="$missing not found by $PY"
fi
if [ -n "$problem" ]; then
  echo "error: $problem: activate the environment (source .venv/bin/activate) or run the setup (README," \
    "Quickstart); PYTHON=.venv/bin/python picks its interpreter" >&2
  rm -rf "$work"
  exit 2
fi
mkdir -p "$OUT" || exit 1
log="$OUT/gpu_check.log"
cat "$work/install.log" > "$log" 2>/dev/null || : > "$log"

mapfile -t sections < <("$PY" -m bench.gpu_check sections "${dry[@]}")
total=0
for line in "${sections[@]}"; do total=$((total + ${line#* })); done
echo "gpu_check: ${#sections[@]} sections, time budget ${total} s (+ $(( $(date +%s) - started )) s setup so far)" \
  "${dry[*]}"
if [ $one -eq 1 ]; then
  timeout --kill-after=10 "$total" "$PY" -m bench.gpu_check section all --work "$work" "${dry[@]}" "${compile[@]}" \
    >> "$log" 2>&1 < /dev/null
else
  for line in "${sections[@]}"; do
    name=${line% *} budget=${line#* } start=$(date +%s)
    timeout --kill-after=10 "$budget" "$PY" -m bench.gpu_check section "$name" --work "$work" "${dry[@]}" \
      "${compile[@]}" >> "$log" 2>&1 < /dev/null
    rc=$? seconds=$(( $(date +%s) - start ))
    echo "{\"rc\": $rc, \"seconds\": $seconds}" > "$work/$name.status"
    echo "gpu_check: $name exit $rc in $seconds s (budget $budget s)"
  done
fi
"$PY" -m bench.gpu_check report --work "$work" --out "$OUT" --started "$started" "${dry[@]}"
rc=$?
echo "gpu_check: $(( $(date +%s) - started )) s in all (budget ${total} s + setup); figures in $OUT"
rm -rf "$work"
exit $rc
