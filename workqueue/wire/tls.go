package wire

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ServerTLS returns a master's TLS configuration from its certificate and
// private key, PEM files as openssl writes them (CCTools' --ssl-cert and
// --ssl-key). It warns through warn, as ReadPasswordFile does, when others
// can read the key.
func ServerTLS(certFile, keyFile string, warn func(string)) (*tls.Config, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := readSecret(keyFile, "TLS key", warn)
	if err != nil {
		return nil, fmt.Errorf("TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// ClientTLS returns a worker's TLS configuration. With caFile, the
// master's certificate must be one of the certificates in that PEM file or
// be signed by one of them (the master's own self-signed certificate will
// do); host names are not compared, since workers often reach a master at
// an address the catalog saw. Without caFile any certificate is accepted,
// as CCTools' work_queue_worker --ssl does: the traffic is hidden from
// onlookers, but nothing proves that the peer is your master.
func ClientTLS(caFile string) (*tls.Config, error) {
	// Verification is done in VerifyConnection, without host names.
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	roots, n := x509.NewCertPool(), 0
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("TLS CA %s: %w", caFile, err)
		}
		roots.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
	}
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the master sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		leaf := cs.PeerCertificates[0]
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter}); err != nil {
			return fmt.Errorf("the master's certificate (%s) is not trusted by %s: %w", leaf.Subject, caFile, err)
		}
		return nil
	}
	return cfg, nil
}
