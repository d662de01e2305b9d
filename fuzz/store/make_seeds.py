#!/usr/bin/env python3
"""Writes the fuzz target's seed corpus (fuzz/store/seeds/).

The frames are encoded here from the protocol description in
store/tcp/protocol.h, independently of the C++ encoder, so the
corpus replay (unit suite) also cross-checks the wire format.
Usage: make_seeds.py OUTPUT_DIR
"""
import os
import struct
import sys

MAGIC = 0x4F545352
VERSION = 1
OPS = dict(ping=1, set=2, get=3, add=4, cas=5, multiget=6, multiset=7, remove=8,
           removeprefix=9, check=10, wait=11, barrier=12, barrierranks=13,
           setexpiringmany=14)


def s(b):
    return struct.pack('<I', len(b)) + b


def hello(token=b'tok', name=b'seed'):
    return struct.pack('<IHHHH', MAGIC, VERSION, 0, len(token), len(name)) + token + name


def frame(op, rid, payload, reply=False):
    return struct.pack('<IBBHQ', len(payload), OPS[op] | (0x80 if reply else 0), 0, 0, rid) + payload


def keys(ks):
    return struct.pack('<I', len(ks)) + b''.join(s(k) for k in ks)


def ranks_arrival(name, gen, ranks, world, wait, timeout_ms):
    """barrierRanks: name, u64 generation, u32 n, n x i32 rank, i32 world, u8 wait, i64 ms."""
    return (s(name) + struct.pack('<QI', gen, len(ranks)) + b''.join(struct.pack('<i', r) for r in ranks)
            + struct.pack('<iBq', world, wait, timeout_ms))


def session(mode, stream):
    """Mode byte, then the stream in 64-byte pieces, each led by its size byte."""
    out = bytes([mode])
    for i in range(0, len(stream), 64):
        piece = stream[i:i + 64]
        out += bytes([len(piece) - 1]) + piece
    return out


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    reqs = [
        frame('ping', 1, b''),
        frame('set', 2, s(b'k') + s(b'v') + struct.pack('<q', 0)),
        frame('set', 3, s(b'hb') + s(b'alive') + struct.pack('<q', 1500)),
        frame('get', 4, s(b'k')),
        frame('add', 5, s(b'c') + struct.pack('<q', 7)),
        frame('cas', 6, s(b'k') + b'\x01' + s(b'v') + s(b'w')),
        frame('cas', 7, s(b'new') + b'\x00' + s(b'x')),
        frame('multiset', 8, struct.pack('<I', 2) + s(b'a') + s(b'1') + s(b'b') + s(b'2')),
        frame('multiget', 9, keys([b'a', b'b', b'zz'])),
        frame('check', 10, keys([b'a', b'q'])),
        frame('wait', 11, keys([b'a', b'later']) + struct.pack('<q', 100)),
        frame('barrier', 12, s(b'bar') + struct.pack('<QiiBq', 0, 0, 2, 1, 100)),
        frame('barrier', 13, s(b'bar') + struct.pack('<QiiBq', 0, 1, 2, 0, 0)),
        frame('barrier', 14, s(b'bar') + struct.pack('<QiiBq', 0, 5, 2, 1, 0)),
        frame('set', 15, s(b'later') + s(b'now') + struct.pack('<q', 0)),
        frame('remove', 16, s(b'a')),
        frame('removeprefix', 17, s(b'b')),
        # A node's agent: several ranks in one arrival (one named twice, one
        # surplus), a batch of heartbeats with one ttl.
        frame('barrierranks', 18, ranks_arrival(b'node', 2, [0, 1, 1], 4, 1, 100)),
        frame('setexpiringmany', 19, struct.pack('<I', 2) + s(b'hb/0') + s(b'1') + s(b'hb/1') + s(b'2')
              + struct.pack('<q', 1500)),
        frame('barrierranks', 20, ranks_arrival(b'node', 2, [2, 3, 9], 4, 0, 0)),
    ]
    seeds = {
        'session_full': session(0, hello() + b''.join(reqs)),
        'session_no_handshake': session(2, b''.join(reqs)),
        'session_many_conns': session(1, hello() + b''.join(reqs) * 2),
        'session_bad_magic': session(0, b'GET / HTTP/1.1\r\n\r\n'),
        'session_oversized': session(2, struct.pack('<IBBHQ', 1 << 30, OPS['set'], 0, 0, 1)),
        'session_truncated_key': session(2, frame('get', 1, struct.pack('<I', 1000) + b'abc')),
        'session_huge_count': session(2, frame('multiget', 1, struct.pack('<I', 0xFFFFFFFF))),
        'session_bad_opcode': session(2, struct.pack('<IBBHQ', 0, 0x7F, 0, 0, 1)),
        'session_wait_timeout0': session(2, frame('wait', 1, keys([b'x']) + struct.pack('<q', 0))),
        'session_node_agent': session(0, hello() + b''.join(reqs[-3:]) + frame(
            'barrierranks', 21, ranks_arrival(b'node', 2, [0, 1, 2, 3], 5, 0, 0))),
        'session_ranks_empty': session(2, frame('barrierranks', 1, ranks_arrival(b'n', 0, [], 2, 0, 0))),
        'session_ranks_huge_count': session(2, frame('barrierranks', 1, s(b'n') + struct.pack(
            '<QI', 0, 0xFFFFFFFF))),
        'client_replies': bytes([4]) + frame('get', 1, b'\x00\x01' + s(b'value'), True)
        + frame('barrier', 2, b'\x00\x01' + struct.pack('<II', 3, 4), True)
        + frame('wait', 3, b'\x01' + keys([b'missing']), True)
        + frame('barrier', 4, b'\x01' + s(b'b') + struct.pack('<QiI', 1, 4, 2)
                + struct.pack('<Iii', 2, 1, 3) + struct.pack('<Ii', 1, 9), True)
        + frame('setexpiringmany', 5, b'\x00', True),
        'hello_reply': bytes([5]) + struct.pack('<IHHQII', MAGIC, 1, 0, 42, 8 << 20, 0),
    }
    for name, data in seeds.items():
        with open(os.path.join(outdir, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), 'seeds'))
