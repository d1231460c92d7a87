"""Fast serialization of fixed-length int/float features as `tf.train.Example`.

Building one `tf.train.Example` message per instance through the protobuf
Python API costs tens of microseconds, more than making the instance. The wire
format of an Example with packed int64/float lists is simple, so this module
writes it directly: varints, headers and records of a whole batch are laid
out with numpy as padded byte rows, then compacted in one pass.

The bytes parse with `tf.io.parse_example` / `tf.train.Example.FromString`
like any Example.
"""

import numpy as np

_LEN_DELIMITED = 2  # protobuf wire type of strings, messages, packed lists
_FEATURE_FLOAT_LIST = 2  # Feature.float_list field number
_FEATURE_INT64_LIST = 3  # Feature.int64_list field number


def _tag(field_number: int) -> bytes:
    return bytes([field_number << 3 | _LEN_DELIMITED])


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _varint_bytes(values: np.ndarray):
    """Varint encoding of a non-negative int array [N, K], as padded bytes.

    Returns:
        (uint8 [N, K * G] bytes, bool [N, K * G] which bytes are real); dropping
        the unreal bytes of a row leaves its packed varint payload.
    """
    values = np.asarray(values)
    wide = values.size and int(values.max()) >= 2**32
    remaining = values.astype(np.uint64 if wide else np.uint32)
    groups = []
    real = [np.ones(values.shape, bool)]
    while True:
        more = remaining >= 0x80
        group = (remaining & 0x7F).astype(np.uint8)
        group |= more.view(np.uint8) << 7
        groups.append(group)
        if not more.any():
            break
        real.append(more)
        remaining = remaining >> 7
    num_rows = values.shape[0]
    return (np.stack(groups, axis=-1).reshape(num_rows, -1), np.stack(real, axis=-1).reshape(num_rows, -1))


def _padded_table(byte_strings):
    """Rows of a list of bytes as (uint8 [U, W] padded, bool [U, W] real)."""
    width = max(len(b) for b in byte_strings)
    table = np.zeros((len(byte_strings), width), np.uint8)
    real = np.zeros((len(byte_strings), width), bool)
    for i, b in enumerate(byte_strings):
        table[i, : len(b)] = np.frombuffer(b, np.uint8)
        real[i, : len(b)] = True
    return table, real


def _headers_for(lengths: np.ndarray, header_fn):
    """Gathers `header_fn(length)` for every row, as padded bytes + mask."""
    unique, inverse = np.unique(lengths, return_inverse=True)
    table, real = _padded_table([header_fn(int(n)) for n in unique])
    return table[inverse], real[inverse]


def _feature_header(name: str, list_field: int, payload_length: int) -> bytes:
    """Framing of one map entry of `Features` around a packed-list payload."""
    key = name.encode("utf-8")
    # Int64List/FloatList { packed value = 1 }; an empty list has no field.
    values_field = _tag(1) + _varint(payload_length) if payload_length else b""
    list_length = len(values_field) + payload_length
    feature_body = _tag(list_field) + _varint(list_length) + values_field
    feature_length = len(feature_body) + payload_length
    entry_body = _tag(1) + _varint(len(key)) + key + _tag(2) + _varint(feature_length)
    entry_length = len(entry_body) + feature_length
    return _tag(1) + _varint(entry_length) + entry_body + feature_body


class ExampleEncoder:
    """Serializes rows of fixed-width feature arrays into `tf.train.Example`s.

    Args:
        int_features: names of int64-list features (values must be >= 0).
        float_features: names of float-list features.
    Within a record, features whose encoded size is the same in every row
    come first, then the others, each group in the order given.
    """

    def __init__(self, int_features: list[str], float_features: list[str]):
        self._int_features = list(int_features)
        self._float_features = list(float_features)
        self._header_cache: dict[tuple, bytes] = {}
        self._outer_headers: dict[int, bytes] = {}

    def _header(self, name, list_field, payload_length):
        key = (name, payload_length)
        header = self._header_cache.get(key)
        if header is None:
            header = _feature_header(name, list_field, payload_length)
            self._header_cache[key] = header
        return header

    def _feature_bytes(self, name, values):
        """(uint8 [N, W] payload, bool [N, W] real bytes or None if all, list field)."""
        if name in self._int_features:
            if values.size and values.min() < 0:
                raise ValueError(f"feature {name!r} has negative values")
            if not values.size or values.max() < 0x80:
                # One byte per value: no varint work, every row the same length.
                return values.astype(np.uint8), None, _FEATURE_INT64_LIST
            payload, real = _varint_bytes(values)
            return payload, real, _FEATURE_INT64_LIST
        payload = np.ascontiguousarray(values, dtype="<f4").view(np.uint8)
        return payload.reshape(values.shape[0], -1), None, _FEATURE_FLOAT_LIST

    def encode(self, features: dict[str, np.ndarray]) -> list[bytes]:
        """Returns one serialized Example per row.

        Args:
            features: name -> array [N, width] (or [N] for width 1), for every
                feature named at construction.
        """
        # Features whose encoded size is the same in every row are laid out as
        # one fixed-width block; only the others need compacting. The map
        # entries are written fixed-size features first (order is free).
        fixed, variable = [], []  # uint8 arrays / (bytes, real) pairs
        num_rows = None
        for name in self._int_features + self._float_features:
            values = np.asarray(features[name])
            if values.ndim == 1:
                values = values[:, None]
            if num_rows is None:
                num_rows = values.shape[0]
            elif values.shape[0] != num_rows:
                raise ValueError(f"feature {name!r} has {values.shape[0]} rows, expected {num_rows}")
            payload, real, list_field = self._feature_bytes(name, values)

            def header_of(n, name=name, f=list_field):
                return self._header(name, f, n)

            if real is None:
                header = np.frombuffer(header_of(payload.shape[1]), np.uint8)
                fixed.append(np.broadcast_to(header, (num_rows, header.size)))
                fixed.append(payload)
            else:
                variable.append(_headers_for(real.sum(axis=1), header_of))
                variable.append((payload, real))
        if not num_rows:
            return []
        fixed_block = np.concatenate(fixed, axis=1) if fixed else np.zeros((num_rows, 0), np.uint8)
        fixed_width = fixed_block.shape[1]
        fixed_bytes = fixed_block.tobytes()
        if variable:
            data = np.concatenate([p for p, _ in variable], axis=1)
            real = np.concatenate([r for _, r in variable], axis=1)
            variable_bytes = np.compress(real.ravel(), data.ravel()).tobytes()
            variable_lengths = real.sum(axis=1)
        else:
            variable_bytes = b""
            variable_lengths = np.zeros(num_rows, np.int64)
        totals = (variable_lengths + fixed_width).tolist()
        ends = np.cumsum(variable_lengths).tolist()
        outer = self._outer_headers
        records = []
        begin = 0
        for row, (total, end) in enumerate(zip(totals, ends)):
            header = outer.get(total)
            if header is None:
                header = outer[total] = _tag(1) + _varint(total)  # Example.features
            records.append(
                header + fixed_bytes[row * fixed_width : (row + 1) * fixed_width] + variable_bytes[begin:end]
            )
            begin = end
        return records
