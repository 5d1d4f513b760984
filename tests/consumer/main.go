// Command consumer is the README's Go library example, built as a module
// outside fips-go that imports only its public packages: if it needs
// anything internal to build, the API is not done. Its test runs it
// against a peer and checks that the README shows this very program.
package main

import (
	"context"
	"io"
	"os"

	"github.com/fips-go/fips-go/tunnel"
)

func main() {
	ctx := context.Background()
	t, err := tunnel.OpenFile(ctx, "wg0.conf", tunnel.Options{})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	if err := t.WaitHandshake(ctx); err != nil {
		panic(err)
	}
	resp, err := t.HTTPClient().Get("http://web.internal/")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	io.Copy(os.Stdout, resp.Body)
}
