// Package dnstest is a DNS server for tests: one name with one IPv4
// address, enough to check that a resolver's queries reach it.
package dnstest

import (
	"net"
	"net/netip"

	"golang.org/x/net/dns/dnsmessage"
)

// Serve answers A queries for name (fully qualified, "host.example.")
// with a, everything else with NXDOMAIN, until pc closes.
func Serve(pc net.PacketConn, name string, a netip.Addr) {
	b := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(b)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(b[:n])
		if err != nil {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true}
		known := q.Name.String() == name
		if !known {
			rh.RCode = dnsmessage.RCodeNameError
		}
		bld := dnsmessage.NewBuilder(nil, rh)
		bld.StartQuestions()
		bld.Question(q)
		bld.StartAnswers()
		if known && q.Type == dnsmessage.TypeA {
			bld.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: a.As4()})
		}
		if msg, err := bld.Finish(); err == nil {
			pc.WriteTo(msg, from)
		}
	}
}
