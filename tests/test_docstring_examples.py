"""The examples in the public classes' docstrings run and print what they show."""

import doctest
import io

import pytest

from bert_tf.layers import ScalarMix
from bert_tf.models import BertClassifier, BertEncoder, BertPretrainer
from bert_tf.tokenization import BertPreprocessor, BertTokenizer

DOCUMENTED = [BertEncoder, BertPretrainer, BertClassifier, BertTokenizer, BertPreprocessor, ScalarMix]


@pytest.mark.parametrize("documented", DOCUMENTED, ids=lambda obj: obj.__name__)
def test_docstring_example(documented):
    (test,) = doctest.DocTestFinder(recurse=False).find(documented)
    assert len(test.examples) >= 3, f"{documented.__name__} has no runnable example"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    result = runner.run(test, out=report.write)
    assert result.failed == 0, report.getvalue()
