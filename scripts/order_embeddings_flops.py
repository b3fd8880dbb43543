r"""Order-embeddings: train-step throughput, its share of the matmul rate, and the time
to evaluate retrieval on 1,000 and 5,000 images.

Counts the matmul FLOPs of one training step analytically (the caption GRU over the
padded length, the image projection); ``lnorm.training.benchmark`` compiles and times
the harness's own train step, measures the matmul rate and prints the share of it a
step achieves, with pairs/s. Then it times what a validation or test evaluation does:
embedding N images and their 5N captions with the model (in batches of
``eval_batch_size``), and ranking them with ``lnorm.evaluation.retrieval.evaluate`` in folds of
``retrieval.fold_size`` (Table 2's 1,000 images) and all at once (the 5k protocol).

  python scripts/order_embeddings_flops.py --config configs/order_embeddings.py:norm=ln

The loop pads every caption to the longest training caption (``data.max_length=0``),
so ``--words`` should be that length: 50 on COCO's Karpathy split, whose median
caption has 11 words.
"""

from __future__ import annotations

import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from lnorm.evaluation import retrieval
from lnorm.data.core import Dataset
from lnorm.training import benchmark
from lnorm.training.task import load_task


def matmul_macs_per_pair(c, words: int, feature_size: int) -> int:
  """Multiply-accumulates of one forward pass for one image-caption pair (matmuls only):
  the GRU's input and recurrent maps at every padded step, the image projection, and the
  pair's row of the [B, B] score matrix (counted as a matmul although the order
  violation is an elementwise max)."""
  w, e = c.model.word_size, c.model.embed_size
  return words * (w * 3 * e + e * 3 * e) + feature_size * e + c.batch_size * e


def add_arguments(parser):
  parser.add_argument("--words", type=int, default=50,
                      help="Padded caption length (the longest training caption).")
  parser.add_argument("--vocab", type=int, default=10000, help="Word vocabulary size.")
  parser.add_argument("--eval_images", default="1000,5000",
                      help="Comma-separated image counts to time an evaluation on.")


def random_pairs(n: int, per_image: int, words: int, vocab: int, feature_size: int,
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
  lengths = rng.integers(words // 4, words + 1, (n, per_image)).astype(np.int32)
  tokens = rng.integers(2, vocab, (n, per_image, words)).astype(np.int32)
  tokens[np.arange(words)[None, None, :] >= lengths[..., None]] = 0
  return {"captions": tokens, "caption_length": lengths,
          "image": rng.normal(size=(n, feature_size)).astype(np.float32),
          "mask": np.ones((n,), np.float32)}


def evaluation_seconds(model, params, c, n: int, args, rng) -> dict[str, float]:
  """Wall seconds to embed ``n`` images with their captions, and to rank them."""
  per_image = c.data.captions_per_image
  arrays = random_pairs(n, per_image, args.words, args.vocab, c.data.feature_size, rng)
  embed = jax.jit(lambda *inputs: model.apply({"params": params}, *inputs, train=False))
  step = c.eval_batch_size

  def embed_batch(i):
    return embed(arrays["captions"][i:i + step], arrays["caption_length"][i:i + step],
                 arrays["image"][i:i + step])

  jax.block_until_ready(embed_batch(0))  # Compiles (a last, smaller batch compiles again).
  start = time.perf_counter()
  outs = jax.device_get([embed_batch(i) for i in range(0, n, step)])
  out = {f"embed_{n}_images_seconds": time.perf_counter() - start}
  images = np.concatenate([o["images"] for o in outs])
  captions = np.concatenate([o["captions"] for o in outs]).reshape(n * per_image, -1)
  for fold_size in sorted({min(c.retrieval.fold_size, n), n}):
    def rank():
      return retrieval.evaluate(images, captions, c.model.score, fold_size=fold_size,
                                query_block=c.retrieval.query_block,
                                candidate_block=c.retrieval.candidate_block)
    rank()  # Compiles.
    out[f"rank_{n}_images_folds_of_{fold_size}_seconds"] = benchmark.time_calls(rank, 1)[0]
  return out


def main():
  args, config = benchmark.parse_args(__doc__.split("\n")[0],
                                      "configs/order_embeddings.py:norm=ln", add_arguments)
  task, c = load_task(config), config
  rng = np.random.default_rng(0)
  arrays = random_pairs(c.batch_size, c.data.captions_per_image, args.words, args.vocab,
                        c.data.feature_size, rng)
  model = task.build_model(Dataset("image_captions", "synthetic", "random", {"train": arrays},
                                   info={"vocab_size": args.vocab}))
  batch = jax.tree.map(jnp.asarray, arrays)
  flops = benchmark.train_step_flops(
      matmul_macs_per_pair(c, args.words, c.data.feature_size) * c.batch_size)
  report = benchmark.measure_train_step(
      task, model, c, batch, flops=flops, steps=args.steps, matmul_size=args.matmul_size,
      matmul_reps=args.matmul_reps)
  params = model.init({"params": jax.random.key(0), "caption": jax.random.key(0)},
                      *task.model_inputs(batch), train=True)["params"]
  evaluation = {}
  for n in (int(x) for x in args.eval_images.split(",")):
    evaluation |= evaluation_seconds(model, params, c, n, args, rng)
  print(json.dumps({
      "config": args.config, "words": args.words, "vocab": args.vocab,
      "feature_size": c.data.feature_size, **report,
      "pairs_per_sec_wall": c.batch_size / report["step_seconds_wall"],
      "evaluation_seconds_wall": evaluation}, indent=2))


if __name__ == "__main__":
  main()
