"""`probe_layers`: which layer, and which combination of layers, gives a model's best frozen features.

For a model directory and two tasks (token tagging and sentence classification, from the user's files or the
bundled Brown part-of-speech tags and fine-food reviews), it computes every layer's features once
(`bert_tf.probing.layer_features`), fits the fixed linear probe of `bert_tf.probing.probes` to each row of the
BERT paper's Table 7 and the probing literature, and writes `report.md`, `report.json` and `layers.png`:

* rows: `layer_0` (the embeddings) to `layer_<L>` separately, `second_to_last`, `last`, `mean_last_four`,
  `concat_last_four` (the last min(4, L) Transformer layers), `scalar_mix` (a learned softmax mix of all
  layers), and as a reference `fine_tuned` (the whole encoder fine-tuned with `bert_tf.jobs.finetuning.run_finetuning`
  on the same training file, scored on the test file);
* controls: the same architecture randomly initialised (same probes, same rows), and a non-contextual
  baseline (each word's most frequent training tag, the most frequent tag for unseen words; the majority
  label for sentences).

Sentences are represented by `[CLS]` (`sentence_cls`) and by the mean over real tokens (`sentence_mean`);
words by their first WordPiece or the mean of their pieces (`word_piece`).

    from bert_tf.checkpoints.model_source import ModelSource
    from bert_tf.jobs.probe_layers import ProbeLayersConfig, run_probe_layers

    report = run_probe_layers("runs/probe", ProbeLayersConfig(ModelSource(model_dir="models/minilm"), finetune=False))

Modules: `config` (`ProbeLayersConfig`), `feature_keys` (what the feature cache's arrays were computed
from), `child_processes` (the forward passes, the scalar mixes, the fine-tuning children's allocator),
`fine_tuned_row` (the fine-tuned reference), `report_sections` (report.json's parts) and `job` (the stages in
order); `bert_tf.probing` holds the data readers, the features, the probes and the report's files.
"""

from bert_tf.jobs import DEFAULT_SEED
from bert_tf.jobs.probe_layers.config import TASKS, ProbeLayersConfig
from bert_tf.jobs.probe_layers.job import run_probe_layers

__all__ = ["DEFAULT_SEED", "TASKS", "ProbeLayersConfig", "run_probe_layers"]
