package samlsp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestParseArtifact(t *testing.T) {
	var raw [44]byte
	binary.BigEndian.PutUint16(raw[:], 4)
	binary.BigEndian.PutUint16(raw[2:], 3)
	src := sha1.Sum([]byte("https://idp.example/saml"))
	copy(raw[4:], src[:])
	copy(raw[24:], "a message handle, twenty")
	good := base64.StdEncoding.EncodeToString(raw[:])
	a, err := parseArtifact(good)
	if err != nil || a.index != 3 || a.source != sourceID("https://idp.example/saml") || a.value != good {
		t.Fatalf("parseArtifact = %+v, %v", a, err)
	}
	type4 := func(n int) string {
		b := make([]byte, n)
		b[1] = 4
		return base64.StdEncoding.EncodeToString(b)
	}
	for name, bad := range map[string]string{
		"not base64":      good[:len(good)-1] + "!",
		"type 0x0001":     base64.StdEncoding.EncodeToString(append([]byte{0, 1}, raw[2:]...)),
		"too short":       type4(30),
		"too long":        type4(60),
		"past the bound":  strings.Repeat("QUFB", 40),
		"empty type code": base64.StdEncoding.EncodeToString([]byte{0}),
	} {
		_, err := parseArtifact(bad)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), bad) || (len(bad) > 12 && strings.Contains(err.Error(), bad[:12])) {
			t.Errorf("%s: the error quotes the artifact: %v", name, err)
		}
	}
}

// ecCert is a self-signed ECDSA certificate and its key, PEM, valid from
// notBefore for a day.
func ecCert(t *testing.T, notBefore time.Time) (certPEM, keyPEM string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "artifact"},
		NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour), DNSNames: []string{"idp.example"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})), cert
}

// TestArtifactTLSKeysNeverPrinted: the back-channel's TLS keys are
// redacted from every print of Config, as the SP key pair is.
func TestArtifactTLSKeysNeverPrinted(t *testing.T) {
	certPEM, keyPEM, _ := ecCert(t, time.Now().Add(-time.Hour))
	_, nextPEM, _ := ecCert(t, time.Now().Add(-time.Hour))
	cfg := Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example/md", ResponseBinding: ResponseArtifact,
		Artifact: ArtifactConfig{TLSCertificatePEM: certPEM, TLSPrivateKeyPEM: keyPEM, TLSPrivateKeyNewPEM: nextPEM}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "cfg", cfg)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), string(js), logs.String()} {
		for _, k := range []string{keyPEM, nextPEM} {
			if line := strings.Split(k, "\n")[1]; strings.Contains(out, line[:20]) {
				t.Fatalf("a TLS key printed: %s", out)
			}
		}
		if !strings.Contains(out, certPEM[:40]) && !strings.Contains(out, "BEGIN CERTIFICATE") {
			t.Fatalf("the configuration is not printed at all, so the check proves nothing: %s", out)
		}
	}
}

// TestVerifyPinned: a pinned leaf holds within its dates only; a pinned CA
// must have issued the certificate for the host dialled.
func TestVerifyPinned(t *testing.T) {
	now := time.Now()
	_, _, leaf := ecCert(t, now.Add(-time.Hour))
	_, _, other := ecCert(t, now.Add(-time.Hour))
	cs := func(server string, chain ...*x509.Certificate) tls.ConnectionState {
		return tls.ConnectionState{ServerName: server, PeerCertificates: chain}
	}
	if err := verifyPinned(cs("idp.example", leaf), []*x509.Certificate{other, leaf}, now); err != nil {
		t.Errorf("pinned leaf: %v", err)
	}
	if err := verifyPinned(cs("idp.example", leaf), []*x509.Certificate{leaf}, now.Add(48*time.Hour)); err == nil {
		t.Error("a pinned leaf past its dates was accepted")
	}
	if err := verifyPinned(cs("idp.example", leaf), []*x509.Certificate{other}, now); err == nil {
		t.Error("a certificate that is not pinned was accepted")
	}
	if err := verifyPinned(cs("idp.example"), []*x509.Certificate{leaf}, now); err == nil {
		t.Error("no certificate at all was accepted")
	}
}
