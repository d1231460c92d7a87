"""The end-to-end demo on the bundled data (grows into the full BERT life cycle).

    python -m experiments.demo --output_dir=runs/demo
"""

import os
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", "runs/demo", "Where the demo writes everything it builds.")


def main(argv):
    del argv
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import numpy as np

    import bert_tf
    from bert_tf.checkpoints import load_pretrainer, write_model_dir

    start = time.time()
    config = bert_tf.BertConfig.from_preset("bert_tiny", vocab_size=1000, max_position_embeddings=128)
    pretrainer = bert_tf.BertPretrainer(bert_tf.BertEncoder(config))
    model_dir = os.path.join(FLAGS.output_dir, "model")
    if not os.path.exists(model_dir):
        write_model_dir(model_dir, pretrainer)
    restored = load_pretrainer(model_dir)
    inputs = {"input_word_ids": np.full((1, 8), 7, "int32"), "input_mask": np.ones((1, 8), "int32"),
              "input_type_ids": np.zeros((1, 8), "int32"), "masked_lm_positions": np.array([[1, 2]], "int32")}
    logits = restored(inputs)["mlm_logits"]
    print(f"model dir {model_dir}: {restored.encoder.count_params():,} encoder parameters, "
          f"mlm_logits {tuple(logits.shape)}, {time.time() - start:.1f} s")


def run():
    app.run(main)


if __name__ == "__main__":
    run()
