"""Property tests: random damage to real small containers ends in ContainerError or the exact data.

The mutations are bench.robustness_container's (bit flips, truncation, byte-range overwrite,
footer field edits with a recomputed CRC, bad footer hints); hypothesis draws them with fixed
seeds (tests/conftest.py profile) and a bounded number of examples.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.robustness_container import build_corpus, edit_footer, mutate, run_case, with_footer
from bench.robustness_container_payload import tamper_payload
from robodata.codecs.arrays import encode_array, encode_events, encode_packets
from robodata.codecs.ipc import DecodeBudget, read_ipc
from robodata.errors import CodecError


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return build_corpus(tmp_path_factory.mktemp("fuzz"))


@pytest.mark.parametrize("kind", ["bitflip", "truncate", "overwrite", "footer", "hints"])
def test_damage_ends_in_container_error_or_exact_data(corpus, kind):
    @settings(max_examples=60 if kind == "footer" else 30)
    @given(which=st.integers(0, len(corpus) - 1), rnd=st.randoms(use_true_random=False))
    def check(which, rnd):
        orig = corpus[which]
        assert run_case(orig, *mutate(orig, kind, rnd)) in ("error", "exact")

    check()


@settings(max_examples=40)
@given(rnd=st.randoms(use_true_random=False))
def test_payload_rewritten_with_valid_crcs_never_raises_raw(corpus, rnd):
    # new bytes behind recomputed CRCs may decode to other values: only no-raw is promised
    orig = corpus[rnd.randrange(len(corpus))]
    assert run_case(orig, tamper_payload(orig, rnd), None, None) in ("error", "exact", "wrong")


def test_footer_edits_reach_the_structural_checks(corpus):
    """Most footer edits must be refused by the checks after the CRC (which they pass)."""
    orig = corpus[0]
    rng = random.Random(7)
    results = [run_case(orig, with_footer(orig["data"], orig["footer"][0], edit_footer(orig["doc"], rng)), None, None)]
    results += [run_case(orig, *mutate(orig, "footer", rng)) for _ in range(150)]
    assert set(results) <= {"error", "exact"}
    assert results.count("error") > len(results) // 2


def _ipc_samples() -> list[bytes]:
    t = np.arange(20, dtype=np.int64) * 1000
    return [
        encode_array(t, np.arange(140, dtype=np.float32).reshape(20, 7), "joint_pos"),
        encode_events(t[:3], ["a", "b", "c"], stream="events"),
        encode_packets([0, 1], [0, 1], [True, False], [0, 5], [b"\x00\x01", b"\x02"], [True, True], stream="cam"),
    ]


@settings(max_examples=200)
@given(which=st.integers(0, 2), rnd=st.randoms(use_true_random=False))
def test_ipc_reader_on_damaged_parts_raises_codec_error_or_decodes_validly(which, rnd):
    blob = bytearray(_ipc_samples()[which])
    for _ in range(rnd.randint(1, 6)):
        if rnd.random() < 0.7:
            blob[rnd.randrange(len(blob))] ^= 1 << rnd.randrange(8)
        else:
            at = rnd.randrange(len(blob))
            blob[at : at + 8] = rnd.randbytes(8)
    if rnd.random() < 0.2:
        blob = blob[: rnd.randrange(len(blob))]
    try:
        table = read_ipc(bytes(blob), DecodeBudget(1 << 24, "limit"))
    except CodecError:
        return
    assert isinstance(table, pa.Table)
    table.validate(full=True)


@settings(max_examples=200)
@given(st.binary(max_size=300), st.binary(max_size=3000), st.integers(0, 3))
def test_a_chunks_checksum_combined_from_its_parts_is_zlibs_over_their_bytes(a, b, pad):
    import zlib

    from robodata.container.format import crc32_combine

    b = b + bytes(pad) * 1000  # lengths past the table's first powers
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
