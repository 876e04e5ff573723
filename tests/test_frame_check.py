"""frame_check: impossible counts are refused before kio allocates for them; possible ones never are.

Decoding a frame that frame_check wrongly lets through aborts the process
(kio's allocation failure), so every such decode runs in a child process.
"""

from __future__ import annotations

import dataclasses
import resource
import subprocess
import sys

import pytest
from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial._introspect import is_optional

from kipcheck.impl.wire.codec import decode_request
from kipcheck.impl.wire.frame_check import FrameError, check_frame
from kipcheck.oracle.conformance.probes.raw_client import sample_frame

HEADER_V2 = bytes.fromhex("0007") + b"\x00\x01x" + b"\x00"  # correlation id low bytes, client id "x", no tags
COMPACT_COUNT_2_POW_32_PLUS_4 = bytes([0x85, 0x80, 0x80, 0x80, 0x10])
REPORTED_FRAMES = {  # the frames that aborted the broker, length prefix removed
    "Produce v9": bytes.fromhex("00000009000000070001780000ffff000003e88580808010"),
    "Metadata v12": bytes.fromhex("0003000c0000") + HEADER_V2 + COMPACT_COUNT_2_POW_32_PLUS_4 + b"\x00\x00\x00",
    "ShareAcknowledge v1": bytes.fromhex("004f00010000") + HEADER_V2 + b"\x02g\x02m\x00\x00\x00\x01"
    + COMPACT_COUNT_2_POW_32_PLUS_4 + b"\x00",
}

SWEEP = """
import sys
from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map
import kipcheck.impl.wire.codec as codec
from kipcheck.oracle.conformance.probes.raw_client import huge_count_mutations, sample_frame
if sys.argv[1] == "unchecked":
    codec.check_frame = lambda request_class, frame: 0
frames = refused = 0
for api_key, name in sorted(api_key_map.items()):
    for version in sorted(schema_name_map[name]):
        for frame in huge_count_mutations(sample_frame(api_key, version)):
            frames += 1
            try:
                codec.decode_request(frame[4:], {api_key: (version, version)})
            except codec.FrameError:
                refused += 1
print(frames, refused)
"""


def all_request_versions() -> list[tuple[int, int]]:
    return [(api_key, version) for api_key, name in sorted(api_key_map.items()) for version in sorted(schema_name_map[name])]


def run_sweep(mode: str) -> subprocess.CompletedProcess:
    def no_core_dump():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return subprocess.run([sys.executable, "-c", SWEEP, mode], capture_output=True, text=True, timeout=600,
                          preexec_fn=no_core_dump)


@pytest.mark.parametrize("elements, nulls", [(0, False), (1, False), (3, False), (2, True)])
def test_every_well_formed_request_passes(elements, nulls):
    versions = all_request_versions()
    assert len(versions) > 250 and {(0, 9), (3, 12), (78, 1), (79, 1)} <= set(versions)
    for api_key, version in versions:
        frame = sample_frame(api_key, version, elements, nulls)[4:]
        check_frame(load_request_schema(api_key, version), frame)
        assert decode_request(frame, {api_key: (version, version)}).api_version == version


@pytest.mark.parametrize("name", sorted(REPORTED_FRAMES))
def test_the_reported_frames_are_refused_before_kio_reads_them(name):
    api_key, version = int.from_bytes(REPORTED_FRAMES[name][:2], "big"), int.from_bytes(REPORTED_FRAMES[name][2:4], "big")
    with pytest.raises(FrameError, match=r"array count 4294967300 at byte \d+ cannot fit in the \d+ bytes left"):
        check_frame(load_request_schema(api_key, version), REPORTED_FRAMES[name])


def test_lengths_and_varints_beyond_the_frame_are_refused():
    produce = load_request_schema(0, 9)
    body = bytearray(REPORTED_FRAMES["Produce v9"])
    body[-5:] = b"\x02\x02a\x81\x80"  # one topic named "a", then a partition count cut short
    with pytest.raises(FrameError, match="ends inside a field"):
        check_frame(produce, bytes(body))
    with pytest.raises(FrameError, match="longer than 5 bytes"):
        check_frame(produce, bytes(body[:-2]) + b"\xff" * 6)
    metadata_v1 = load_request_schema(3, 1)  # legacy: int32 array count, int16 string lengths
    with pytest.raises(FrameError, match="negative length -2"):
        check_frame(metadata_v1, bytes.fromhex("000300010000000700017800000001fffe"))
    with pytest.raises(FrameError, match="length 100 at byte 17 cannot fit in the 1 bytes left"):
        check_frame(metadata_v1, bytes.fromhex("0003000100000007000178000000010064") + b"a")


def test_huge_counts_at_every_byte_of_every_kio_request_never_reach_the_allocator():
    checked = run_sweep("checked")
    assert checked.returncode == 0, checked.stderr[-3000:]
    frames, refused = map(int, checked.stdout.split())
    assert frames > 100_000 and refused > frames // 2
    print(f"{frames} frames over {len(all_request_versions())} request versions, {refused} refused")


def test_the_sweep_catches_a_decoder_without_the_check():
    unchecked = run_sweep("unchecked")
    assert unchecked.returncode != 0 and "memory allocation of" in unchecked.stderr, unchecked.stderr[-3000:]


def nulls_not_allowed(entity, path: str = "") -> list[str]:
    """The fields of a decoded kio entity that hold None although its schema does not make them nullable."""
    found = []
    for field in dataclasses.fields(entity):
        value, name = getattr(entity, field.name), f"{path}{field.name}"
        if value is None:
            if not is_optional(field):
                found.append(name)
        elif dataclasses.is_dataclass(value):
            found += nulls_not_allowed(value, name + ".")
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    found += nulls_not_allowed(item, name + "[].")
    return found


def null_mutations(frame: bytes):
    """Copies of `frame` (no length prefix) with each empty array or empty string after the header's fixed part
    written as null: int32 0 -> -1, int16 0 -> -1, a compact 0 (varint 1) -> null (varint 0)."""
    for position in range(8, len(frame)):
        for empty, null in ((b"\x00\x00\x00\x00", b"\xff\xff\xff\xff"), (b"\x00\x00", b"\xff\xff"), (b"\x01", b"\x00")):
            if frame[position:position + len(empty)] == empty:
                yield frame[:position] + null + frame[position + len(empty):]


def test_null_where_the_schema_allows_none_is_refused_before_a_handler_sees_it():
    """Kafka's readers refuse null for a non-nullable array, string or bytes ("non-nullable field topics was
    serialized as null"); kio would decode it as None and the handler would fail on it (an OffsetCommit whose
    topics array is null reached the offsets handler as None). Whatever passes the check decodes without a
    None where the schema does not allow one."""
    offset_commit = load_request_schema(8, 9)
    frame = bytes.fromhex("000800090000000700017800") + b"\x02g\x00\x00\x00\x01\x02m\x00" + b"\x00" + b"\x00"
    with pytest.raises(FrameError, match="non-nullable field topics was serialized as null"):
        check_frame(offset_commit, frame)
    passed = 0
    for api_key, version in all_request_versions():
        for mutated in null_mutations(sample_frame(api_key, version, elements=0)[4:]):
            try:
                request = decode_request(mutated, {api_key: (version, version)})
            except FrameError:
                continue
            assert not nulls_not_allowed(request.body), (api_key, version, nulls_not_allowed(request.body))
            passed += 1
    assert passed > 1000
