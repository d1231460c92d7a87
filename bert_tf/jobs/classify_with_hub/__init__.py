"""`classify_with_hub`: TF Hub's BERT notebook, on our exported SavedModels, through `hub.KerasLayer`.

The preprocessing and encoder SavedModels (`experiments.export`) are loaded with `hub.KerasLayer` into a
tf_keras model and fine-tuned end to end as a binary (sigmoid) classifier of TSV texts. tf_keras: the caller
sets TF_USE_LEGACY_KERAS=1 before TensorFlow is imported (`experiments.classify_with_hub` does), and these
modules import TensorFlow only inside their functions.

    from bert_tf.jobs.classify_with_hub import HubClassifierConfig, run_classify_with_hub

    config = HubClassifierConfig("runs/demo/export", "data/fine_foods_train.tsv", "data/fine_foods_test.tsv",
                                 label_names=("other", "great"))
    results = run_classify_with_hub("runs/demo/classifier", config)

The batches (`config.py`): packed rows by default (`bert_tf.data.packed_rows` through the encoder's
`input_example_ids` input: each example computed as if alone, so the same results as one example a row, in
random order); else length buckets (the exported preprocessor's `bert_pack_inputs(seq_length=)` at the
batch's bucket length), else the notebook's program unchanged. The saved classifier takes raw strings.

Modules: `config` (`HubClassifierConfig`), `labels` (the two classes), `model` (the classifier, its
bucketed preprocessing and its packed form), `datasets` (bucketed and packed batches), `task_model_dir` (the
classifier as a fine-tuned model directory) and `job` (`run_classify_with_hub`).
"""

from bert_tf.jobs.classify_with_hub.config import HubClassifierConfig
from bert_tf.jobs.classify_with_hub.job import run_classify_with_hub

__all__ = ["HubClassifierConfig", "run_classify_with_hub"]
