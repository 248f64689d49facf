"""Run the encoder on length-sorted sub-batches of wordpiece rows, in training too.

spacy-transformers pads every row (a sentence, or a strided window of a document) of a
batch to the batch's longest and runs the encoder once. With sentences of varied length
most of that work is padding: 500-word training batches of SciERC or BioNLP13CG hold about
twice as many padded wordpieces as real ones. ``with_length_buckets`` wraps the forward of
spacy-transformers' Hugging Face layer so that it runs rows of similar length together, in
sub-batches of at most ``max_padded`` padded wordpieces, and reassembles one output in the
original row order. The encoder masks its padding, so the real positions' outputs and the
weight gradients are those of one call, up to float rounding (dropout draws its masks per
call). Backprop runs each sub-batch's backward in turn; the gradients accumulate in the
weights before the optimizer step as they would in one call.
"""
from typing import Callable, List, Sequence

from thinc.api import get_array_module

BUCKETED = ("last_hidden_state", "pooler_output")  # output fields that are reassembled


def length_buckets(lengths: Sequence[int], max_padded: int) -> List[List[int]]:
    """Row indices grouped by length so that each group's longest x rows <= max_padded.

    lengths (Sequence[int]): Unpadded length of each row.
    max_padded (int): Most padded items per group; a longer row forms a group alone.
    RETURNS (List[List[int]]): Groups of row indices, shortest rows first.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: List[List[int]] = []
    current: List[int] = []
    for i in order:  # ascending, so row i is the longest of `current` once added
        if current and lengths[i] * (len(current) + 1) > max_padded:
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


def with_length_buckets(forward: Callable, max_padded: int) -> Callable:
    """Wrap the forward of spacy-transformers' ``HFWrapper`` layer (see module docstring).

    forward (Callable): The layer's forward, ``(model, WordpieceBatch, is_train)``.
    max_padded (int): Most padded wordpieces per encoder call.
    RETURNS (Callable): A forward with the same signature and output.
    """

    def bucketed_forward(model, wps, is_train: bool):
        groups = length_buckets(wps.lengths, max_padded)
        if len(groups) <= 1 or not _right_padded(wps):
            return forward(model, wps, is_train)
        xp = get_array_module(wps.input_ids)
        rows = [xp.asarray(g, dtype="int64") for g in groups]
        widths = [max(wps.lengths[i] for i in g) for g in groups]
        parts = [forward(model, _select(wps, r, g, w), is_train) for r, g, w in zip(rows, groups, widths)]
        outputs = [out for out, _ in parts]
        if any(set(k for k, v in out.items() if v is not None) - set(BUCKETED) for out in outputs):
            # hidden states or attentions asked for: not reassembled here, so one call
            return forward(model, wps, is_train)
        merged = _merge(outputs, groups, len(wps), wps.input_ids.shape[1])

        def backprop(d_output):
            result = []
            for (_, get_d), group, width in zip(parts, groups, widths):
                result = get_d(_slice(d_output, group, width))
            return result

        return merged, backprop

    return bucketed_forward


def _right_padded(wps) -> bool:
    """Whether each row's real wordpieces come first (BERT-style padding on the right)."""
    xp = get_array_module(wps.attention_mask)
    lengths = xp.asarray(wps.lengths, dtype="int64")
    return bool(xp.all(wps.attention_mask.sum(axis=1) == lengths)) and bool(
        xp.all(wps.attention_mask[xp.arange(len(wps.lengths)), xp.maximum(lengths - 1, 0)] == 1)
    )


def _select(wps, rows, group: List[int], width: int):
    """The rows `group` of a WordpieceBatch, cut to `width` columns."""
    from spacy_transformers.data_classes import WordpieceBatch

    return WordpieceBatch(
        strings=[wps.strings[i] for i in group],
        input_ids=wps.input_ids[rows, :width],
        attention_mask=wps.attention_mask[rows, :width],
        lengths=[wps.lengths[i] for i in group],
        token_type_ids=None if wps.token_type_ids is None else wps.token_type_ids[rows, :width],
    )


def _merge(outputs: list, groups: List[List[int]], n_rows: int, width: int):
    """One output in the original row order; padding positions hold zeros."""
    import torch

    first = outputs[0]
    fields = {}
    for key in BUCKETED:
        if getattr(first, key, None) is None:
            continue
        value = first[key]
        shape = (n_rows, width, value.shape[2]) if value.dim() == 3 else (n_rows,) + tuple(value.shape[1:])
        full = torch.zeros(shape, dtype=value.dtype, device=value.device)
        with torch.no_grad():  # each part keeps its own graph for its backprop
            for out, group in zip(outputs, groups):
                index = torch.as_tensor(group, device=value.device)
                if value.dim() == 3:
                    full[index, : out[key].shape[1]] = out[key]
                else:
                    full[index] = out[key]
        fields[key] = full
    return type(first)(**fields)


def _slice(d_output, group: List[int], width: int):
    """The gradient of one part: its rows, its columns."""
    import torch

    fields = {}
    for key, value in d_output.items():
        if value is None:
            continue
        index = torch.as_tensor(group, device=value.device)
        fields[key] = value[index, :width].contiguous() if value.dim() == 3 else value[index].contiguous()
    return type(d_output)(**fields)
