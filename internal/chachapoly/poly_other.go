//go:build !amd64 || purego

package chachapoly

// useIFMA reports whether the AVX-512 IFMA Poly1305 kernel is used; never
// outside amd64.
const useIFMA = false

// polyUseVector reports whether a message of n bytes takes the vector path.
func polyUseVector(n int) bool { return false }

// polyVector is never called when useIFMA is false.
func polyVector(acc *polyAcc, msg []byte, r0, r1 uint64) {
	panic("chachapoly: polyVector without IFMA")
}

// polyIFMA exists only so that tests compile everywhere; tests skip the
// vector path when useIFMA is false.
func polyIFMA(h *[3]uint64, msg *byte, groups int, r0, r1, r2 uint64) {
	panic("chachapoly: polyIFMA without IFMA")
}
