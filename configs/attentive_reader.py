r"""The attentive reader on cloze question answering: LN paper sec. 6.2, Figure 2
(docs/experiments.md sec. 5).

Paper settings (the defaults): the CNN corpus of Hermann et al. with passages cut to
4 sentences (the Cooijmans et al. preprocessing); a unidirectional attentive reader
with a shared word embedding of 240, passage and question LSTMs of 240 units with
learned initial states, attention and readout of 240; as in the authors' Theano code,
dropout 0.5 on the word embeddings and on the readout, and their initialisation
(``model.init="authors"``: 0.05 x orthogonal square matrices and LSTM gate blocks,
Glorot-uniform for the rest); Adam lr 8e-5, batch 64, global-norm clip 10 as their
code computes it (``optimizer.clip_global_norm_rule="attentive_reader_code"``: no
clipping under a norm of 100, 10 sqrt(n) above; ``"standard"`` clips at 10);
validation error against updates (800k in Figure 2). Variants: ``none`` (LSTM),
``bn`` (recurrent BN, gain init 0.1), ``bn_everywhere`` (also BN on the attention and
readout layers) and ``ln`` (LN-LSTM, gain init 1.0; ``ln_gain=0.1`` for the paper's
comparison, which 1.0 won clearly). The paper reports curves only: LN trains faster
than LSTM and both BN variants and ends lower (Figure 2: about 0.40 validation
error). Figure 2's curves come from the authors' code, whose softmax runs over the
whole vocabulary with the error of the unrestricted argmax
(``model.answer_vocabulary="vocabulary"``, ``model.restrict_to_candidates=False``);
the defaults here predict among the entity markers of the passage, as Hermann et al.
evaluate.

  lnorm train --config configs/attentive_reader.py:norm=ln \
      --workdir runs/ar/paper_ln --config.data.data_dir=<dir holding cnn/questions>
  lnorm sweep --config configs/attentive_reader.py --sweep figure2 --workdir runs/ar/paper

The Children's Book Test (Hill et al. 2016; ``data.source=cbt``, the named-entity
files by default) is read as well; the ``cbt`` sweep runs it on a GPU
(``CBT_ON_A_GPU`` below names its settings).

``scale=cpu`` (one CPU core): neither the CNN corpus nor the CBT is available here,
so the data are the CBT made from the 17 Gutenberg books (``data.source=cbt_books``,
lnorm.data.cloze.books), split by book, 10 candidates a question. With the CBT's 20
context sentences and named entities only, the rule that every candidate is in the
context left 1,984 training questions, and no member beat the most-frequent
candidate (0.795 validation error). So the passage is the paper's length, the 4
sentences before the query (``data.context_sentences=4``: answers and candidates
come from them), blanks are named entities or common nouns
(``data.word_classes=NE,CN``; in 4 sentences the blanks are almost all nouns), and
every qualifying word of a query is a question (``data.blanks_per_query=every``).
Only 3,991 of the 12,941 training blanks then find 9 other words of their own class
in the 4 sentences and the query, so a short list is topped up with words of the
other class there (``data.candidate_pool=top_up``: every candidate is still in the
passage or the query, as in the CBT): 7,519 training, 1,914 validation, 5,931 test
questions (230 training passages over 400 tokens dropped), mean passage 144 tokens
in training; the most-frequent candidate's validation error 0.816 (train 0.781,
test 0.764), chance 0.900. Without top_up: 3,772 / 699 / 3,444 questions,
most-frequent 0.861 on validation, and the LSTM's best in 3,000 updates 0.827
(3.4 points below it; training error 0.27). With top_up, 3,000 updates (issue 42,
6 to 10 minutes a member on one loaded core): the LSTM's best validation error
0.750 and 0.761 (seeds 0 and 1; 6.0 points below the most-frequent candidate on
average; training error 0.48 and 0.51 at the end), still falling at update 3,000.
Holding out one test book instead of two (``data.test_books=1``: 10,511 training
questions, the same validation set) gave 0.757 (seed 0), no better. LN at gain 1.0
trains without stopping but stays at chance (best 0.886 in 2,000 updates); with
``--config.optimizer.clip_global_norm_rule=standard`` it reaches 0.720 (seed 0,
at chance for its first 1,500 updates): see the note on the clip rule below.
What is reduced, and why:

* the embedding, LSTMs, attention and readout 240 -> 64: a step runs the passage
  LSTM over every token one after another;
* questions cut to the 5 words either side of the blank (``data.question_window``;
  CBT queries are whole sentences, 25 words on average, up to 120): the
  unidirectional question LSTM's last state then still holds the words next to the
  blank, which is what the reader must match in the passage (in 1,500-update runs the
  whole query left the reader at the most-frequent-candidate baseline, the window
  took it below), and the question LSTM runs 11 steps instead of 120;
* passages capped at 400 tokens and padded to 4 length buckets; the vocabulary 10k;
* learning rate 8e-5 -> 1e-3, because a run lasts 3,000 updates, not 800k;
  validation every 250 updates.

  lnorm train --config configs/attentive_reader.py:norm=ln,scale=cpu,ln_gain=0.1 \
      --workdir runs/ar/ln

(LN at gain 0.1: at the default gain 1.0 its gradients explode with passage length
under the authors' clip rule and a run stays at chance, docs/results.md; the config
warns.)
  lnorm sweep --config configs/attentive_reader.py:scale=cpu --sweep cpu \
      --workdir runs/ar
"""

import ml_collections

from lnorm.config import parse_arg_string
from lnorm.training.defaults import SCALES, base_config, norm_options


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln", "scale": "paper", "ln_gain": 1.0,
                                "smoke": False},
                          choices={"scale": SCALES})
  c = base_config()
  c.experiment = "attentive_reader"
  c.scale = args["scale"]  # paper | cpu: which setting the fields below start from.
  # none | bn | bn_everywhere | ln | rms | prms | dyt | scalenorm | ln_simple
  # | module:attribute (your own normalizer, docs/extending.md).
  c.norm = args["norm"]
  c.norm_options = norm_options()
  # Recurrent matrices [H, kH] as k orthogonal H x H gate blocks, as in the authors'
  # code; "orthogonal" takes one orthogonal matrix over the whole [H, kH].
  c.recurrent_init = "orthogonal_per_gate"
  c.norm_options.ln.scale_init = args["ln_gain"]  # LN gain init: 1.0 or 0.1 (paper).
  c.norm_options.bn.scale_init = 0.1  # Cooijmans et al.'s BN gain init.
  c.batch_size = 64
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 8e-5  # The authors' code.
  c.optimizer.clip_global_norm = 10.0
  # As the authors' code computes it: no clipping under a norm of 100, then 10*sqrt(n)
  # (experiments/attentive_reader/clip.py); "standard" clips at 10.
  # With LN's gain at 1.0 the first gradients on long passages reach 1e16 or more
  # (scripts/gradient_norm_by_length.py); this rule passes them to Adam at
  # 10 sqrt(norm), about 1e9, and Adam's second moments (beta2 0.999) take tens of
  # thousands of updates to forget them: a scale=cpu run then stays at chance
  # (docs/results.md). Gain 0.1 or the "standard" rule avoid it.
  c.optimizer.clip_global_norm_rule = "attentive_reader_code"
  c.max_steps = 800_000  # Figure 2's x axis (updates).
  c.num_epochs = 1  # Unused while max_steps > 0.
  c.eval_splits = ("validation",)  # The paper reports validation curves only.
  c.eval_every_steps = 5_000
  c.eval_every_splits = ("validation",)
  c.eval_batch_size = 256
  # Passages padded to 4 lengths (quartiles of the training lengths), not all to the
  # longest: 4 compilations of the train step, and a step no longer pays for padding
  # a short passage to the longest.
  c.length_buckets.num = 4

  c.model = ml_collections.ConfigDict()
  c.model.embed_size = 240  # One embedding for passage and question words.
  c.model.hidden_size = 240  # Both LSTMs.
  c.model.attention_size = 240
  c.model.readout_size = 240
  c.model.dropout = 0.5  # On the readout, before the answer softmax (0: off).
  c.model.embed_dropout = 0.5  # On the passage and question word embeddings (0: off).
  c.model.bilinear = True  # The (V d_t).(V q) term of the authors' attention.
  # The readout r = tanh(W_c ctx + W_r q + b) of Cooijmans et al.'s run script
  # (use_desc_skip_c_g 0). True adds W_m mean_t d_t, lnorm's earlier readout (the LN
  # run's command line passes the flag twice, 0 then 1: docs/experiments.md sec. 9).
  c.model.readout_description_skip = False
  # The LSTMs start from c0 = 0 and a learned h0, as the authors'. True learns c0
  # too, lnorm's earlier model.
  c.model.learn_initial_cell = False
  c.model.forget_bias = 0.0
  # How the weights start (experiments/attentive_reader/initialisation.py): "authors",
  # 0.05 x orthogonal for square matrices and LSTM gate blocks, Glorot-uniform for
  # the rest, as in the authors' Theano code; "lnorm", the earlier choice (N(0, 0.01)
  # embedding, LeCun-normal kernels, W_h as recurrent_init says).
  c.model.init = "authors"
  # The authors' reseeding quirk: every gate block, and every matrix of one shape,
  # starts identical. Off by default.
  c.model.init_identical_blocks = False
  # The output softmax: "entities", over the entity markers @entity0..; "vocabulary",
  # over every word id, as the authors' code (its vocabulary + 1 outputs).
  c.model.answer_vocabulary = "entities"
  # Predictions (the error metric) restricted to each example's candidates: the
  # passage's entities (Hermann et al.'s evaluation), or the 10 listed candidates of
  # CBT-style data. False: the argmax over every output. Figure 2's curves are the
  # authors' code: answer_vocabulary="vocabulary", restrict_to_candidates=False.
  c.model.restrict_to_candidates = True

  c.data.name = "cloze"
  # files (CNN/Daily Mail) | cbt (Children's Book Test) | cbt_books (the CBT made from
  # the books) | cloze_books (4-sentence passages from the books) | synthetic.
  c.data.source = "files"
  c.data.corpus = "cnn"  # files: cnn or dailymail.
  c.data.word_type = "NE"  # cbt: NE | CN | V | P (cbt_books: data.word_classes).
  # cbt, cbt_books: the last N of the 20 context sentences make the passage
  # (cbt_books: the answers and candidates come from those N and the query).
  c.data.context_sentences = 20
  # cbt_books: the classes a blank may be, NE | CN | NE,CN (named entities, common
  # nouns); a question's 10 candidates are words of its answer's class.
  c.data.word_classes = "NE"
  # cbt_books: one blank drawn per query sentence (the CBT) | every qualifying word.
  c.data.blanks_per_query = "one"
  # cbt_books: a blank's 9 other candidates are words of its class in the passage and
  # the query (class, the CBT) | top_up: the rest from the other word_classes there
  # when its class offers fewer than 9.
  c.data.candidate_pool = "class"
  c.data.passage_sentences = 4  # Cooijmans et al.'s preprocessing (0: whole passage).
  c.data.sentence_selection = "first"  # files: first | overlap (most question words).
  c.data.vocab_size = 50000  # Ids, the reserved and entity ones included.
  # @entity0..@entity599: the answer vocabulary (cbt, cbt_books: the 10 candidates).
  c.data.num_entities = 600
  c.data.max_passage_tokens = 400  # Longer examples are dropped.
  c.data.max_question_tokens = 100
  c.data.question_window = 0  # > 0: questions cut to N tokens either side of the blank.
  c.data.permute_entities = True  # Rename the entities per example in training.
  c.data.validation_books = 2  # cbt_books, cloze_books: held-out books for validation ...
  c.data.test_books = 2  # ... and for test.
  c.data.min_entity_count = 3  # cbt_books, cloze_books: see lnorm.data.cloze.books.

  if args["scale"] == "cpu":
    c.model.embed_size = 64
    c.model.hidden_size = 64
    c.model.attention_size = 64
    c.model.readout_size = 64
    c.data.source = "cbt_books"
    c.data.context_sentences = 4
    c.data.word_classes = "NE,CN"
    c.data.blanks_per_query = "every"
    c.data.candidate_pool = "top_up"
    c.data.vocab_size = 10000
    c.data.num_entities = 10  # The candidates (the data fix it for cbt_books).
    c.data.max_passage_tokens = 400
    c.data.question_window = 5
    c.data.max_question_tokens = 11
    c.length_buckets.num = 4
    c.optimizer.learning_rate = 1e-3
    c.max_steps = 3000
    c.eval_every_steps = 250
    # One step per call: a step of ~0.3 s hides the dispatch, and batches of one
    # passage length each can come in any order.
    c.steps_per_call = 1

  if args["smoke"]:
    c.model.embed_size = 8
    c.model.hidden_size = 8
    c.model.attention_size = 8
    c.model.readout_size = 8
    c.data.source = "synthetic"
    c.data.synthetic_examples = 64
    c.data.vocab_size = 60
    c.data.num_entities = 10
    c.data.max_passage_tokens = 40
    c.data.max_question_tokens = 6
    c.data.use_cache = False
    c.batch_size = 8
    c.max_steps = 0
    c.num_epochs = 1
    c.eval_every_steps = 0
    c.steps_per_call = 1
    c.length_buckets.num = 2
    c.eval_batch_size = 32
    c.progress_bar = False
  return c


#: The LN gain init compared in Figure 2's text.
_LN_GAINS = (1.0, 0.1)
#: The real Children's Book Test (named entities) on a GPU: the paper's sizes and
#: optimiser, the full 20-sentence contexts, and about 120 passes over its 108k
#: training questions instead of Figure 2's 800k updates. The length limits come from
#: the CBT-style task built here (99th percentiles: 1,151 context and 122 query
#: tokens); no CBT copy was at hand to measure them on (the notes count what they drop).
CBT_ON_A_GPU = {"data.source": "cbt", "data.word_type": "NE",
                "data.context_sentences": 20, "data.max_passage_tokens": 1200,
                "data.max_question_tokens": 150, "data.vocab_size": 50000,
                "max_steps": 200_000, "eval_every_steps": 2_000}


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``).

  lnorm sweep --config configs/attentive_reader.py --sweep figure2 --workdir runs/ar
  lnorm sweep --config configs/attentive_reader.py:scale=cpu --sweep cpu --workdir runs/ar_cpu
  """
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  none, bn, bn_everywhere = {"norm": "none"}, {"norm": "bn"}, {"norm": "bn_everywhere"}
  ln = {g: {"norm": "ln", "norm_options.ln.scale_init": g} for g in _LN_GAINS}
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments attentive_reader` runs the same): at cpu, on the CBT-style task
      # built from the books.
      **benchmark_suite.named_sweeps("attentive_reader"),
      # Figure 2 on a GPU: LSTM, BN-LSTM, BN-everywhere, LN-LSTM (gain 1.0 and 0.1) on
      # the CNN corpus.
      "figure2": [none, bn, bn_everywhere, ln[1.0], ln[0.1]],
      # LSTM and LN-LSTM on the real CBT, on a GPU (CBT_ON_A_GPU).
      "cbt": [{**v, **CBT_ON_A_GPU} for v in (none, ln[1.0])],
  }
  return sweeps if name is None else sweeps[name]
