"""Backend-independent Keras models of BERT (keras and keras.ops only)."""

from bert_tf.models.bert_classifier import BertClassifier
from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES, EXAMPLE_IDS_KEY, BertEncoder, encoder_inputs
from bert_tf.models.bert_pretrainer import BertPretrainer, pretraining_losses
from bert_tf.models.bert_span_labeler import BertSpanLabeler
from bert_tf.models.bert_token_classifier import BertTokenClassifier
from bert_tf.models.document_classifier import DocumentClassifier
from bert_tf.models.task_model import TaskModel
