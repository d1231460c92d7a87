"""Package definition for bert_tf.

The runtime pins are the set that installs together cleanly (see BUILD.md for
what each one is for). tensorflow-text and tf-keras require the full
`tensorflow` package; `tensorflow-cpu` conflicts with them.
"""

import setuptools

INSTALL_REQUIRES = [
    "tensorflow==2.21.0",
    "tensorflow-text==2.21.1",
    "tensorflow-hub==0.16.1",
    "tf-keras==2.21.0",
    "tensorflow-datasets==4.9.10",
    "importlib_resources",  # needed by tensorflow-datasets, which does not declare it
    "keras>=3.12,<4",
    "absl-py",
    "tensorboard",  # tf.summary scalars and the tensorboard command (tensorflow 2.21 no longer depends on it)
    "numpy",
    "safetensors",
    "matplotlib",
    "scikit-learn>=1.3",  # the linear probes of experiments.probe_layers
]

EXTRAS_REQUIRE = {
    "test": [
        "pytest",
        "pytest-xdist",  # pytest.ini runs the suite on every core, a test file per worker
        "hypothesis",
        "jax[cpu]",  # the backend-independence test runs the encoder on JAX
        "nbclient",
        "nbformat",
        "ipykernel",
        "ai-edge-litert==2.3.0",  # the LiteRT interpreter that runs the --litert classifier (with TF Text's ops)
        "ruff==0.17.6",  # the code style (ruff.toml), checked by tests/test_code_style.py
        "apache-beam==2.77.0",  # tests/test_beam_pipeline.py runs create_pretraining_data on its DirectRunner
    ],
    "beam": [
        "apache-beam==2.77.0",  # create_pretraining_data --runner=DataflowRunner|FlinkRunner|SparkRunner|DirectRunner
    ],
    "benchmarks": [
        "psutil",  # peak memory of a process tree (benchmarks/create_pretraining_data_speed.py)
    ],
}

# Every command starts with `bert_tf_` (tests/test_console_scripts.py checks it).
CONSOLE_SCRIPTS = [
    "bert_tf_convert=experiments.convert:run",
    "bert_tf_export=experiments.export:run",
    "bert_tf_pretrain=experiments.pretrain:run",
    "bert_tf_finetune=experiments.finetune:run",
    "bert_tf_keras_fit=experiments.keras_fit:run",
    "bert_tf_extract_features=experiments.extract_features:run",
    "bert_tf_probe_layers=experiments.probe_layers:run",
    "bert_tf_distill=experiments.distill:run",
    "bert_tf_distill_frontier=experiments.distill_frontier:run",
    "bert_tf_demo=experiments.demo:run",
    "bert_tf_create_pretraining_data=tfrecords_tools.create_pretraining_data:run",
    "bert_tf_inspect_tfrecords=tfrecords_tools.inspect_tfrecords:run",
    "bert_tf_make_vocab=tfrecords_tools.make_vocab:run",
    "bert_tf_prepare_corpus=tfrecords_tools.prepare_corpus:run",
    "bert_tf_write_weights_file=experiments.write_weights_file:run",
]
setuptools.setup(
    name="bert_tf",
    version="0.1.0",
    description="BERT for TensorFlow and Keras 3: encoder, pretraining, fine-tuning and TF Hub-style export.",
    license="Apache-2.0",
    classifiers=[
        "License :: OSI Approved :: Apache Software License",
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    python_requires=">=3.10",
    packages=setuptools.find_packages(
        include=["bert_tf", "bert_tf.*", "experiments", "experiments.*", "tfrecords_tools", "tfrecords_tools.*"]
    ),
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
