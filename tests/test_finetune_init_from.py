"""`experiments.finetune --init_from=random`: the randomly initialised baseline, from a config and vocabulary."""

import numpy as np
from absl import logging

from bert_tf.checkpoints import load_encoder
from experiments import finetune
from tests.fixtures.finetune import synthetic
from tests.helpers import absl_flags


def _finetune(tmp_path, name, *model_flags):
    train = synthetic.write_tsv(str(tmp_path / "train.tsv"), ["text_a", "label"], synthetic.sentiment_rows(32, 1))
    output_dir = tmp_path / name
    logging.set_verbosity(logging.INFO)  # as the command line shows them (unparsing the flags resets it)
    status = absl_flags.run_main(
        finetune,
        [
            "--task=classification",
            f"--train_file={train}",
            f"--output_dir={output_dir}",
            "--do_train",
            "--max_seq_length=16",
            "--train_batch_size=16",
            "--num_train_steps=2",
            "--learning_rate=1e-7",  # the encoder stays where it started, to the test's tolerance
            *model_flags,
        ],
    )
    return status, str(output_dir)


def _largest_difference(a, b) -> float:
    return max(float(np.abs(x.numpy() - y.numpy()).max()) for x, y in zip(a.weights, b.weights))


def test_random_init_trains_the_configs_architecture_without_its_weights(tmp_path, capsys):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    pretrained = load_encoder(model_dir)
    config, vocab = f"--bert_config_file={model_dir}/bert_config.json", f"--vocab_file={model_dir}/vocab.txt"
    status, random_dir = _finetune(tmp_path, "random", config, vocab, "--init_from=random", "--seed=3")
    assert status == 0, capsys.readouterr().err[-2000:]
    assert "randomly initialised (--init_from=random, --seed=3)" in capsys.readouterr().err
    status, checkpoint_dir = _finetune(tmp_path, "checkpoint", f"--model_dir={model_dir}")
    assert status == 0
    # Two steps at lr 1e-7 move a weight by about 2e-7: the pretrained run keeps the checkpoint's weights,
    # the random one has other weights (both initialisations are draws of std 0.02).
    assert _largest_difference(load_encoder(checkpoint_dir), pretrained) < 1e-5
    assert _largest_difference(load_encoder(random_dir), pretrained) > 1e-2
    again = _finetune(tmp_path, "random_again", f"--model_dir={model_dir}", "--init_from=random", "--seed=3")[1]
    assert _largest_difference(load_encoder(again), load_encoder(random_dir)) < 1e-5  # the seed's initialisation


def test_random_init_refuses_a_checkpoint_and_needs_a_config(tmp_path, capsys):
    model_dir = synthetic.make_model_dir(str(tmp_path / "model"))
    status, _ = _finetune(
        tmp_path, "a", f"--model_dir={model_dir}", f"--init_checkpoint={model_dir}", "--init_from=random"
    )
    assert status == 2
    assert "--init_from=random reads no checkpoint" in capsys.readouterr().err
    status, _ = _finetune(tmp_path, "b", f"--vocab_file={model_dir}/vocab.txt", "--init_from=random")
    assert status == 2
    assert "--init_from=random needs --bert_config_file and --vocab_file" in capsys.readouterr().err
