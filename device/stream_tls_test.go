package device

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strconv"
	"testing"
	"time"
)

// testCertPEM is a self-signed certificate for name and its key, in PEM.
func testCertPEM(t *testing.T, name string) TLSCertificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return TLSCertificate{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}
}

// A certificate given in the configuration is what the listener serves;
// a broken one is refused whole; an empty one goes back to self-signed.
func TestStreamTLSCertificateConfig(t *testing.T) {
	_, b, _, tcpEp := streamPair(t)
	served := func() string {
		c, err := tls.Dial("tcp", net.JoinHostPort(tcpEp.Addr().String(), strconv.Itoa(int(tcpEp.Port()))), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	cert := testCertPEM(t, "vpn.example.org")
	if err := b.dev.Apply(&Config{TLSCertificate: &cert}); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "vpn.example.org" {
		t.Fatalf("served %q", cn)
	}
	if string(b.dev.Status().TLSCertPEM) != string(cert.CertPEM) {
		t.Fatal("status does not show the certificate")
	}
	bad := TLSCertificate{CertPEM: cert.CertPEM, KeyPEM: testCertPEM(t, "other").KeyPEM}
	if err := b.dev.Apply(&Config{TLSCertificate: &bad}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a key that does not match: %v", err)
	}
	if cn := served(); cn != "vpn.example.org" {
		t.Fatalf("a refused certificate changed what is served: %q", cn)
	}
	if err := b.dev.Apply(&Config{TLSCertificate: &TLSCertificate{}}); err != nil {
		t.Fatal(err)
	}
	if cn := served(); cn != "" || b.dev.Status().TLSCertPEM != nil {
		t.Fatalf("served %q after removing the certificate", cn)
	}
}
