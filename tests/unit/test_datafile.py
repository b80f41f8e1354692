"""Reading LMDB meta pages (pure): which meta LMDB would use, and what counts as a valid one."""

from __future__ import annotations

import struct
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from ouroactors.authorities.storage.datafile import MAGIC, Meta, newest_meta, parse_meta


def meta_page(*, txnid: int, last_pgno: int, page_size: int = 4096, magic: int = MAGIC, version: int = 1) -> bytes:
    page = bytearray(page_size)
    struct.pack_into("<II", page, 16, magic, version)
    struct.pack_into("<I", page, 40, page_size)
    struct.pack_into("<QQ", page, 136, last_pgno, txnid)
    return bytes(page)


def head(first: bytes, second: bytes) -> tuple[bytes, Callable[[int], bytes]]:
    data = first + second
    return data, lambda offset: data[offset:offset + 152]


def test_the_meta_with_the_larger_txnid_wins_whichever_page_it_is_on() -> None:
    for a, b in ((7, 8), (8, 7)):
        data, read_at = head(meta_page(txnid=a, last_pgno=10 * a), meta_page(txnid=b, last_pgno=10 * b))
        meta = newest_meta(data[:152], read_at)
        assert meta == Meta(4096, 80, 8) and meta.used_bytes == 81 * 4096


def test_a_page_size_other_than_4k_is_read_from_the_first_meta() -> None:
    first, second = meta_page(txnid=1, last_pgno=3, page_size=8192), meta_page(txnid=2, last_pgno=5, page_size=8192)
    data, read_at = head(first, second)
    assert newest_meta(data[:152], read_at) == Meta(8192, 5, 2)


def test_wrong_magic_version_or_page_size_is_not_a_meta_page() -> None:
    assert parse_meta(meta_page(txnid=1, last_pgno=1, magic=0xDEADBEEF)) is None
    assert parse_meta(meta_page(txnid=1, last_pgno=1, version=2)) is None
    bad_size = bytearray(meta_page(txnid=1, last_pgno=1))
    struct.pack_into("<I", bad_size, 40, 3000)  # not a power of two
    assert parse_meta(bytes(bad_size)) is None


def test_one_bad_meta_page_makes_the_file_unreadable() -> None:
    data, read_at = head(meta_page(txnid=1, last_pgno=1), b"\0" * 4096)
    assert newest_meta(data[:152], read_at) is None


@given(st.binary(max_size=400))
def test_any_bytes_parse_or_are_refused_without_raising(data: bytes) -> None:
    meta = parse_meta(data)
    assert meta is None or (meta.page_size >= 512 and meta.used_bytes >= meta.page_size)
