"""Types of the compiled records scan (storage/_cscan.c)."""

def scan(
    data: bytes | bytearray | memoryview, start: int, end: int, count: int, dense: bool, last_offset_delta: int, /
) -> tuple[int, int, int] | None: ...
