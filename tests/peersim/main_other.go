//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "peersim: Linux only (IP_PKTINFO source addresses, sendmmsg)")
	os.Exit(2)
}
