//go:build !amd64 || purego

package tun

// haveAVX2 is false where there is no vector loop (other architectures,
// or the purego build tag); sumWords32 is then never called.
const haveAVX2 = false

func sumWords32(b []byte) uint64 { panic("tun: sumWords32 without AVX2") }
