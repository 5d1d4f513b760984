//go:build !amd64 || purego

package chachapoly

// useAVX512 is false off amd64: the AEAD then uses x/crypto's code, and
// these portable functions serve only the package's own tests.
const useAVX512 = false

func keyStream16(ks *[1024]byte, s *chachaState) { keyStream16Generic(ks, s) }

func keyStream24(ks *[1536]byte, s *chachaState) { keyStream24Generic(ks, s) }

func xorKeyStream(dst, src []byte, s *chachaState) {
	if len(src) > 0 {
		_ = dst[len(src)-1] // panics if dst is too short
	}
	xorKeyStreamGeneric(dst, src, s)
}
