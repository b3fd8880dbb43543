r"""Order-embeddings of images and captions: LN paper sec. 6.1, Table 2, Figure 1
(docs/experiments.md, sec. 7).

Caption: word embedding 300 -> GRU 1024 (LN-GRU for norm=ln), last state, the
caption ending with EOS; image: linear 4096 -> 1024; both L2-normalised, then |.|; the
order-violation score -||max(0, s - im)||^2; the contrastive hinge over every pair of
the batch in both directions, margin 0.05, summed; batch 128, Adam 1e-3 (the authors'
Adam, without effective bias correction), each gradient tensor clipped to norm 2; one
random caption per image per epoch; validation R@K every 300 updates, the model with
the best image-retrieval R@1 + R@5 + R@10 on the first 1,000 validation images
evaluated on 5 folds of 1,000 test images.

Defaults taken from Vendrov et al.'s code (ivendrov/order-embedding) that differ from
the runs made before them, each with the field that restores the earlier choice:
  optimizer.name=adam_theano (optim.py)          earlier: adam
  retrieval.select_on=image_rsum,                earlier: rsum, 0 (both directions'
    retrieval.select_images=1000 (train.py)        recalls over every fold)
  data.append_eos=True (datasource.py)           earlier: False
  model.margin 0.2 for score=cosine (driver.py)  earlier: 0.05

Table 2 (MSCOCO; caption retrieval R@1 R@5 R@10 mean rank | image retrieval ...):
  OE (ours)  46.6 79.3 89.1 5.2 | 37.8 73.6 85.7 7.9     norm=none
  OE + LN    48.5 80.6 89.8 5.1 | 38.9 74.3 86.3 7.6     norm=ln
and LN reaches its best validation score in about 60% of the baseline's time.

With the authors' features (``<data_dir>/coco/{train,dev,test}_{caps.txt,ims.npy}``):

  lnorm train --config configs/order_embeddings.py:norm=ln --workdir runs/oe/ln
  lnorm sweep --config configs/order_embeddings.py --sweep table2 --workdir runs/oe

and the claim test on a CPU: ``lnorm sweep --config configs/order_embeddings.py:scale=cpu
--sweep cpu --workdir runs/oe_cpu``.

``score=cosine`` gives the symmetric model of Kiros et al. (Table 2's "Sym"), with
the authors' margin for it, 0.2, and no absolute value. Set the score with this
config argument, which sets ``model.use_abs`` and ``model.margin`` with it; a dotted
``--config.model.score`` override changes the score alone.

Their vocabulary is every word of the training and (first 1,000 images') dev
captions; here it is the training captions' words only: a word seen only in
validation is out of vocabulary, where theirs got an embedding that training never
updates.

``scale=cpu`` (what the runs on this machine use), and why: the COCO VGG features are
not available here, so the data are the SYNTHETIC captioned MNIST digits of
``lnorm.data.image_captions`` (10,000 training, 1,000 validation, 5,000 test images,
512-d random-projection features); the joint space and the GRU have 256 units instead
of 1,024 (a 1024-unit GRU step costs about 1 s on one CPU core), validation every 20
updates instead of 300 (an epoch is 78 updates), 20 epochs. Everything else (batch,
optimizer, clipping, margin, word embedding 300, folds of 1,000 images) is the paper's.
"""

import ml_collections

from lnorm.config import parse_arg_string
from lnorm.training.defaults import SCALES, base_config, norm_options


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln", "score": "order", "scale": "paper",
                                "smoke": False},
                          choices={"scale": SCALES})
  c = base_config()
  c.experiment = "order_embeddings"
  c.scale = args["scale"]  # paper | cpu: which setting the fields below start from.
  # The GRU: none | ln (LN-GRU, docs/experiments.md sec. 4) | rms | prms | dyt
  # | scalenorm | ln_simple | module:attribute (your own, docs/extending.md).
  c.norm = args["norm"]
  c.norm_options = norm_options()  # The LN-GRU reads norm_options.ln (eps, scale_init).
  # Recurrent matrices [H, kH] as k orthogonal H x H gate blocks, as in the authors'
  # code; "orthogonal" takes one orthogonal matrix over the whole [H, kH].
  c.recurrent_init = "orthogonal_per_gate"
  c.batch_size = 128  # Image-caption pairs per update.
  # Figure 1 runs to 90,000 updates (300 validations, one every 300 updates): about 100
  # epochs of the 113k COCO training images of the Karpathy split (train + restval).
  c.num_epochs = 100
  # The authors' optim.py: Adam whose bias correction is in effect missing, so that
  # early steps are up to 6.6 times a standard Adam's (lnorm.training.optim.
  # scale_by_adam_theano). "adam" (optax's standard Adam) was the default before.
  c.optimizer.name = "adam_theano"
  c.optimizer.learning_rate = 1e-3
  c.optimizer.clip_tensor_norm = 2.0  # Per tensor, as the authors' code [code].
  # The hinge summed over the batch's pairs, as the authors' model.py; "mean" divides
  # it by the batch size.
  c.loss_reduction = "sum"
  c.eval_batch_size = 1000  # Images embedded per call in evaluation.
  # Validation retrieval with model selection, and the final test run of the selected
  # model, are the task's periodic_evaluation and end_of_epoch
  # (experiments/order_embeddings/task.py), not the loop's per-batch evaluation.
  c.eval_splits = ()
  c.final_eval_splits = ()
  # The paper's validation interval, with the best model kept (R@K curves, Figure 1).
  c.periodic_eval_every_steps = 300

  c.model = ml_collections.ConfigDict()
  c.model.word_size = 300  # Word embedding.
  c.model.embed_size = 1024  # GRU units = the joint embedding's dimension.
  c.model.score = args["score"]  # order (order-violation) | cosine (symmetric model)
  c.model.use_abs = args["score"] == "order"  # |.| after the L2 norm (order only).
  # The contrastive hinge's margin, per model as in the authors' driver.py: 0.05 for
  # the order model, 0.2 for the symmetric one (which used 0.05 here before).
  c.model.margin = 0.05 if args["score"] == "order" else 0.2

  c.retrieval = ml_collections.ConfigDict()
  # Scores are computed query_block x candidate_block pairs at a time (x the embedding
  # size for the order-violation penalty): bounds evaluation memory; results unchanged.
  c.retrieval.query_block = 16
  c.retrieval.candidate_block = 1024
  # Scores are averaged over folds of this many images and all their captions (Table
  # 2: 5 folds of 1,000 images and 5,000 captions). It changes the scores, and so
  # which model validation selects.
  c.retrieval.fold_size = 1000
  # The model kept as the best on validation: the one with the best `select_on` over
  # the first `select_images` validation images (a whole number of folds; 0: all).
  # The authors' train.py: image-retrieval R@1 + R@5 + R@10 ("image_rsum") on the
  # first 1,000 dev images. "rsum" over 0 (every fold, both directions' recalls) was
  # the default before.
  c.retrieval.select_on = "image_rsum"
  c.retrieval.select_images = 1000

  c.data.name = "image_captions"
  c.data.source = "auto"  # auto: files. 'synthetic' for captioned MNIST digits.
  c.data.collection = "coco"  # The folder under the data directory (coco, f30k, ...).
  c.data.test_prefix = "test"  # The test files' prefix: test_caps.txt, test_ims.npy.
  c.data.captions_per_image = 5
  c.data.vocab_size = 0  # 0: every word of the training captions.
  c.data.max_length = 0  # 0: the longest caption, so that none is cut.
  # Each caption ends with an end-of-sentence token, which the GRU reads last, as in
  # the authors' datasource.py (their id 0; here lnorm.data.text.EOS, id 2, after pad
  # and OOV). False: the words alone (the default before).
  c.data.append_eos = True
  # The synthetic source only: the feature size and how many MNIST digits per split.
  c.data.feature_size = 4096
  c.data.synthetic_train_images = 10000
  c.data.synthetic_validation_images = 1000
  c.data.synthetic_test_images = 5000

  if args["scale"] == "cpu":
    c.data.source = "synthetic"
    c.data.feature_size = 512
    c.model.embed_size = 256
    c.num_epochs = 20
    c.periodic_eval_every_steps = 20

  if args["smoke"]:
    c.num_epochs = 2
    c.batch_size = 16
    c.eval_batch_size = 50
    c.retrieval.fold_size = 50
    c.retrieval.select_images = 50
    c.periodic_eval_every_steps = 5
    c.model.word_size = 8
    c.model.embed_size = 16
    c.data.source = "synthetic"
    c.data.feature_size = 32
    c.data.synthetic_train_images = 160
    c.data.synthetic_validation_images = 50
    c.data.synthetic_test_images = 100
    c.progress_bar = False
  return c


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``)."""
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments order_embeddings` runs the same).
      **benchmark_suite.named_sweeps("order_embeddings"),
      # Table 2 and Figure 1: the baseline GRU and the LN-GRU.
      "table2": [{"norm": n} for n in ("none", "ln")],
  }
  sweeps["seeds"] = sweeps["cpu"]  # The old name of "cpu", kept for earlier commands.
  return sweeps if name is None else sweeps[name]
