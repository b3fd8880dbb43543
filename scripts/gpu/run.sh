#!/usr/bin/env bash
# The GPU check (docs/gpu.md, section 6): how fast lnorm runs on this machine's
# accelerator, in one call of at most 8 minutes on an H100, without network.
#
#   scripts/gpu/prepare.sh                    # first, where there is network
#   scripts/gpu/run.sh                        # on the GPU machine
#   scripts/gpu/run.sh --rehearse             # the same phases on this CPU, toy sizes
#   scripts/gpu/run.sh --phases rnn,fig6      # some phases only (a second try)
#   GPU_EXPERIMENTS=draw,perm_mnist scripts/gpu/run.sh --phases experiments  # some rows
#   GPU_FIG6_LIMIT=230 scripts/gpu/run.sh --phases fig6   # Figure 6 alone, three seeds
#   scripts/gpu/run.sh --phases benchmark     # a chunk of the gpu scale, ~7 minutes
#   python -m lnorm.gpucheck collect gpu_out  # then file the records under results/gpu/
#   cp -r gpu_out/benchmark/. results/gpu/<device>/benchmark/   # the chunk's records
#
# It installs lnorm from this tree and ml-collections from gpu_prepared/wheels into a
# folder of its own (pip --no-index --no-deps --target: the machine's Python, its JAX
# included, is left as it is), prints the versions, then runs the phases, each in its
# own process under its own time limit (a phase that fails or runs out of time leaves
# its finished items and the other phases' records), writing one JSON record per
# phase and run.log into $OUT (else gpu_out/), and the short table last.
#
# --rehearse builds a fresh virtual environment offline from gpu_prepared/ on top of a
# copy of the image this machine's Python stands for ($REHEARSAL_PYTHON, default
# python3: the one with JAX), without wandb, tensorflow-datasets, mlxtend, nltk,
# ml-collections or lnorm, as on the GPU image, and runs every phase at toy sizes.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prep="${GPU_PREPARED:-$repo/gpu_prepared}"
out="${OUT:-$repo/gpu_out}"
rehearse=0
phases="device,experiments,rnn,fig6,benchmark"
while [ $# -gt 0 ]; do
  case "$1" in
    --rehearse) rehearse=1 ;;
    --phases) phases="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ ! -f "$prep/MANIFEST" ]; then
  echo "run.sh: $prep is missing or incomplete: run scripts/gpu/prepare.sh first, where" \
       "there is network, and carry gpu_prepared/ with the tree." >&2
  exit 2
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/lnorm-gpucheck.XXXXXX")"
# The scratch folder (venv, install, logs, runs, data cache) goes at the end, unless
# KEEP_WORK=1 (a failed item's log tail is in its phase's record either way).
[ "${KEEP_WORK:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
exec > >(tee -a "$out/run.log") 2>&1
started=$SECONDS

# Time limits per phase, in seconds (docs/gpu.md, section 6, says why they fit), and
# how many workers of the experiments and rnn phases compile at once (all compile,
# then each times with the device to itself: lnorm/gpucheck/turns.py).
if [ "$rehearse" = 1 ]; then
  # 50 s (35 before 2026-12-02, when a Zen 3 core without AVX-512 did not fit
  # perm-MNIST's LN item in it): perm-MNIST's pair, the one its test requires, compiles
  # first, one item at a time (the test pins the rehearsal to one core, where two at
  # once only share it: about 10 s each on a loaded machine); what follows compiles
  # while the time left holds its timing too and is stopped otherwise, as on a GPU at
  # its limit. The device phase takes under 10 s. Figure 6's 110 s (75 before
  # 2026-12-02): on an AMD Zen 3 core without AVX-512 a toy member takes about 15 s,
  # mostly starting, and a wave of three did not fit 75 s less the 15 s each member
  # leaves for the report.
  declare -A limit=([device]=15 [experiments]=50 [rnn]=30 [fig6]=110)
  toy=(--toy); workers=1
else
  declare -A limit=([device]=40 [experiments]=200 [rnn]=100 [fig6]=${GPU_FIG6_LIMIT:-120})
  toy=(); workers=4
fi
# The benchmark phase takes what is left of this call's budget (8 minutes on an H100),
# less what the command needs after its time limit (checkpoints, records, the report).
budget="${GPU_BUDGET:-480}"
benchmark_reserve=45
# Seeds of one normalizer the benchmark phase trains together, in one process (`lnorm
# benchmark --seeds-per-process`): a member alone leaves a GPU mostly idle. 5 is a
# pilot's seeds; a process starts with as many as its group's records say the time
# left holds (docs/benchmark.md, "Chunks").
seeds_per_process="${GPU_SEEDS_PER_PROCESS:-5}"

# --- the Python, and lnorm in it ----------------------------------------------------------

# A copy of the image's site-packages without what the GPU image lacks: symbolic links
# to every entry but those, so that nothing of the rehearsal's own environment leaks in.
rehearsal_python() {
  local image_python="${REHEARSAL_PYTHON:-python3}" venv="$work/venv" site image
  site="$("$image_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  image="$work/image-site"
  mkdir -p "$image"
  for entry in "$site"/*; do
    case "$(basename "$entry" | tr '[:upper:]' '[:lower:]')" in
      wandb*|tensorflow*|mlxtend*|nltk*|ml_collections*|lnorm*|__editable__*|pip|pip-*|\
      setuptools*|_distutils_hack|distutils-precedence.pth|*.pth) ;;
      *) ln -s "$entry" "$image/" ;;
    esac
  done
  "$image_python" -m venv "$venv" >&2 || return 1
  local venv_site
  venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$image" > "$venv_site/gpu-image.pth"
  echo "$venv/bin/python"
}

if [ "$rehearse" = 1 ]; then
  echo "== rehearsal: a fresh virtual environment in $work/venv, offline"
  python="$(rehearsal_python)" || { echo "run.sh: could not build the venv" >&2; exit 1; }
else
  python="${PYTHON:-python3}"
fi

echo "== installing lnorm and the carried wheels into $work/site (offline)"
# From a copy of the package's sources: a build in the tree would leave build/ there,
# whose stale files a later build can pick up.
mkdir -p "$work/src"
cp -r "$repo/pyproject.toml" "$repo/README.md" "$repo/lnorm" "$repo/experiments" \
    "$repo/configs" "$work/src/"
unset PIP_FIND_LINKS PIP_INDEX_URL PIP_EXTRA_INDEX_URL  # The carried wheels alone.
"$python" -m pip install --quiet --no-index --no-deps --no-compile --find-links "$prep/wheels" \
    --target "$work/site" "$prep"/wheels/ml_collections-*.whl "$work/src" \
  || { echo "run.sh: the offline install failed" >&2; exit 1; }
export PYTHONPATH="$work/site"
# The records stay here: no wandb traffic; decoded data and compiled programs cached
# in the scratch folder.
export WANDB_MODE=disabled LNORM_DATA_DIR="$prep/data" LNORM_CACHE_DIR="$work/cache"
export PYTHONUNBUFFERED=1
# The phases run as `lnorm train` does (lnorm.training.process.set_up: one XLA:CPU
# thread, deterministic GPU kernels), each recording its XLA flags; only where several
# workers share the device does each take the memory it needs, not 75% of it.
declare -A preallocate=([device]=true [experiments]=false [rnn]=false [fig6]=true)
cd "$work"  # lnorm is imported from the install, not from the tree.

echo "== versions"
"$python" - <<'EOF'
import importlib.metadata as m, platform, sys
import jax, lnorm
names = ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "optax",
         "orbax-checkpoint", "numpy", "ml-collections", "torch")
def version(name):
  try:
    return m.version(name)
  except m.PackageNotFoundError:
    return "-"
print(f"python {platform.python_version()} ({sys.executable}); lnorm from {lnorm.__file__}")
print(", ".join(f"{n} {version(n)}" for n in names))
print(f"JAX backend {jax.default_backend()}: {jax.devices()}")
EOF
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader

# --- the phases ----------------------------------------------------------------------------

run_phase() {
  local phase="$1"; shift
  local seconds="${limit[$phase]}" t0=$SECONDS code
  echo "== phase $phase (limit ${seconds} s)"
  XLA_PYTHON_CLIENT_PREALLOCATE="${preallocate[$phase]}" \
  timeout --kill-after=5 "$seconds" "$python" -m lnorm.gpucheck "$phase" --out "$out" \
      --work "$work/$phase" --limit "$seconds" "${toy[@]}" "$@"
  code=$?
  if [ "$code" = 124 ] || [ "$code" = 137 ]; then
    "$python" -m lnorm.gpucheck stopped "$phase" "$out" \
        "stopped by run.sh at its limit of $seconds s"
  fi
  echo "== phase $phase: exit code $code after $((SECONDS - t0)) s"
}

# The benchmark phase (issue 60): the gpu scale's members (docs/benchmark.md, "The gpu
# scale"), the claims the cpu scale left undecided first, as one chunk of
# `lnorm benchmark --scale gpu --time-limit`, in the time left of the budget. Its
# records go to $out/benchmark/, starting from those committed for this device
# (results/gpu/<device>/benchmark/), whose members count as finished: so each call
# goes on where the last stopped. A member the limit stops keeps its checkpoint in
# the workdir, here the scratch folder, which goes at the end: it starts again in the
# next call (GPU_BENCHMARK_WORKDIR=<a folder that persists> resumes it instead).
# The experiments are those whose data gpu_prepared/ carries (MNIST: perm-MNIST, DRAW,
# order-embeddings; the books: the attentive reader, the Transformer, skip-thoughts),
# or GPU_BENCHMARK_EXPERIMENTS, their seeds $seeds_per_process together. The rehearsal
# trains two seeds of one member of Figure 6 together at toy sizes under a limit of
# 90 s (their program compiled in 27 s on a loaded core).
benchmark_experiments() {
  local found=()
  [ -d "$prep/data/mnist" ] && found+=(perm_mnist draw order_embeddings)
  [ -d "$prep/data/books" ] && found+=(attentive_reader transformer_lm skip_thoughts)
  local IFS=,
  echo "${GPU_BENCHMARK_EXPERIMENTS:-${found[*]}}"
}

# The device's folder under results/gpu/, as the GPU check names it.
device_slug_code='import jax; from lnorm.training import environment as e; print(e.device_slug(jax.devices()[0].device_kind))'

benchmark_phase() {
  local seconds t0=$SECONDS code device experiments records="$out/benchmark"
  local args=(--scale gpu --records "$records" --workdir "${GPU_BENCHMARK_WORKDIR:-$work/benchmark}"
              --no-wandb)
  if [ "$rehearse" = 1 ]; then
    seconds=90 experiments="perm_mnist (the rehearsal: LN at batch 128, seeds 0 and 1 together)"
    args+=(--experiments perm_mnist --variants batch_size=128 --norms ln --seeds 0,1
           --seeds-per-process 2
           --config.max_steps=6 "--config.hidden_sizes=(16,16)"
           --config.eval_points_per_decade=3 --config.checkpoint_every_secs=3600)
  else
    seconds=$((budget - (SECONDS - started) - benchmark_reserve))
    if [ "$seconds" -lt 60 ]; then
      echo "== phase benchmark: skipped: ${seconds} s left of the ${budget} s budget" \
           "(run it alone: scripts/gpu/run.sh --phases benchmark)"
      return
    fi
    experiments="$(benchmark_experiments)"
    args+=(--experiments "$experiments" --seeds-per-process "$seeds_per_process")
    device="$("$python" -c "$device_slug_code")" || device=""
    if [ -n "$device" ] && [ -d "$repo/results/gpu/$device/benchmark" ]; then
      mkdir -p "$records"
      cp -rn "$repo/results/gpu/$device/benchmark/." "$records/"
    fi
  fi
  echo "== phase benchmark (limit ${seconds} s): $experiments"
  # The command stops itself at its limit; timeout is the backstop.
  timeout --kill-after=10 "$((seconds + benchmark_reserve))" "$python" -m lnorm benchmark \
      "${args[@]}" --time-limit "$seconds"
  code=$?
  echo "== phase benchmark: exit code $code after $((SECONDS - t0)) s" \
       "(75: stopped at its limit, the next call resumes); records in $records"
}

for phase in ${phases//,/ }; do
  case "$phase" in
    device|fig6) run_phase "$phase" ;;
    rnn) run_phase rnn --workers "$workers" ;;
    experiments) run_phase experiments --workers "$workers" \
                     ${GPU_EXPERIMENTS:+--experiments "$GPU_EXPERIMENTS"} ;;
    benchmark) benchmark_phase ;;
    *) echo "run.sh: unknown phase $phase (device, experiments, rnn, fig6, benchmark)" >&2 ;;
  esac
done

echo "== run.sh took $((SECONDS - started)) s; records in $out"
"$python" -m lnorm.gpucheck summary "$out"
