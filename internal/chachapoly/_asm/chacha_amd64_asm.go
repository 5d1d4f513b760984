// Command _asm writes ../chacha_amd64.s, the AVX-512 ChaCha20 (RFC 8439)
// keystream of package chachapoly. Run it through go generate in the
// package directory; it lives in a module of its own so that the package's
// module does not depend on avo.
//
// The rounds and transposes are unrolled, which is why the assembly is
// generated rather than written by hand; read the output to review it.
//
// Layout: 16 blocks are processed at once, one ZMM register per state word
// (Z0..Z15), lane j of each register belonging to block j. Z16 holds the
// per-lane block counters (s[12] + lane). After the rounds the input state
// is added back (broadcast from memory) and the 16x16 matrix of dwords is
// transposed so that each ZMM register holds one 64-byte keystream block.
// A last group of at most 8 blocks runs 8 lanes in YMM registers (half the
// cost on Zen 4, whose 512-bit operations are double-pumped). The final
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
// The choices were measured on Zen 4 (go test -bench in the package) and
// are fixed, not options: VPSHUFB for the 16- and 8-bit rotations ran about
// 8% slower than VPROLD; a 4-lane XMM tail was no faster than the 8-lane
// one, so there is none; the 24-block pass beat a 16-lane pass plus an
// 8-lane one (260-280 ns against 315-340); and interleaving the two states
// one 12-instruction step at a time beat every other mix tried.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	// The package whose declarations the generated functions implement;
	// imported so that go.mod keeps it (Package names it only as a string).
	_ "github.com/fips-go/fips-go/internal/chachapoly"
)

// Vector registers by number, at each width the code uses.
var (
	zmm = [32]VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
	ymm = [32]VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15,
		Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23, Y24, Y25, Y26, Y27, Y28, Y29, Y30, Y31}
)

// lanes is how many blocks one pass computes: 16 in ZMM or 8 in YMM
// registers.
type lanes int

// r returns vector register i at the pass's width.
func (l lanes) r(i int) VecPhysical {
	if l == 16 {
		return zmm[i]
	}
	return ymm[i]
}

// The quarter rounds of a column round and of a diagonal round, as indexes
// (a, b, c, d) into the 16 state words.
var (
	columns   = [4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}
	diagonals = [4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
)

// identity maps state word i to register i; upper maps it to register 16+i.
var identity, upper [16]int

func init() {
	for i := range identity {
		identity[i] = i
		upper[i] = 16 + i
	}
}

// word returns the address of word i of the input state, which AX points to.
func word(i int) Mem { return Mem{Base: RAX, Disp: 4 * i} }

// op is one instruction, to be emitted later: rounds of two states are
// built separately and then interleaved.
type op func()

// roundOps returns one column or diagonal round (qrs) of the state whose
// word i lives in register regs[i], as its four steps of four quarter
// rounds, each step 4 adds, 4 xors and 4 rotations.
func roundOps(l lanes, regs [16]int, qrs [4][4]int) []op {
	var ops []op
	// A quarter round on (a, b, c, d) is four steps x += y; z ^= x;
	// z <<<= rot, with x, y, z indexes into (a, b, c, d).
	steps := []struct{ x, y, z, rot int }{{0, 1, 3, 16}, {2, 3, 1, 12}, {0, 1, 3, 8}, {2, 3, 1, 7}}
	for _, s := range steps {
		for _, q := range qrs {
			x, y := l.r(regs[q[s.x]]), l.r(regs[q[s.y]])
			ops = append(ops, func() { VPADDD(y, x, x) })
		}
		for _, q := range qrs {
			x, z := l.r(regs[q[s.x]]), l.r(regs[q[s.z]])
			ops = append(ops, func() { VPXORD(x, z, z) })
		}
		for _, q := range qrs {
			z, rot := l.r(regs[q[s.z]]), U8(s.rot)
			ops = append(ops, func() { VPROLD(rot, z, z) })
		}
	}
	return ops
}

// doubleRound returns a column round followed by a diagonal round.
func doubleRound(l lanes, regs [16]int) []op {
	return append(roundOps(l, regs, columns), roundOps(l, regs, diagonals)...)
}

// interleave returns the 8-lane ops and the 16-lane ops alternating, one
// step of 12 instructions of each, the 8-lane one first.
func interleave(zops, yops []op) []op {
	const step = 12
	var out []op
	for i := 0; i < len(zops) || i < len(yops); i += step {
		out = append(out, yops[min(i, len(yops)):min(i+step, len(yops))]...)
		out = append(out, zops[min(i, len(zops)):min(i+step, len(zops))]...)
	}
	return out
}

func run(ops []op) {
	for _, o := range ops {
		o()
	}
}

// initState loads word i of the state into every lane of register i; word
// 12 takes the per-lane counters from Z16.
func initState(l lanes) {
	Comment("Word i of the state in every lane; word 12 = per-lane counters.")
	for i := range 16 {
		if i == 12 {
			VMOVDQA64(l.r(16), l.r(12))
		} else {
			VPBROADCASTD(word(i), l.r(i))
		}
	}
}

// rounds emits the 20 rounds of a single state in Z0-Z15 or Y0-Y15 as a
// loop of 10 double rounds.
func rounds(l lanes, label string) {
	Comment("10 double rounds: columns, then diagonals, 4 quarter rounds interleaved.")
	MOVL(U32(10), EDX)
	Label(label)
	run(doubleRound(l, identity))
	DECL(EDX)
	JNZ(LabelRef(label))
}

// addBack adds the input state to registers 0-15 (the counters from Z16).
func addBack(l lanes) {
	Comment("Add the input state back.")
	for i := range 16 {
		if i == 12 {
			VPADDD(l.r(16), l.r(12), l.r(12))
		} else {
			VPADDD_BCST(word(i), l.r(i), l.r(i))
		}
	}
}

// alloc hands out temporary vector registers, by number. A register
// returned with put is handed out next; banned ones are never taken back.
type alloc struct {
	free   []int
	banned map[int]bool
}

func newAlloc(free []int, banned ...int) *alloc {
	a := &alloc{free: append([]int(nil), free...), banned: map[int]bool{}}
	for _, r := range banned {
		a.banned[r] = true
	}
	return a
}

func span(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func (a *alloc) get() int {
	if len(a.free) == 0 {
		panic("out of temporary registers")
	}
	r := a.free[0]
	a.free = a.free[1:]
	return r
}

func (a *alloc) put(r int) {
	if !a.banned[r] {
		a.free = append([]int{r}, a.free...)
	}
}

// sink receives keystream block blk, whole in ZMM register reg, as soon as
// the transpose has it; if it returns true, reg may be reused.
type sink func(blk, reg int) bool

// transpose turns the 16 state registers regs (lane j = block j) into one
// ZMM register per block for the first nblocks blocks, handing each to
// sink. tight does the last stage in place with a single temporary, for a
// 16-lane pass that has only two free registers.
func transpose(l lanes, nblocks int, a *alloc, sink sink, regs [16]int, tight bool) {
	Comment("Transpose. Per group of words 4g..4g+3, dword/qword unpacks give",
		"R[g][m] whose 128-bit lane k holds those words of block 4k+m.")
	var rg [4][4]int
	for g := range 4 {
		w, x, y, z := regs[4*g], regs[4*g+1], regs[4*g+2], regs[4*g+3]
		t0 := a.get()
		VPUNPCKLDQ(l.r(x), l.r(w), l.r(t0))
		VPUNPCKHDQ(l.r(x), l.r(w), l.r(w)) // w is free once read
		a.put(x)
		t1 := a.get()
		VPUNPCKLDQ(l.r(z), l.r(y), l.r(t1))
		VPUNPCKHDQ(l.r(z), l.r(y), l.r(y))
		a.put(z)
		r0, r1 := a.get(), a.get()
		VPUNPCKLQDQ(l.r(t1), l.r(t0), l.r(r0))
		VPUNPCKHQDQ(l.r(t1), l.r(t0), l.r(r1))
		a.put(t0)
		a.put(t1)
		r2, r3 := a.get(), a.get()
		VPUNPCKLQDQ(l.r(y), l.r(w), l.r(r2))
		VPUNPCKHQDQ(l.r(y), l.r(w), l.r(r3))
		a.put(w)
		a.put(y)
		rg[g] = [4]int{r0, r1, r2, r3}
	}
	Comment("Then, per m, a 4x4 transpose of 128-bit lanes across R[0..3][m]",
		"gives whole blocks m, 4+m, 8+m, 12+m (ZMM-wide even for YMM passes).")
	for m := range 4 {
		r := [4]int{rg[0][m], rg[1][m], rg[2][m], rg[3][m]}
		if tight {
			lanesTight(nblocks, m, r, a, sink)
		} else {
			lanesSpare(nblocks, m, r, a, sink)
		}
	}
}

// shuf emits VSHUFI32X4 imm, b, a, dst on ZMM registers: the low two
// 128-bit lanes of dst come from a, the high two from b, chosen by imm.
func shuf(imm uint8, b, a, dst int) { VSHUFI32X4(U8(imm), zmm[b], zmm[a], zmm[dst]) }

// lanesTight is the last transpose stage for 16 blocks in place: x and the
// registers of r end up holding blocks m, 4+m, 8+m and 12+m.
func lanesTight(nblocks, m int, r [4]int, a *alloc, sink sink) {
	if nblocks != 16 {
		panic("tight transpose needs 16 blocks")
	}
	x := a.get()
	shuf(0x44, r[1], r[0], x)
	shuf(0xee, r[1], r[0], r[0])
	shuf(0x44, r[3], r[2], r[1])
	shuf(0xee, r[3], r[2], r[2])
	shuf(0x88, r[1], x, r[3])
	shuf(0xdd, r[1], x, x)
	shuf(0x88, r[2], r[0], r[1])
	shuf(0xdd, r[2], r[0], r[0])
	a.put(r[2])
	for _, b := range [4][2]int{{m, r[3]}, {4 + m, x}, {8 + m, r[1]}, {12 + m, r[0]}} {
		if sink(b[0], b[1]) {
			a.put(b[1])
		}
	}
}

// lanesSpare is the last transpose stage with temporaries to spare; it
// produces only the blocks below nblocks.
func lanesSpare(nblocks, m int, r [4]int, a *alloc, sink sink) {
	used := (nblocks + 3) / 4 // 128-bit lanes in use
	x, y := a.get(), a.get()
	shuf(0x44, r[1], r[0], x)
	shuf(0x44, r[3], r[2], y)
	var z, w int
	if used > 2 {
		z, w = a.get(), a.get()
		shuf(0xee, r[1], r[0], z)
		shuf(0xee, r[3], r[2], w)
	}
	for _, q := range r {
		a.put(q)
	}
	var outs [][2]int
	for k := range used {
		blk := 4*k + m
		if blk >= nblocks {
			continue
		}
		lo, hi := x, y
		if k >= 2 {
			lo, hi = z, w
		}
		imm := uint8(0x88)
		if k%2 == 1 {
			imm = 0xdd
		}
		o := a.get()
		shuf(imm, hi, lo, o)
		outs = append(outs, [2]int{blk, o})
	}
	a.put(x)
	a.put(y)
	if used > 2 {
		a.put(z)
		a.put(w)
	}
	for _, b := range outs {
		if sink(b[0], b[1]) {
			a.put(b[1])
		}
	}
}

// storeAt returns a sink that stores block blk at base+64*blk(DI).
func storeAt(base int) sink {
	return func(blk, r int) bool {
		VMOVDQU64(zmm[r], Mem{Base: RDI, Disp: base + 64*blk})
		return true
	}
}

// xorWhole is a sink that XORs block blk from SI into DI.
func xorWhole(blk, r int) bool {
	VPXORD(Mem{Base: RSI, Disp: 64 * blk}, zmm[r], zmm[r])
	VMOVDQU64(zmm[r], Mem{Base: RDI, Disp: 64 * blk})
	return true
}

// collect returns a sink that records which register holds each block and
// keeps it.
func collect(blocks map[int]int) sink {
	return func(blk, r int) bool {
		blocks[blk] = r
		return false
	}
}

// xorInOrder XORs the blocks held in regs[0..n) into SI -> DI, advancing
// SI, DI and CX: whole blocks directly, a last partial one through the
// masked code at partial.
func xorInOrder(n int, blocks map[int]int) {
	Comment("Blocks in order: whole ones XORed, the last partial one masked.")
	for blk := range n {
		VMOVDQA64(zmm[blocks[blk]], Z31)
		CMPQ(RCX, U32(64))
		JB(LabelRef("partial"))
		VPXORD(Mem{Base: RSI}, Z31, Z31)
		VMOVDQU64(Z31, Mem{Base: RDI})
		if blk != n-1 {
			ADDQ(U32(64), RSI)
			ADDQ(U32(64), RDI)
			SUBQ(U32(64), RCX)
			JZ(LabelRef("done"))
		}
	}
	JMP(LabelRef("done"))
}

// Static data, declared in main.
var laneOffsets, sixteen Mem

// pass24 computes 24 blocks from the counters in Z16 (base + lane): 16 in
// Z0-Z15 and 8 in Y16-Y31, their rounds interleaved. With xor false it
// stores 1536 bytes of keystream at DI; with xor true it XORs the
// 1024 < CX <= 1536 bytes at SI into DI. The stack holds 128 bytes.
func pass24(label string, xor bool) {
	parked := [2]Mem{{Base: RSP, Disp: 0}, {Base: RSP, Disp: 32}}
	counters := Mem{Base: RSP, Disp: 64}
	Comment("Counters base+0..15 to the stack for the add-back; the YMM",
		"lanes take base+16..23.")
	VMOVDQU64(Z16, counters)
	VMOVDQA64(Z16, Z12)
	VPADDD_BCST(sixteen, Y16, Y28)
	Comment("Word i of the state in every lane of both groups.")
	for _, g := range []struct {
		l    lanes
		regs [16]int
	}{{16, identity}, {8, upper}} {
		for i := range 16 {
			if i != 12 {
				VPBROADCASTD(word(i), g.l.r(g.regs[i]))
			}
		}
	}
	Comment("10 double rounds, the 16-lane and the 8-lane states interleaved.")
	MOVL(U32(10), EDX)
	Label(label + "_rounds")
	run(interleave(doubleRound(16, identity), doubleRound(8, upper)))
	DECL(EDX)
	JNZ(LabelRef(label + "_rounds"))

	Comment("Park words 14 and 15 of the 8-lane state to free Z30, Z31.")
	VMOVDQU64(Y30, parked[0])
	VMOVDQU64(Y31, parked[1])
	Comment("Add the input state back (16 lanes).")
	for i := range 16 {
		if i == 12 {
			VPADDD(counters, Z12, Z12)
		} else {
			VPADDD_BCST(word(i), zmm[i], zmm[i])
		}
	}
	zsink := storeAt(0)
	if xor {
		zsink = xorWhole
	}
	transpose(16, 16, newAlloc([]int{30, 31}), zsink, identity, true)

	VMOVDQU64(parked[0], Y30)
	VMOVDQU64(parked[1], Y31)
	Comment("Add the input state back (8 lanes).")
	for i := range 16 {
		if i == 12 {
			VPADDD(counters, Y28, Y28)
			VPADDD_BCST(sixteen, Y28, Y28)
		} else {
			VPADDD_BCST(word(i), ymm[16+i], ymm[16+i])
		}
	}
	if !xor {
		transpose(8, 8, newAlloc(span(0, 16)), storeAt(1024), upper, false)
		return
	}
	blocks := map[int]int{}
	transpose(8, 8, newAlloc(span(0, 16), 30, 31), collect(blocks), upper, false)
	ADDQ(U32(1024), RSI)
	ADDQ(U32(1024), RDI)
	SUBQ(U32(1024), RCX)
	xorInOrder(8, blocks)
}

// counterLanes loads s[12] + lane into the 16 lanes of Z16.
func counterLanes() {
	VPBROADCASTD(word(12), Z16)
	VPADDD(laneOffsets, Z16, Z16)
}

func keyStream16() {
	Implement("keyStream16AVX512")
	Attributes(NOSPLIT)
	Load(Param("ks"), RDI)
	Load(Param("s"), RAX)
	counterLanes()
	initState(16)
	rounds(16, "ks16_rounds")
	addBack(16)
	transpose(16, 16, newAlloc(span(17, 32)), storeAt(0), identity, false)
	VZEROUPPER()
	RET()
}

func keyStream24() {
	Implement("keyStream24AVX512")
	Attributes(NOSPLIT)
	Comment("Stack: 0-63 parked words 14, 15 of the 8-lane state; 64-127 counters.")
	AllocLocal(128)
	Load(Param("ks"), RDI)
	Load(Param("s"), RAX)
	counterLanes()
	pass24("ks24", false)
	VZEROUPPER()
	RET()
}

// tailWidths are the single-pass widths for what is left after the
// 16-block loop, smallest first; each covers up to width blocks.
var tailWidths = []lanes{8, 16}

func xorKeyStream() {
	Implement("xorKeyStreamAVX512")
	Attributes(NOSPLIT)
	Comment("Requires n > 0. The stack serves the 24-block pass, as in keyStream24AVX512.")
	AllocLocal(128)
	Load(Param("dst"), RDI)
	Load(Param("src"), RSI)
	Load(Param("n"), RCX)
	Load(Param("s"), RAX)
	counterLanes()
	CMPQ(RCX, U32(1024))
	JB(LabelRef("tail"))

	Label("check16")
	Comment("17 to 24 blocks left: one interleaved 24-block pass.")
	CMPQ(RCX, U32(1024))
	JBE(LabelRef("loop16"))
	CMPQ(RCX, U32(1536))
	JBE(LabelRef("tail24"))

	Label("loop16")
	initState(16)
	rounds(16, "loop16_rounds")
	addBack(16)
	transpose(16, 16, newAlloc(span(17, 32)), xorWhole, identity, false)
	VPADDD_BCST(sixteen, Z16, Z16)
	ADDQ(U32(1024), RSI)
	ADDQ(U32(1024), RDI)
	SUBQ(U32(1024), RCX)
	CMPQ(RCX, U32(1024))
	JAE(LabelRef("check16"))
	TESTQ(RCX, RCX)
	JZ(LabelRef("done"))

	Label("tail")
	Comment("The narrowest pass that covers CX bytes.")
	for _, w := range tailWidths[:len(tailWidths)-1] {
		CMPQ(RCX, U32(64*int(w)))
		JBE(LabelRef(fmt.Sprintf("tail%d", w)))
	}
	for i := len(tailWidths) - 1; i >= 0; i-- {
		w := tailWidths[i]
		// The widest tail is reached by falling through, and avo drops
		// labels nothing jumps to.
		Label(fmt.Sprintf("tail%d", w))
		Commentf("%d lanes: up to %d blocks.", w, w)
		initState(w)
		rounds(w, fmt.Sprintf("tail%d_rounds", w))
		addBack(w)
		blocks := map[int]int{}
		transpose(w, int(w), newAlloc(span(17, 30)), collect(blocks), identity, false)
		xorInOrder(int(w), blocks)
	}

	Label("tail24")
	pass24("tail24", true)

	Label("partial")
	Comment("0 < CX < 64 bytes remain; Z31 holds their keystream block.")
	MOVQ(U64(1), RDX)
	SHLQ(CL, RDX)
	DECQ(RDX)
	KMOVQ(RDX, K1)
	VMOVDQU8_Z(Mem{Base: RSI}, K1, Z30)
	VPXORD(Z31, Z30, Z30)
	VMOVDQU8(Z30, K1, Mem{Base: RDI})

	Label("done")
	VZEROUPPER()
	RET()
}

func main() {
	Package("github.com/fips-go/fips-go/internal/chachapoly")
	ConstraintExpr("amd64,!purego")

	// Lane offsets of the block counters: 0, 1, ..., 15.
	laneOffsets = GLOBL("iota", RODATA|NOPTR)
	for i := range 16 {
		DATA(4*i, U32(i))
	}
	// Added to the counters after each 16-block group.
	sixteen = GLOBL("sixteen", RODATA|NOPTR)
	DATA(0, U32(16))

	keyStream16()
	keyStream24()
	xorKeyStream()
	Generate()
}
