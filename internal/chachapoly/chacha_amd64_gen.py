#!/usr/bin/env python3
# Writes chacha_amd64.s: python3 chacha_amd64_gen.py > chacha_amd64.s
# The rounds and transposes are unrolled, which is why the assembly is
# generated rather than written by hand; read the output to review it.

out = []
def emit(s=""):
    out.append(s)

QR_COL = [(0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)]
QR_DIAG = [(0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)]

def R(p, i):
    return "%s%d" % (p, i)

def round4(p, qrs):
    a = [q[0] for q in qrs]; b = [q[1] for q in qrs]
    c = [q[2] for q in qrs]; d = [q[3] for q in qrs]
    def step(x, y, z, rot):
        for i in range(4):
            emit("\tVPADDD %s, %s, %s" % (R(p, y[i]), R(p, x[i]), R(p, x[i])))
        for i in range(4):
            emit("\tVPXORD %s, %s, %s" % (R(p, x[i]), R(p, z[i]), R(p, z[i])))
        for i in range(4):
            emit("\tVPROLD $%d, %s, %s" % (rot, R(p, z[i]), R(p, z[i])))
    step(a, b, d, 16)
    step(c, d, b, 12)
    step(a, b, d, 8)
    step(c, d, b, 7)

def init_state(p):
    emit("\t// Word i of the state in every lane; word 12 = per-lane counters.")
    for i in range(16):
        if i == 12:
            emit("\tVMOVDQA64 %s, %s" % (R(p, 16), R(p, 12)))
        else:
            emit("\tVPBROADCASTD %d(AX), %s" % (4 * i, R(p, i)))

def rounds(p, label):
    emit("\t// 10 double rounds: columns, then diagonals, 4 quarter rounds interleaved.")
    emit("\tMOVL $10, DX")
    emit("%s:" % label)
    round4(p, QR_COL)
    round4(p, QR_DIAG)
    emit("\tDECL DX")
    emit("\tJNZ %s" % label)

def add_back(p):
    emit("\t// Add the input state back.")
    for i in range(16):
        if i == 12:
            emit("\tVPADDD %s, %s, %s" % (R(p, 16), R(p, 12), R(p, 12)))
        else:
            emit("\tVPADDD.BCST %d(AX), %s, %s" % (4 * i, R(p, i), R(p, i)))

class Alloc:
    def __init__(self, free, banned=()):
        self.free = list(free)
        self.banned = set(banned)
    def get(self):
        return self.free.pop(0)
    def put(self, r):
        if r not in self.banned:
            self.free.insert(0, r)

def transpose(p, nblocks, alloc, sink, regs=tuple(range(16)), tight=False):
    """Transpose Z0..Z15 (p-width, lane j = block j) into per-block ZMM registers.
    sink(b, reg) is called for every block b < nblocks once its register is ready;
    if sink returns True, reg is released."""
    # stage 1 + 2 per word group g -> Rg[m], 128-bit lane k = words 4g..4g+3 of block 4k+m
    emit("\t// Transpose. Per group of words 4g..4g+3, dword/qword unpacks give")
    emit("\t// R[g][m] whose 128-bit lane k holds those words of block 4k+m.")
    Rg = {}
    for g in range(4):
        a, b, c, d = regs[4 * g], regs[4 * g + 1], regs[4 * g + 2], regs[4 * g + 3]
        t0 = alloc.get()
        emit("\tVPUNPCKLDQ %s, %s, %s" % (R(p, b), R(p, a), R(p, t0)))
        emit("\tVPUNPCKHDQ %s, %s, %s" % (R(p, b), R(p, a), R(p, a)))  # a := U01
        alloc.put(b)
        t1 = alloc.get()
        emit("\tVPUNPCKLDQ %s, %s, %s" % (R(p, d), R(p, c), R(p, t1)))
        emit("\tVPUNPCKHDQ %s, %s, %s" % (R(p, d), R(p, c), R(p, c)))  # c := U23
        alloc.put(d)
        r0 = alloc.get(); r1 = alloc.get()
        emit("\tVPUNPCKLQDQ %s, %s, %s" % (R(p, t1), R(p, t0), R(p, r0)))
        emit("\tVPUNPCKHQDQ %s, %s, %s" % (R(p, t1), R(p, t0), R(p, r1)))
        alloc.put(t0); alloc.put(t1)
        r2 = alloc.get(); r3 = alloc.get()
        emit("\tVPUNPCKLQDQ %s, %s, %s" % (R(p, c), R(p, a), R(p, r2)))
        emit("\tVPUNPCKHQDQ %s, %s, %s" % (R(p, c), R(p, a), R(p, r3)))
        alloc.put(a); alloc.put(c)
        Rg[g] = [r0, r1, r2, r3]
    # stage 3: 4x4 transpose of 128-bit lanes, per m
    kmax = (nblocks + 3) // 4  # number of 128-bit lanes in use
    emit("\t// Then, per m, a 4x4 transpose of 128-bit lanes across R[0..3][m]")
    emit("\t// gives whole blocks m, 4+m, 8+m, 12+m (ZMM-wide even for YMM passes).")
    for m in range(4):
        r = [Rg[g][m] for g in range(4)]
        if tight:
            assert kmax == 4
            # In place, with one temporary: x, z = r0, y = r1, w = r2.
            x = alloc.get()
            emit("\tVSHUFI32X4 $0x44, Z%d, Z%d, Z%d" % (r[1], r[0], x))
            emit("\tVSHUFI32X4 $0xee, Z%d, Z%d, Z%d" % (r[1], r[0], r[0]))
            emit("\tVSHUFI32X4 $0x44, Z%d, Z%d, Z%d" % (r[3], r[2], r[1]))
            emit("\tVSHUFI32X4 $0xee, Z%d, Z%d, Z%d" % (r[3], r[2], r[2]))
            emit("\tVSHUFI32X4 $0x88, Z%d, Z%d, Z%d" % (r[1], x, r[3]))
            emit("\tVSHUFI32X4 $0xdd, Z%d, Z%d, Z%d" % (r[1], x, x))
            emit("\tVSHUFI32X4 $0x88, Z%d, Z%d, Z%d" % (r[2], r[0], r[1]))
            emit("\tVSHUFI32X4 $0xdd, Z%d, Z%d, Z%d" % (r[2], r[0], r[0]))
            alloc.put(r[2])
            for blk, o in [(m, r[3]), (4 + m, x), (8 + m, r[1]), (12 + m, r[0])]:
                if sink(blk, o):
                    alloc.put(o)
            continue
        x = alloc.get(); y = alloc.get()
        emit("\tVSHUFI32X4 $0x44, Z%d, Z%d, Z%d" % (r[1], r[0], x))
        emit("\tVSHUFI32X4 $0x44, Z%d, Z%d, Z%d" % (r[3], r[2], y))
        zw = None
        if kmax > 2:
            z = alloc.get(); w = alloc.get()
            emit("\tVSHUFI32X4 $0xee, Z%d, Z%d, Z%d" % (r[1], r[0], z))
            emit("\tVSHUFI32X4 $0xee, Z%d, Z%d, Z%d" % (r[3], r[2], w))
            zw = (z, w)
        for q in r:
            alloc.put(q)
        outs = []
        for k in range(kmax):
            blk = 4 * k + m
            if blk >= nblocks:
                continue
            src = (x, y) if k < 2 else zw
            imm = 0x88 if k % 2 == 0 else 0xdd
            o = alloc.get()
            emit("\tVSHUFI32X4 $0x%02x, Z%d, Z%d, Z%d" % (imm, src[1], src[0], o))
            outs.append((blk, o))
        alloc.put(x); alloc.put(y)
        if zw:
            alloc.put(zw[0]); alloc.put(zw[1])
        for blk, o in outs:
            if sink(blk, o):
                alloc.put(o)


def round_ops(p, regs, qrs):
    """One column or diagonal round of the state in regs as a list of lines."""
    ops = []
    def Q(i):
        return R(p, regs[i])
    a = [q[0] for q in qrs]; b = [q[1] for q in qrs]
    c = [q[2] for q in qrs]; d = [q[3] for q in qrs]
    for x, y, z, rot in [(a, b, d, 16), (c, d, b, 12), (a, b, d, 8), (c, d, b, 7)]:
        for i in range(4):
            ops.append("\tVPADDD %s, %s, %s" % (Q(y[i]), Q(x[i]), Q(x[i])))
        for i in range(4):
            ops.append("\tVPXORD %s, %s, %s" % (Q(x[i]), Q(z[i]), Q(z[i])))
        for i in range(4):
            ops.append("\tVPROLD $%d, %s, %s" % (rot, Q(z[i]), Q(z[i])))
    return ops

ZREGS = tuple(range(16))
YREGS = tuple(range(16, 32))

def merge(zops, yops):
    gz, gy = IL
    out = []
    i = j = 0
    while i < len(zops) or j < len(yops):
        out += yops[j:j + gy]; j += gy
        out += zops[i:i + gz]; i += gz
    return out

def pass24(label, mode):
    """24 blocks from the counters in Z16 (base + lane): 16 in Z0-Z15, 8 in
    Y16-Y31, rounds interleaved. mode "ks": store 1536 bytes at DI. mode
    "xor": 1024 < CX <= 1536 bytes to XOR from SI into DI."""
    emit("\t// Counters base+0..15 to the stack for the add-back; the YMM")
    emit("\t// lanes take base+16..23.")
    emit("\tVMOVDQU64 Z16, 64(SP)")
    emit("\tVMOVDQA64 Z16, Z12")
    emit("\tVPADDD.BCST sixteen<>(SB), Y16, Y28")
    emit("\t// Word i of the state in every lane of both groups.")
    for i in range(16):
        if i != 12:
            emit("\tVPBROADCASTD %d(AX), Z%d" % (4 * i, i))
    for i in range(16):
        if i != 12:
            emit("\tVPBROADCASTD %d(AX), Y%d" % (4 * i, 16 + i))
    emit("\t// 10 double rounds, the 16-lane and the 8-lane states interleaved.")
    emit("\tMOVL $10, DX")
    emit("%s_rounds:" % label)
    zops = round_ops("Z", ZREGS, QR_COL) + round_ops("Z", ZREGS, QR_DIAG)
    yops = round_ops("Y", YREGS, QR_COL) + round_ops("Y", YREGS, QR_DIAG)
    for l in merge(zops, yops):
        emit(l)
    emit("\tDECL DX")
    emit("\tJNZ %s_rounds" % label)
    emit("\t// Park words 14 and 15 of the 8-lane state to free Z30, Z31.")
    emit("\tVMOVDQU64 Y30, 0(SP)")
    emit("\tVMOVDQU64 Y31, 32(SP)")
    emit("\t// Add the input state back (16 lanes).")
    for i in range(16):
        if i == 12:
            emit("\tVPADDD 64(SP), Z12, Z12")
        else:
            emit("\tVPADDD.BCST %d(AX), Z%d, Z%d" % (4 * i, i, i))
    if mode == "ks":
        def zsink(blk, o):
            emit("\tVMOVDQU64 Z%d, %d(DI)" % (o, 64 * blk))
            return True
    else:
        zsink = full_sink_xor
    transpose("Z", 16, Alloc([30, 31]), zsink, tight=True)
    emit("\tVMOVDQU64 0(SP), Y30")
    emit("\tVMOVDQU64 32(SP), Y31")
    emit("\t// Add the input state back (8 lanes).")
    for i in range(16):
        if i == 12:
            emit("\tVPADDD 64(SP), Y28, Y28")
            emit("\tVPADDD.BCST sixteen<>(SB), Y28, Y28")
        else:
            emit("\tVPADDD.BCST %d(AX), Y%d, Y%d" % (4 * i, 16 + i, 16 + i))
    if mode == "ks":
        def ysink(blk, o):
            emit("\tVMOVDQU64 Z%d, %d(DI)" % (o, 1024 + 64 * blk))
            return True
        transpose("Y", 8, Alloc(range(16)), ysink, regs=YREGS)
        return
    blocks = {}
    def ysink(blk, o):
        blocks[blk] = o
        return False
    transpose("Y", 8, Alloc(range(16), banned=(30, 31)), ysink, regs=YREGS)
    emit("\tADDQ $1024, SI")
    emit("\tADDQ $1024, DI")
    emit("\tSUBQ $1024, CX")
    emit("\t// Blocks 16-23 in order: whole ones XORed, the last partial one masked.")
    for blk in range(8):
        o = blocks[blk]
        emit("\tVMOVDQA64 Z%d, Z31" % o)
        emit("\tCMPQ CX, $64")
        emit("\tJB partial")
        emit("\tVPXORD (SI), Z31, Z31")
        emit("\tVMOVDQU64 Z31, (DI)")
        if blk != 7:
            emit("\tADDQ $64, SI")
            emit("\tADDQ $64, DI")
            emit("\tSUBQ $64, CX")
            emit("\tJZ done")
    emit("\tJMP done")

def full_sink_xor(blk, o):
    emit("\tVPXORD %d(SI), Z%d, Z%d" % (64 * blk, o, o))
    emit("\tVMOVDQU64 Z%d, %d(DI)" % (o, 64 * blk))
    return True

def full_sink_store(blk, o):
    emit("\tVMOVDQU64 Z%d, %d(DI)" % (o, 64 * blk))
    return True

HDR = """// Code generated by chacha_amd64_gen.py. DO NOT EDIT.

//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 ChaCha20 (RFC 8439) keystream.
//
// Layout: 16 blocks are processed at once, one ZMM register per state word
// (Z0..Z15), lane j of each register belonging to block j. Z16 holds the
// per-lane block counters (s[12] + lane). After the rounds the input state is
// added back (broadcast from memory) and the 16x16 matrix of dwords is
// transposed so that each ZMM register holds one 64-byte keystream block.
// A last group of at most 8 blocks runs 8 lanes in YMM registers (half the
// cost on Zen 4, whose 512-bit operations are double-pumped); a 4-lane XMM
// pass measured no faster than the 8-lane one, so there is none. The final
// partial block is handled with byte-masked loads and stores, so no byte
// past n is read or written.
//
// 24 blocks (keyStream24AVX512, and a remainder of 17 to 24 blocks in
// xorKeyStreamAVX512) run as one pass: 16 lanes in Z0-Z15 and 8 lanes in
// Y16-Y31, their rounds interleaved one step (4 adds, 4 xors, 4 rotations)
// of each at a time, so the latency-bound 8-lane chains fill the issue
// slots the 16-lane work leaves (24 blocks in about 0.8x the time of a
// 16-lane pass and an 8-lane pass). VPROLD needs no temporaries, so the
// rounds use exactly the 32 registers; afterwards words 14 and 15 of the
// 8-lane state are parked on the stack to give the 16-lane transpose two
// temporaries, and the 8-lane group is finished after it.
//
// Registers: Z0-Z15 state words, Z16 counters, Z17-Z31 transpose
// temporaries (Z30, Z31 also the partial block). AX = state, SI = src,
// DI = dst, CX = bytes left, DX = round counter / mask. The stack (128
// bytes) is used by the 24-block pass only: 0-63 the parked words, 64-127
// the counters of lanes 0-15 for the add-back.
//
// The straight-line sections (rounds, add-back, transpose) are regular and
// were unrolled by a small script.

// iota<> = 0, 1, ..., 15: lane offsets of the block counters.
"""

def main():
    emit(HDR.rstrip("\n"))
    for i in range(16):
        emit("DATA iota<>+%d(SB)/4, $%d" % (4 * i, i))
    emit("GLOBL iota<>(SB), (NOPTR+RODATA), $64")
    emit()
    emit("// sixteen<> = 16, added to the counters after each 16-block group.")
    emit("DATA sixteen<>+0(SB)/4, $16")
    emit("GLOBL sixteen<>(SB), (NOPTR+RODATA), $4")
    emit()

    # keyStream16AVX512
    emit("// func keyStream16AVX512(ks *[1024]byte, s *chachaState)")
    emit("TEXT ·keyStream16AVX512(SB), NOSPLIT, $0-16")
    emit("\tMOVQ ks+0(FP), DI")
    emit("\tMOVQ s+8(FP), AX")
    emit("\tVPBROADCASTD 48(AX), Z16")
    emit("\tVPADDD iota<>(SB), Z16, Z16")
    init_state("Z")
    rounds("Z", "ks16_rounds")
    add_back("Z")
    transpose("Z", 16, Alloc(range(17, 32)), full_sink_store)
    emit("\tVZEROUPPER")
    emit("\tRET")
    emit()

    emit("// func keyStream24AVX512(ks *[1536]byte, s *chachaState)")
    emit("// Stack: 0-63 parked words 14, 15 of the 8-lane state; 64-127 counters.")
    emit("TEXT ·keyStream24AVX512(SB), NOSPLIT, $128-16")
    emit("\tMOVQ ks+0(FP), DI")
    emit("\tMOVQ s+8(FP), AX")
    emit("\tVPBROADCASTD 48(AX), Z16")
    emit("\tVPADDD iota<>(SB), Z16, Z16")
    pass24("ks24", "ks")
    emit("\tVZEROUPPER")
    emit("\tRET")
    emit()

    emit("// func xorKeyStreamAVX512(dst, src *byte, n int, s *chachaState)")
    emit("// Requires n > 0.")
    emit("// Stack: as keyStream24AVX512, for the 24-block pass.")
    emit("TEXT ·xorKeyStreamAVX512(SB), NOSPLIT, $128-32")
    emit("\tMOVQ dst+0(FP), DI")
    emit("\tMOVQ src+8(FP), SI")
    emit("\tMOVQ n+16(FP), CX")
    emit("\tMOVQ s+24(FP), AX")
    emit("\tVPBROADCASTD 48(AX), Z16")
    emit("\tVPADDD iota<>(SB), Z16, Z16")
    emit("\tCMPQ CX, $1024")
    emit("\tJB tail")
    emit()
    emit("check16:")
    emit("\t// 17 to 24 blocks left: one interleaved 24-block pass.")
    emit("\tCMPQ CX, $1024")
    emit("\tJBE loop16")
    emit("\tCMPQ CX, $1536")
    emit("\tJBE tail24")
    emit()
    emit("loop16:")
    init_state("Z")
    rounds("Z", "loop16_rounds")
    add_back("Z")
    transpose("Z", 16, Alloc(range(17, 32)), full_sink_xor)
    emit("\tVPADDD.BCST sixteen<>(SB), Z16, Z16")
    emit("\tADDQ $1024, SI")
    emit("\tADDQ $1024, DI")
    emit("\tSUBQ $1024, CX")
    emit("\tCMPQ CX, $1024")
    emit("\tJAE %s" % "check16")
    emit("\tTESTQ CX, CX")
    emit("\tJZ done")
    emit()
    emit("tail:")
    widths = [w for w in TAILS]
    # dispatch: smallest width that covers CX bytes
    for w in sorted(widths)[:-1]:
        emit("\tCMPQ CX, $%d" % (64 * w))
        emit("\tJBE tail%d" % w)
    for w in sorted(widths, reverse=True):
        p = {16: "Z", 8: "Y", 4: "X"}[w]
        emit()
        emit("tail%d:" % w)
        init_state(p)
        rounds(p, "tail%d_rounds" % w)
        add_back(p)
        blocks = {}
        def sink(blk, o):
            blocks[blk] = o
            return False
        transpose(p, w, Alloc(range(17, 30)), sink)
        emit("\t// Blocks in order: whole ones XORed, the last partial one masked.")
        for blk in range(w):
            o = blocks[blk]
            emit("\tVMOVDQA64 Z%d, Z31" % o)
            emit("\tCMPQ CX, $64")
            emit("\tJB partial")
            emit("\tVPXORD (SI), Z31, Z31")
            emit("\tVMOVDQU64 Z31, (DI)")
            if blk != w - 1:
                emit("\tADDQ $64, SI")
                emit("\tADDQ $64, DI")
                emit("\tSUBQ $64, CX")
                emit("\tJZ done")
        emit("\tJMP done")
    emit()
    emit("tail24:")
    pass24("tail24", "xor")
    emit()
    emit("partial:")
    emit("\t// 0 < CX < 64 bytes remain; Z31 holds their keystream block.")
    emit("\tMOVQ $1, DX")
    emit("\tSHLQ CX, DX")
    emit("\tDECQ DX")
    emit("\tKMOVQ DX, K1")
    emit("\tVMOVDQU8.Z (SI), K1, Z30")
    emit("\tVPXORD Z31, Z30, Z30")
    emit("\tVMOVDQU8 Z30, K1, (DI)")
    emit()
    emit("done:")
    emit("\tVZEROUPPER")
    emit("\tRET")

# The choices below were measured on Zen 4 (go test -bench in this
# package) and are fixed, not options: VPSHUFB for the 16- and 8-bit
# rotations ran about 8% slower than VPROLD; a 4-lane tail was no faster
# than the 8-lane one; the 24-block pass beat a 16-lane pass plus an
# 8-lane one (260-280 ns against 315-340); and interleaving the two states
# one 12-instruction step at a time (IL) beat every other mix tried.
IL = (12, 12)
TAILS = [8, 16]
main()
print("\n".join(out))
