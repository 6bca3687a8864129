package samlsp

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The kinds and uses of a CertExpiry.
const (
	// CertSP is a certificate of ours: saml_additional_settings.certificate,
	// or certificate_new or certificate_old during a key rotation.
	CertSP = "sp"
	// CertIdP is a signing certificate of the IdP, from its metadata.
	CertIdP = "idp"
	// CertFederation is a federation's metadata signing certificate
	// (saml_additional_settings.federation.signing_certificate). The
	// certificates of a federation's IdPs are not listed: there are
	// thousands, and each is checked when its IdP signs a response.
	CertFederation = "federation"

	// CertUseSignDecrypt: the SP's current pair signs our requests and
	// decrypts assertions.
	CertUseSignDecrypt = "sign+decrypt"
	// CertUseDecrypt: the next pair of a rotation decrypts assertions and
	// signs nothing until it is promoted.
	CertUseDecrypt = "decrypt"
	// CertUseRetiring: the retiring pair of a rotation decrypts what an
	// IdP still encrypts to it and never signs again; its dates matter to
	// no one, so expiry is not logged for it.
	CertUseRetiring = "retiring"
	// CertUseVerify: we verify the IdP's signatures with it.
	CertUseVerify = "verify"
	// CertUseTLS: the TLS client certificate of the artifact back-channel
	// (saml_additional_settings.artifact.tls_certificate), when it is not
	// the SP key pair's. An IdP that checks its dates refuses the
	// ArtifactResolve once it has expired.
	CertUseTLS = "tls"
)

// ExpiryWarning is how long before a certificate expires the SP starts
// logging about it.
const ExpiryWarning = 30 * 24 * time.Hour

// expiryLogEvery is how often a certificate that stays in one state
// (expiring, expired) is logged again: daily, not on every refresh.
const expiryLogEvery = 24 * time.Hour

// CertExpiry is a certificate the SP depends on and when it expires.
type CertExpiry struct {
	// Kind is CertSP or CertIdP.
	Kind string
	// Use is what the SP does with it: CertUseSignDecrypt, CertUseDecrypt,
	// CertUseRetiring or CertUseTLS for ours, CertUseVerify for the IdP's.
	Use string
	// Subject is the certificate's subject, as x509.Name prints it.
	Subject string
	// SHA256 is the hex SHA-256 fingerprint of the certificate, which tells
	// apart two certificates with one subject (an IdP's old and new key).
	SHA256   string
	NotAfter time.Time
}

// CertificateExpiries lists the certificates the SP depends on with their
// not-after times: the SP's own (the current pair, then the next and the
// retiring ones during a rotation) and the signing certificates of the IdP metadata it
// holds now (none before the first copy). It is what the SP checks at
// start-up and after every metadata refresh, for the host's monitoring,
// such as an expiry gauge per tenant. It is safe for concurrent use.
func (sp *SP) CertificateExpiries() []CertExpiry {
	var out []CertExpiry
	add := func(kind, use string, c *x509.Certificate) {
		sum := sha256.Sum256(c.Raw)
		out = append(out, CertExpiry{Kind: kind, Use: use, Subject: c.Subject.String(), SHA256: hex.EncodeToString(sum[:]), NotAfter: c.NotAfter})
	}
	if sp.cert != nil {
		add(CertSP, CertUseSignDecrypt, sp.cert)
	}
	if sp.certNew != nil {
		add(CertSP, CertUseDecrypt, sp.certNew)
	}
	if sp.certOld != nil {
		add(CertSP, CertUseRetiring, sp.certOld)
	}
	if sp.art != nil && sp.art.tlsCert != nil {
		add(CertSP, CertUseTLS, sp.art.tlsCert)
	}
	if sp.fed != nil {
		add(CertFederation, CertUseVerify, sp.fedCert)
		return out
	}
	if md := sp.md.current(); md != nil {
		for _, c := range md.certs {
			add(CertIdP, CertUseVerify, c)
		}
	}
	return out
}

// ReadyError says why the SP cannot sign anyone in: it has no copy of the
// IdP metadata yet, or, with Config.EnforceIdPCertificateDates, no IdP
// signing certificate of that copy is within its validity dates now, so
// that no response can be verified. It is nil when the SP can sign users
// in. An expired SP certificate does not make
// the SP unready: it goes on signing and decrypting with it (see
// docs/saml.md, "Certificates and expiry").
func (sp *SP) ReadyError() error {
	if sp.fed != nil {
		return sp.federationReadyError()
	}
	md := sp.md.current()
	if md == nil {
		return errors.New("no copy of the identity provider's metadata yet")
	}
	if !sp.cfg.EnforceIdPCertificateDates {
		// The metadata vouches for the keys, whatever their dates.
		return nil
	}
	now := sp.env.Now()
	var latest time.Time
	for _, c := range md.certs {
		if !now.Before(c.NotBefore) && !now.After(c.NotAfter) {
			return nil
		}
		if c.NotAfter.After(latest) {
			latest = c.NotAfter
		}
	}
	if !now.After(latest) {
		return errors.New("no IdP signing certificate is valid yet, so no response can be verified")
	}
	return fmt.Errorf("every IdP signing certificate has expired (the last on %s), so no response can be verified",
		latest.UTC().Format(time.RFC3339))
}

// certState is where a certificate stands with respect to its expiry.
type certState int

const (
	certFine certState = iota
	certExpiring
	certExpired
)

// expiryWatch logs the certificates that expire soon or have expired: once
// when one enters a state, then at most once every expiryLogEvery while it
// stays there, so that a frequent metadata refresh does not flood the log.
type expiryWatch struct {
	mu     sync.Mutex
	logged map[string]loggedState // by fingerprint and use
}

type loggedState struct {
	state certState
	at    time.Time
}

// checkExpiry logs what CertificateExpiries shows about expiry now. It
// runs at start-up and after every metadata refresh.
func (sp *SP) checkExpiry() {
	now := sp.env.Now()
	certs := sp.CertificateExpiries()
	idpValid := 0
	if md := sp.currentMetadata(); md != nil {
		for _, c := range md.certs {
			if !now.Before(c.NotBefore) && !now.After(c.NotAfter) {
				idpValid++
			}
		}
	}
	w := &sp.expiry
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.logged == nil {
		w.logged = map[string]loggedState{}
	}
	seen := map[string]bool{}
	for _, c := range certs {
		if c.Use == CertUseRetiring {
			continue
		}
		key := c.SHA256 + " " + c.Use
		seen[key] = true
		state := certFine
		switch {
		case !now.Before(c.NotAfter):
			state = certExpired
		case c.NotAfter.Sub(now) <= ExpiryWarning:
			state = certExpiring
		}
		last, ok := w.logged[key]
		if state == certFine {
			delete(w.logged, key)
			continue
		}
		if ok && last.state == state && now.Sub(last.at) < expiryLogEvery {
			continue
		}
		w.logged[key] = loggedState{state: state, at: now}
		sp.logExpiry(c, state, now, idpValid)
	}
	for key := range w.logged {
		if !seen[key] {
			// An IdP certificate that left the metadata.
			delete(w.logged, key)
		}
	}
}

func (sp *SP) logExpiry(c CertExpiry, state certState, now time.Time, idpValid int) {
	attrs := []any{"subject", c.Subject, "sha256", c.SHA256, "not_after", c.NotAfter.UTC().Format(time.RFC3339)}
	if state == certExpiring {
		attrs = append(attrs, "expires_in", c.NotAfter.Sub(now).Round(time.Hour).String())
	}
	switch {
	case c.Kind == CertSP && c.Use == CertUseDecrypt:
		attrs = append(attrs, "setting", "saml_additional_settings.certificate_new")
		if state == certExpiring {
			sp.log.Warn("saml: the next SP certificate expires soon; make another next pair before promoting this one", attrs...)
		} else {
			sp.log.Error("saml: the next SP certificate has expired; extauth still decrypts with it, but make another next pair before promoting this one", attrs...)
		}
	case c.Kind == CertSP && c.Use == CertUseTLS:
		attrs = append(attrs, "setting", "saml_additional_settings.artifact.tls_certificate")
		if state == certExpiring {
			sp.log.Warn("saml: the artifact back-channel's TLS client certificate expires soon; rotate it with tls_certificate_new (docs/saml.md, \"Artifact binding\")", attrs...)
		} else {
			sp.log.Error("saml: the artifact back-channel's TLS client certificate has expired; an IdP that checks its dates refuses every ArtifactResolve: "+
				"rotate it (docs/saml.md, \"Artifact binding\")", attrs...)
		}
	case c.Kind == CertSP:
		attrs = append(attrs, "setting", "saml_additional_settings.certificate")
		if state == certExpiring {
			sp.log.Warn("saml: the SP certificate expires soon; rotate the SP key pair (docs/saml.md, \"Rotating the SP key pair\")", attrs...)
		} else {
			sp.log.Error("saml: the SP certificate has expired; extauth goes on signing requests and decrypting assertions with it, "+
				"as most IdPs ignore SP certificate dates, but one that checks them refuses them: rotate the SP key pair "+
				"(docs/saml.md, \"Rotating the SP key pair\")", attrs...)
		}
	case c.Kind == CertFederation:
		attrs = append(attrs, "setting", "saml_additional_settings.federation.signing_certificate")
		if state == certExpiring {
			sp.log.Warn("saml: the federation's signing certificate expires soon; the federation publishes the next one ahead of its key rollover: pin it", attrs...)
		} else {
			sp.log.Error("saml: the federation's signing certificate has expired: no aggregate verifies with it, and sign-ins fail once the last good copy expires", attrs...)
		}
	case !sp.cfg.EnforceIdPCertificateDates:
		// Its dates decide nothing: say so, at Warn, since nothing fails.
		attrs = append(attrs, "idp_signing_certs_valid", idpValid)
		if state == certExpiring {
			sp.log.Warn("saml: an IdP signing certificate expires soon; extauth goes on verifying with its key after that, "+
				"as the IdP's metadata vouches for it (SAML V2.0 Metadata Interoperability Profile); "+
				"an IdP that rolls its key over publishes the next one in its metadata", attrs...)
		} else {
			sp.log.Warn("saml: an IdP signing certificate has expired; extauth goes on verifying with its key, "+
				"as the IdP's metadata vouches for it (SAML V2.0 Metadata Interoperability Profile); "+
				"with saml_additional_settings.security.enforce_idp_certificate_dates, responses signed with it would be refused", attrs...)
		}
	default:
		attrs = append(attrs, "idp_signing_certs_valid", idpValid)
		switch {
		case state == certExpiring:
			sp.log.Warn("saml: an IdP signing certificate expires soon; responses signed with it will be refused once it has: "+
				"the IdP must publish its next certificate in its metadata", attrs...)
		case idpValid == 0:
			sp.log.Error("saml: an IdP signing certificate has expired, and no other is valid: every sign-in fails "+
				"until the IdP metadata lists a valid one", attrs...)
		default:
			sp.log.Error("saml: an IdP signing certificate has expired; responses signed with it are refused, "+
				"those signed with another certificate of its metadata are not", attrs...)
		}
	}
}
