"""Loads an encoder SavedModel with `hub.KerasLayer` (tf_keras) and writes its pooled output for fixed inputs.

    python tests/helpers/hub_load_check.py ENCODER_DIR INPUTS.npz OUTPUT.npy

Run under TF_USE_LEGACY_KERAS=1 (`tests.helpers.export_fixtures.run_legacy_keras_script`): tf_keras and
Keras 3 cannot share a process.
"""

import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow picks its Keras

import numpy as np
import tensorflow_hub as hub


def main(encoder_dir, inputs_path, output_path):
    inputs = dict(np.load(inputs_path))
    layer = hub.KerasLayer(encoder_dir, trainable=False)
    np.save(output_path, np.asarray(layer(inputs)["pooled_output"]))


if __name__ == "__main__":
    main(*sys.argv[1:])
