"""Backend-independent Keras layers of BERT (keras and keras.ops only)."""

from bert_tf.layers.activations import get_activation
from bert_tf.layers.attention import MultiHeadSelfAttention
from bert_tf.layers.document_windows import PackedWindowPooling, WindowPooling, WindowRows
from bert_tf.layers.dropout import Dropout
from bert_tf.layers.embeddings import BertEmbeddings
from bert_tf.layers.gather import gather_positions
from bert_tf.layers.heads import ClassificationHead, NextSentenceHead, SpanHead, TokenClassificationHead
from bert_tf.layers.masked_lm_head import MaskedLMHead
from bert_tf.layers.scalar_mix import ScalarMix
from bert_tf.layers.transformer_encoder_block import TransformerEncoderBlock
from bert_tf.layers.window_attention import PackedWindowAttentionPooling, WindowAttentionPooling
