"""TF Hub-style SavedModels of BERT: encoder (with `mlm`), preprocessing model, Keras 3 loading.

    from bert_tf.export import export_model_dir
    export_model_dir("model_dir", "export")   # export/encoder, export/preprocess

The encoder SavedModel works with `hub.KerasLayer(path, trainable=True)`
(tf_keras: set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported, and
`import tensorflow_text` for the preprocessing model's ops; see
`python -m experiments.export --help`), with `load_tfsm_layer(path)` (Keras 3),
with `tf.saved_model.load` and, through its flat `serving_default` signature,
with TF Serving. A fine-tuned classifier's directory also gives `classifier/`,
a servable SavedModel that takes raw text (`bert_tf.export.classifier_module`),
and with `litert=LiteRTConfig(...)` the same classifier as one LiteRT file with
the tokenizer inside (`bert_tf.export.litert`).
"""

from bert_tf.export.encoder_module import (
    EncoderModule,
    MaskedLMModule,
    encoder_input_spec,
    flatten_outputs,
    mlm_input_spec,
)
from bert_tf.export.exporter import (
    CLASSIFIER_SUBDIR,
    ENCODER_SUBDIR,
    EXTRA_ASSETS_DIR,
    PREPROCESS_SUBDIR,
    atomic_directory,
    export_encoder,
    export_model_dir,
    export_preprocessor,
    verify_encoder_export,
)
from bert_tf.export.tfsm_layer import BertTFSMLayer, keras_variable_name, load_tfsm_layer
