#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Decode a raw Pulse fetch body (application/vnd.pulse.batches).

A raw fetch returns record batches exactly as they are stored on disk.  This
program checks each batch's CRC32C and prints its records; it stops with
exit status 1 at the first malformed or corrupt batch and never prints a
record from a batch whose checksum failed.

    curl -s 'http://127.0.0.1:8080/v1/topics/orders/partitions/0/records?format=raw' > body.bin
    python3 examples/decode_raw.py body.bin
    curl -s '...?format=raw' | python3 examples/decode_raw.py -

Batch layout (all integers big-endian): a 52-byte header
    magic u8 (1), version u8 (1), flags u16, crc32c u32,
    baseOffset i64, batchLen u32, firstTimestamp i64, lastTimestamp i64,
    recordCount u32, producerID u32, producerEpoch u32, baseSequence i32
then batchLen bytes holding recordCount records, each
    length u32, attributes u8, timestampDelta i32, offsetDelta u32,
    keyLength u32 + key, valueLength u32 + value (0xFFFFFFFF = null),
    headerCount u32, then headerCount x (keyLen u32, key, valueLen u32, value).
The CRC32C (Castagnoli) covers the bytes from baseOffset to the end of the
records, as stored.  A raw answer may start with a batch that begins before
the requested offset; pass --from OFFSET to skip those records.

Compression: flags bits 0-2 are the codec of the records section.  0 is
none; 1 (zlib, a topic created or changed with "compression": "zlib") stores
the records as a u32 with their uncompressed length followed by one zlib
raw deflate stream (RFC 1951, no zlib header or Adler-32) of exactly that
many bytes; after the CRC check, inflate it (Python:
zlib.decompressobj(wbits=-15)) and read the records from the result as
above.  Other codecs are refused.  The raw answer carries batches as they
are stored, so one answer may mix compressed and plain batches.
"""

import argparse
import struct
import sys
import zlib

HEADER = 52
NULL = 0xFFFFFFFF
SPARSE_OFFSETS = 0x0008
CODEC_MASK = 0x0007
CODEC_NONE = 0
CODEC_ZLIB = 1
# The most a batch may inflate to (the broker refuses to read more).
INFLATED_MAX = 64 * 1024 * 1024


def make_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = make_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Corrupt(Exception):
    pass


def field(buf, pos, end):
    """A length-prefixed byte string; returns (bytes or None, next position)."""
    if end - pos < 4:
        raise Corrupt("length field runs past the record")
    (n,) = struct.unpack_from(">I", buf, pos)
    pos += 4
    if n == NULL:
        return None, pos
    if end - pos < n:
        raise Corrupt("field of %d bytes runs past the record" % n)
    return buf[pos:pos + n], pos + n


def render(b):
    if b is None:
        return "null"
    try:
        s = b.decode("utf-8")
        if s.isprintable():
            return repr(s)
    except UnicodeDecodeError:
        pass
    return "0x" + b.hex()


def inflate(section, count):
    """The records of a zlib batch: its declared length, then one stream."""
    if len(section) < 4:
        raise Corrupt("compressed records section of %d bytes has no length" % len(section))
    (plain_len,) = struct.unpack_from(">I", section, 0)
    if plain_len > INFLATED_MAX or plain_len < 25 * count:
        raise Corrupt("compressed records declare %d bytes for %d records" % (plain_len, count))
    d = zlib.decompressobj(wbits=-15)
    try:
        # max_length bounds the output: a stream that would inflate past the
        # declared length (an inflate bomb) is stopped there.
        plain = d.decompress(section[4:], plain_len + 1)
        if len(plain) <= plain_len and not d.eof:
            plain += d.flush()
    except zlib.error as e:
        raise Corrupt("compressed records are not a valid deflate stream: %s" % e)
    if len(plain) > plain_len:
        raise Corrupt("compressed records inflate past their declared %d bytes" % plain_len)
    if not d.eof:
        raise Corrupt("compressed stream is truncated")
    if d.unused_data:
        raise Corrupt("%d bytes follow the compressed stream" % len(d.unused_data))
    if len(plain) != plain_len:
        raise Corrupt("compressed records inflate to %d bytes, not the declared %d" % (len(plain), plain_len))
    return plain


def decode(buf, start_offset, out):
    pos = 0
    batches = records = 0
    while pos < len(buf):
        if len(buf) - pos < HEADER:
            raise Corrupt("%d trailing bytes at position %d: not a whole batch header" % (len(buf) - pos, pos))
        (magic, version, flags, crc, base, blen, first_ts, last_ts, count,
         _pid, _epoch, _seq) = struct.unpack_from(">BBHIqIqqIIIi", buf, pos)
        if magic != 1 or version != 1:
            raise Corrupt("bad magic/version %d/%d at position %d" % (magic, version, pos))
        end = pos + HEADER + blen
        if end > len(buf):
            raise Corrupt("batch at position %d claims %d bytes, only %d left" % (pos, blen, len(buf) - pos - HEADER))
        actual = crc32c(buf[pos + 8:end])
        if actual != crc:
            raise Corrupt("CRC32C mismatch in batch at position %d (stored %08x, computed %08x)"
                          % (pos, crc, actual))
        codec = flags & CODEC_MASK
        if codec == CODEC_NONE:
            recs, p, rec_end = buf, pos + HEADER, end
        elif codec == CODEC_ZLIB:
            recs = inflate(buf[pos + HEADER:end], count)
            p, rec_end = 0, len(recs)
        else:
            raise Corrupt("unknown compression codec %d in batch at position %d" % (codec, pos))
        out.write("batch base=%d records=%d bytes=%d first_ts=%d last_ts=%d crc=%08x%s ok\n"
                  % (base, count, HEADER + blen, first_ts, last_ts, crc,
                     " zlib(%d bytes)" % len(recs) if codec == CODEC_ZLIB else ""))
        p, records = decode_records(recs, p, rec_end, base, first_ts, count, flags, start_offset, out, records)
        batches += 1
        pos = end
    return batches, records


def decode_records(buf, p, end, base, first_ts, count, flags, start_offset, out, records):
    """The records in buf[p:end]; returns (end, records printed so far)."""
    for _ in range(count):
        if end - p < 4:
            raise Corrupt("record length runs past the batch")
        (rlen,) = struct.unpack_from(">I", buf, p)
        p += 4
        rend = p + rlen
        if rend > end or rlen < 9:
            raise Corrupt("record of %d bytes does not fit its batch" % rlen)
        ts_delta, off_delta = struct.unpack_from(">iI", buf, p + 1)
        limit = (1 << 31) if flags & SPARSE_OFFSETS else count
        if off_delta >= limit:
            raise Corrupt("offset delta %d outside the batch" % off_delta)
        q = p + 9
        key, q = field(buf, q, rend)
        value, q = field(buf, q, rend)
        if rend - q < 4:
            raise Corrupt("header count runs past the record")
        (nh,) = struct.unpack_from(">I", buf, q)
        q += 4
        headers = []
        for _ in range(nh):
            hk, q = field(buf, q, rend)
            hv, q = field(buf, q, rend)
            headers.append("%s=%s" % (render(hk), render(hv)))
        if q != rend:
            raise Corrupt("record has %d unexplained bytes" % (rend - q))
        offset = base + off_delta
        if offset >= start_offset:
            out.write("  offset=%d timestamp=%d key=%s value=%s headers={%s}\n"
                      % (offset, first_ts + ts_delta, render(key), render(value), ", ".join(headers)))
            records += 1
        p = rend
    if p != end:
        raise Corrupt("batch with base offset %d has %d bytes after its records" % (base, end - p))
    return p, records


def main():
    ap = argparse.ArgumentParser(description="Decode a raw Pulse fetch body and verify its CRC32C checksums.")
    ap.add_argument("file", help="raw body file, or - for standard input")
    ap.add_argument("--from", dest="start", type=int, default=0,
                    help="skip records below this offset (the first batch may start earlier)")
    args = ap.parse_args()
    if args.file == "-":
        buf = sys.stdin.buffer.read()
    else:
        with open(args.file, "rb") as f:
            buf = f.read()
    try:
        batches, records = decode(buf, args.start, sys.stdout)
    except Corrupt as e:
        sys.stdout.flush()
        print("decode_raw: corrupt input: %s" % e, file=sys.stderr)
        return 1
    print("%d batch(es), %d record(s), %d bytes, all checksums valid" % (batches, records, len(buf)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
