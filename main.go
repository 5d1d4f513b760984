// Command fips-go is a userspace WireGuard implementation: a drop-in for
// wireguard-go under wg(8) and wg-quick(8), plus a built-in wg-style client
// and a rootless self-benchmark.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/fips-go/fips-go/internal/userns"
)

func main() {
	if userns.IsChild() {
		userns.ChildMain() // the namespace side of `userspace -- CMD`
	}
	if err := newApp().Run(context.Background(), os.Args); err != nil {
		var es exitStatus
		if errors.As(err, &es) {
			os.Exit(int(es))
		}
		fmt.Fprintln(os.Stderr, "fips-go:", err)
		os.Exit(1)
	}
}
