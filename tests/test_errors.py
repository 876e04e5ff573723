"""Kafka's error names (model/errors.py): Kafka's codes, the seed's, and traces written as before."""

import json

import msgspec
import pytest
from kio.schema.errors import ErrorCode

from kipcheck.impl.tracing import Trace
from kipcheck.impl.wire.errors import error_code, error_code_of, error_name
from kipcheck.model.errors import Error
from kipcheck.model.ic import WIRE_CODES


def test_kafka_errors_are_kios_names_and_codes():
    kafka = {code.name.upper(): code.value for code in ErrorCode}
    ours = {error.name: error.code for error in Error if error not in WIRE_CODES}
    assert ours == kafka


def test_the_seeds_errors_have_their_ic17_codes_above_kafkas():
    assert [error.code for error in WIRE_CODES] == [1088, 1089, 1090, 1091, 1092]
    assert min(error.code for error in WIRE_CODES) > max(code.value for code in ErrorCode)
    assert len({error.code for error in Error}) == len(Error)


@pytest.mark.parametrize("error", list(Error))
def test_an_error_is_its_name(error):
    assert error == error.name and error.value == error.name and hash(error) == hash(error.name)
    assert repr(error) == repr(error.name) and str(error) == f"{error}" == error.name
    assert Error(error.name) is error and Error.of_code(error.code) is error


def test_a_misspelt_name_fails_where_it_is_written():
    with pytest.raises(AttributeError):
        Error.INVALID_RECORD_STAT   # noqa: B018
    with pytest.raises(ValueError):
        Error.of_code(134_000)


def test_json_carries_the_name_and_reads_back_equal():
    record = {"error": Error.INVALID_RECORD_STATE, "errors": {Error.NONE: [Error.REQUEST_TIMED_OUT]}}
    plain = {"error": "INVALID_RECORD_STATE", "errors": {"NONE": ["REQUEST_TIMED_OUT"]}}
    assert msgspec.json.encode(record) == msgspec.json.encode(plain)
    assert json.dumps(record) == json.dumps(plain)
    assert msgspec.json.decode(msgspec.json.encode(record)) == record


def test_a_trace_is_byte_for_byte_what_plain_names_write(tmp_path):
    for name, error in (("enum", Error.SHARE_SESSION_LIMIT_REACHED), ("plain", "SHARE_SESSION_LIMIT_REACHED")):
        trace = Trace(tmp_path / f"{name}.jsonl", {"machine": "share-session", "config": {}})
        trace.step(5, "m1", "share_fetch", {"epoch": 0, "add": [], "forget": [], "acks": []}, {"error": error})
        trace.close()
    assert (tmp_path / "enum.jsonl").read_bytes() == (tmp_path / "plain.jsonl").read_bytes()


def test_the_wire_reads_and_writes_every_code():
    for error in Error:
        assert error_code_of(error) == error.code and error_name(error.code) is error
        if error not in WIRE_CODES:
            assert error_code(error) == ErrorCode(error.code) and error_name(ErrorCode(error.code)) is error
    assert error_name(4000) == "UNKNOWN_ERROR_CODE_4000"
