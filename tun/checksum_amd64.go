//go:build amd64 && !purego

package tun

import "golang.org/x/sys/cpu"

// haveAVX2 selects sumWords32AVX2 for the bulk of long sums; set once, at
// start-up, from the CPU's features.
var haveAVX2 = cpu.X86.HasAVX2

// sumWords32 adds the little-endian 32-bit words of b, whose length is a
// multiple of 32, into one 64-bit total (no carry out below 16 GiB).
func sumWords32(b []byte) uint64 { return sumWords32AVX2(b) }

//go:noescape
func sumWords32AVX2(b []byte) uint64
