//go:build !amd64 || purego

package tun

const haveAVX2 = false

func sumWords32(b []byte) uint64 { panic("tun: sumWords32 without AVX2") }
