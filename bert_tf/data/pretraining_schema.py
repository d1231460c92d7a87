"""What the pretraining-data writer (`bert_tf.pretraining_data`) and the readers (`bert_tf.data`) agree on.

The sentence tasks and the record feature holding each one's label, the masking methods, the knowledge-unit
features of unmasked records and their per-token flags, and SpanBERT's span-length distribution. Defined here,
below both, so the reader needs nothing from the writer; plain Python, so the writer's workers stay light.
"""

SENTENCE_TASKS = ("nsp", "sop", "none")
# The record feature holding each sentence task's label (`pretraining_features` reads it from here).
SENTENCE_LABEL_FEATURES = {"nsp": "next_sentence_labels", "sop": "sentence_order_labels", "none": None}

# ERNIE's knowledge masking modes (`bert_tf.pretraining_data.knowledge_units`).
KNOWLEDGE_MASKING = ("phrase", "entity")
MASKING_METHODS = ("token", "whole_word", "span", *KNOWLEDGE_MASKING)
# The record feature holding each knowledge mode's flags in unmasked records (for dynamic masking).
UNIT_FEATURES = {"phrase": "phrase_units", "entity": "entity_units"}
# A token's flag in those features: outside a unit, first token of a unit, a unit's later token.
UNIT_NONE = 0
UNIT_START = 1
UNIT_CONTINUE = 2

# SpanBERT's span lengths: geometric with this p, cut at this many words and renormalised.
SPAN_GEOMETRIC_P = 0.2
MAX_SPAN_WORDS = 10
