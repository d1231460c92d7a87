"""Features of documents longer than the window (`extract_features --long_text=windows`): every window of a
document is a line of its own for the encoder, and the document's features are put together from its windows'.

    plan = DocumentWindows.plan(pieces, window=126, config=LongTextConfig("windows", window_stride=64))
    rows, owners = plan.rows(tokenizer, seq_length=128)     # [windows, 128] encoder inputs, their documents
    assembler = DocumentAssembler(plan, per_token=False)
    for document, vector in assembler.add(row_indices, row_vectors): ...   # once all its windows are in

A document's vector (one per layer) is the mean of its windows' vectors. Per token, a document is
`[CLS] pieces [SEP]`: [CLS] from its first window, [SEP] from its last, and every piece once, from the window
where it has the most context (`bert_tf.tasks.long_text.max_context_windows`, SQuAD's rule); a piece that no
window reads (a document capped at `max_windows`) is left out, and the cut report counts it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_tf.models.bert_encoder import ENCODER_INPUT_NAMES
from bert_tf.tasks import long_text as long_text_lib


@dataclasses.dataclass(frozen=True)
class DocumentWindows:
    """Where each document's windows start.

    Attributes:
      pieces: each document's word-piece ids, without [CLS]/[SEP].
      starts: each document's window starts (at most max_windows).
      needed: windows each document would need without the max_windows cap.
      window: pieces one window holds (max_seq_length - 2).
    """

    pieces: list
    starts: list
    needed: list
    window: int

    @classmethod
    def plan(cls, pieces: list, window: int, config: long_text_lib.LongTextConfig) -> DocumentWindows:
        stride = config.stride(window)
        needed = [long_text_lib.window_starts(len(p), window, stride) for p in pieces]
        starts = [long_text_lib.capped_starts(s, config.max_windows) for s in needed]
        return cls(pieces, starts, [len(s) for s in needed], window)

    @property
    def num_documents(self) -> int:
        return len(self.pieces)

    def rows(self, tokenizer, seq_length: int) -> tuple[dict, np.ndarray]:
        """(int32 encoder inputs [windows, seq_length], [windows] the document of each), documents in order."""
        owners = np.repeat(np.arange(self.num_documents), [len(s) for s in self.starts])
        shape = (len(owners), seq_length)
        word_ids, mask = np.full(shape, tokenizer.pad_id, np.int32), np.zeros(shape, np.int32)
        row = 0
        for pieces, starts in zip(self.pieces, self.starts):
            for start in starts:
                ids = [tokenizer.cls_id, *pieces[start : start + self.window], tokenizer.sep_id]
                word_ids[row, : len(ids)], mask[row, : len(ids)] = ids, 1
                row += 1
        return {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": np.zeros(shape, np.int32)}, owners

    def token_sources(self, document: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The document's output tokens `[CLS] read pieces [SEP]`: (window of each, its position in that window's
        row, its piece id; [CLS] and [SEP] have id -1)."""
        pieces, starts = self.pieces[document], self.starts[document]
        best = long_text_lib.max_context_windows(starts, self.window, len(pieces))
        read = np.flatnonzero(best >= 0)
        windows = np.concatenate([[0], best[read], [len(starts) - 1]])
        last_length = min(self.window, len(pieces) - starts[-1])
        positions = np.concatenate([[0], 1 + read - np.asarray(starts)[best[read]], [1 + last_length]])
        ids = np.concatenate([[-1], np.asarray(pieces, np.int64)[read], [-1]])
        return windows.astype(np.int64), positions.astype(np.int64), ids.astype(np.int64)

    def document_length(self, document: int) -> int:
        """Tokens of the document's per-token output: [CLS], the pieces some window reads, [SEP]."""
        return len(self.token_sources(document)[0])

    def document_inputs(self, documents, length: int, tokenizer) -> dict:
        """int32 [len(documents), length] `[CLS] read pieces [SEP]` of each document, padded (the output's
        `input_word_ids`, `input_mask`, `input_type_ids`)."""
        shape = (len(documents), length)
        word_ids, mask = np.full(shape, tokenizer.pad_id, np.int32), np.zeros(shape, np.int32)
        for row, document in enumerate(documents):
            ids = self.token_sources(document)[2]
            ids[0], ids[-1] = tokenizer.cls_id, tokenizer.sep_id
            word_ids[row, : len(ids)], mask[row, : len(ids)] = ids, 1
        inputs = {"input_word_ids": word_ids, "input_mask": mask, "input_type_ids": np.zeros(shape, np.int32)}
        return {name: inputs[name] for name in ENCODER_INPUT_NAMES}

    def cut_report(self) -> dict:
        """`long_text.cut_report` of the documents: how many are longer than the window, the share not read."""
        num_pieces = [len(p) for p in self.pieces]
        kept = [long_text_lib.covered_pieces(s, self.window, n) for s, n in zip(self.starts, num_pieces)]
        capped = [needed > len(s) for needed, s in zip(self.needed, self.starts)]
        return long_text_lib.cut_report(num_pieces, kept, self.window, capped)


class DocumentAssembler:
    """Collects the outputs of window rows (in any order) and gives each document's once all its windows are in.

    `add(rows, values)`: `rows` [n] window row indices, `values` [n, ...] their outputs: per token
    [n, seq_length, layers, hidden], else [n, layers, hidden]. Returns [(document, value)]: the mean of its
    windows' values, or per token [document tokens, layers, hidden] (`DocumentWindows.token_sources`).
    """

    def __init__(self, plan: DocumentWindows, per_token: bool):
        self.plan = plan
        self.per_token = per_token
        counts = [len(s) for s in plan.starts]
        self.first_row = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.counts = counts
        self.pending = {}  # document -> {window: value}

    def add(self, rows, values) -> list:
        done = []
        owners = np.searchsorted(self.first_row, rows, side="right") - 1
        for row, document, value in zip(rows.tolist(), owners.tolist(), values):
            windows = self.pending.setdefault(document, {})
            windows[row - int(self.first_row[document])] = value
            if len(windows) == self.counts[document]:
                del self.pending[document]
                done.append((document, self._document_value(document, windows)))
        return done

    def _document_value(self, document: int, windows: dict):
        stacked = np.stack([windows[w] for w in range(len(windows))])
        if not self.per_token:
            return stacked.mean(axis=0)
        window_of, position, _ = self.plan.token_sources(document)
        return stacked[window_of, position]
