"""The Kafka listener's wire layer (issue 16): frames decode to kio requests of the version named,
versions not served and malformed frames are told apart, one description builds every version of
an answer, and a fetch answer's record batches stay a file region (the zero-copy chunk) whose bytes
are exactly the segment's."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.response import FetchResponse as FetchResponseV4
from kio.schema.fetch.v12.response import FetchResponse as FetchResponseV12
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kraftlog.broker.kafka._kafka_wire import (
    MalformedRequest,
    RegionRecords,
    UnsupportedRequest,
    build,
    encode_response,
    error_only_frame,
    ms,
    parse_request,
)
from kraftlog.storage import FileRegion, Log, LogConfig, build_batch

SUPPORTED = {18: (0, 3), 1: (4, 12)}


def _api_versions_frame(version: int = 3, correlation_id: int = 7, trailing: bytes = b"") -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf,
        RequestHeader(
            request_api_key=i16(18), request_api_version=i16(version), correlation_id=i32(correlation_id), client_id="t"
        ),
    )
    entity_writer(ApiVersionsRequest)(
        buf, ApiVersionsRequest(client_software_name="kcat", client_software_version="1.7")
    )
    return buf.getvalue() + trailing


def test_a_request_decodes_to_the_version_named_in_its_header() -> None:
    parsed = parse_request(_api_versions_frame(), SUPPORTED)
    assert (parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id) == (18, 3, 7, "t")
    assert parsed.body.client_software_name == "kcat"


def test_a_version_not_served_is_unsupported_and_keeps_the_correlation_id() -> None:
    frame = bytearray(_api_versions_frame(correlation_id=99))
    struct.pack_into(">h", frame, 2, 4)  # ApiVersions v4: not served
    with pytest.raises(UnsupportedRequest) as err:
        parse_request(bytes(frame), SUPPORTED)
    assert (err.value.api_key, err.value.api_version, err.value.correlation_id) == (18, 4, 99)
    with pytest.raises(UnsupportedRequest):
        parse_request(struct.pack(">hhi", 9999, 0, 1) + b"\0\0", SUPPORTED)  # an unknown API key


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x12",  # shorter than a header
        _api_versions_frame()[:-3],  # cut inside the body
    ],
    ids=["short", "truncated"],
)
def test_a_frame_that_does_not_decode_is_malformed(frame: bytes) -> None:
    with pytest.raises(MalformedRequest):
        parse_request(frame, SUPPORTED)


def test_bytes_after_a_request_are_ignored_as_kafka_does() -> None:
    # librdkafka 2.x sends these three after an all-topics Metadata v12
    parsed = parse_request(_api_versions_frame(trailing=b"\x01\x00\x00"), SUPPORTED)
    assert parsed.body.client_software_version == "1.7"


def test_the_unsupported_answer_is_a_header_and_the_error_code() -> None:
    frame = error_only_frame(5, 35)
    assert frame == struct.pack(">iih", 6, 5, 35)


def test_one_description_builds_every_version_and_fills_defaults() -> None:
    description = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 42,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 3,
                        "error_code": 6,
                        "high_watermark": 10,
                        "records": b"",
                        "aborted_transactions": None,
                    }
                ],
            }
        ],
    }
    v4 = build(FetchResponseV4, description)
    v12 = build(FetchResponseV12, description)
    assert not hasattr(v4, "session_id")  # a field the version lacks is dropped
    assert v12.session_id == 42
    p = v12.responses[0].partitions[0]
    assert p.error_code is ErrorCode.not_leader_or_follower
    assert (p.partition_index, p.high_watermark) == (3, 10)
    # what the description leaves out takes the schema's default (Kafka's -1s here)
    assert (p.preferred_read_replica, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1)
    assert v12.responses[0].partitions[0].diverging_epoch.epoch == -1  # a nested entity, built whole
    assert ms(v12.throttle_time) == 0


def test_a_fetch_answer_keeps_the_batches_in_the_file(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(index_interval_bytes=0), clock_ms=lambda: 1_000)
    for i in range(3):
        log.append_as_leader(build_batch([(b"k", b"v%d" % i * 50)], timestamp_ms=1_000), 0)
    log.update_high_watermark(log.log_end_offset)
    info = log.read_region(1, 1 << 20, max_offset=log.high_watermark)
    assert info.records == b"" and info.region is not None
    expected = log.read(1, 1 << 20, max_offset=log.high_watermark).records
    assert info.region.read() == expected and info.next_offset == 3
    description = {
        "throttle_time": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": RegionRecords(info.region)}]}],
    }
    chunks, total = encode_response(11, build(FetchResponseV12, description))
    assert [type(c) for c in chunks] == [bytes, FileRegion, bytes]
    frame = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    assert len(frame) == total and struct.unpack_from(">i", frame)[0] == total - 4
    assert struct.unpack_from(">i", frame, 4)[0] == 11  # the correlation id
    # what a client decodes is the segment's bytes, untouched
    decoded, _size = entity_reader(FetchResponseV12)(frame, 4 + 4 + 1)  # size, correlation id, tagged fields
    assert decoded.responses[0].partitions[0].records == expected
    info.region.close()
    log.close()


def test_a_region_holds_its_own_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    region = FileRegion(fd, 2, 5, str(path))
    os.close(fd)
    path.unlink()  # retention deleted the segment meanwhile
    assert region.read() == b"23456"
    region.close()
    with pytest.raises(ValueError):
        region.fileno()
