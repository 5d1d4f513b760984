package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"strings"

	"github.com/fips-go/fips-go/device/noise"
	"github.com/urfave/cli/v3"
)

func keyCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:  "genkey",
			Usage: "print a new random private key (base64)",
			Action: func(ctx context.Context, c *cli.Command) error {
				k, err := noise.GeneratePrivateKey(rand.Reader)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(c.Root().Writer, k.Base64())
				return err
			},
		},
		{
			Name:  "genpsk",
			Usage: "print a new random preshared key (base64)",
			Action: func(ctx context.Context, c *cli.Command) error {
				k, err := noise.GeneratePresharedKey(rand.Reader)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(c.Root().Writer, k.Base64())
				return err
			},
		},
		{
			Name:        "pubkey",
			Usage:       "read a private key on stdin, print its public key",
			Description: "Example: fips-go genkey | tee private.key | fips-go pubkey > public.key",
			Action: func(ctx context.Context, c *cli.Command) error {
				return pubkey(c.Root().Reader, c.Root().Writer)
			},
		},
	}
}

func pubkey(in io.Reader, out io.Writer) error {
	line, err := bufio.NewReader(io.LimitReader(in, 1024)).ReadString('\n')
	if err != nil && err != io.EOF {
		return fmt.Errorf("pubkey: reading stdin: %w", err)
	}
	raw, err := noise.ParseKeyBase64(strings.TrimSpace(line))
	if err != nil {
		return fmt.Errorf("pubkey: stdin: %w", err)
	}
	priv := noise.PrivateKey(raw)
	pub := priv.PublicKey()
	_, err = fmt.Fprintln(out, pub.String())
	return err
}
