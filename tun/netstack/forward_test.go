package netstack

import (
	"errors"
	"testing"
)

func TestSetForwarderNeedsPromiscuous(t *testing.T) {
	n, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.SetForwarder(Forwarder{TCP: func(q *TCPRequest) { q.Refuse() }}); !errors.Is(err, ErrNotPromiscuous) {
		t.Fatalf("SetForwarder on a plain Net: %v, want ErrNotPromiscuous", err)
	}
	p, err := New(Options{Promiscuous: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := p.SetForwarder(Forwarder{}); err == nil {
		t.Fatal("SetForwarder after Close succeeded")
	}
}
