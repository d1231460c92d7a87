"""The examples in the public classes' docstrings run and print what they show."""

import doctest
import inspect
import io

import pytest

from bert_tf import layers, models
from bert_tf.tokenization import BertPreprocessor, BertTokenizer

# Every public layer and model of bert_tf.layers and bert_tf.models (test_layer_contract's list), and the tokenizers.
# TokenClassificationHead is ClassificationHead under its older name, shown in ClassificationHead's example.
PUBLIC_CLASSES = [
    obj
    for module in (layers, models)
    for obj in vars(module).values()
    if inspect.isclass(obj) and obj.__module__.startswith("bert_tf.")
]
DOCUMENTED = [obj for obj in PUBLIC_CLASSES if obj not in (models.TaskModel, layers.TokenClassificationHead)] + [
    BertTokenizer,
    BertPreprocessor,
]


def test_the_list_holds_the_layers_and_models():
    names = {obj.__name__ for obj in DOCUMENTED}
    assert {"BertEncoder", "BertSpanLabeler", "BertTokenClassifier", "MaskedLMHead", "ScalarMix"} <= names


@pytest.mark.parametrize("documented", DOCUMENTED, ids=lambda obj: obj.__name__)
def test_docstring_example(documented):
    (test,) = doctest.DocTestFinder(recurse=False).find(documented)
    assert len(test.examples) >= 3, f"{documented.__name__} has no runnable example"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    result = runner.run(test, out=report.write)
    assert result.failed == 0, report.getvalue()
