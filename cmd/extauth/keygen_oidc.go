package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// oidcKeyFileName is what keygen -oidc -out writes.
const oidcKeyFileName = "oidc.key"

// oidcKeyOptions are keygen's flags as -oidc reads them; given lists the
// flags set on the command line.
type oidcKeyOptions struct {
	oidc, ec bool
	bits     int
	out      string
	force    bool
	name     string
	given    map[string]bool
}

// given returns the flags set on the command line.
func given(f *flags) map[string]bool {
	out := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { out[fl.Name] = true })
	return out
}

// keygenOIDC generates an OpenID Connect client key: RSA of o.bits bits or
// EC P-256, PKCS #8, and prints it as oidc_additional_settings.private_key
// or writes it to o.out.
func (c *cli) keygenOIDC(f *flags, o oidcKeyOptions) int {
	switch {
	case !o.oidc:
		return f.fail("-ec applies to -oidc")
	case o.given["name"] || o.given["days"]:
		return f.fail("-name and -days are for the SAML certificate; an OpenID Connect client key has none")
	case o.given["next"]:
		return f.fail("-next makes the next SAML pair; for an OpenID Connect key rotation, put a new -oidc key under private_key_new")
	case o.ec && o.given["bits"]:
		return f.fail("-bits is for RSA keys; -ec makes an EC P-256 key")
	case o.bits < minKeyBits:
		return f.fail("-bits %d is too short: at least %d bits are required (extauth refuses shorter OpenID Connect keys)", o.bits, minKeyBits)
	case o.bits > maxKeyBits:
		return f.fail("-bits %d is more than %d", o.bits, maxKeyBits)
	case o.force && o.out == "":
		return f.fail("-force only applies with -out")
	}
	var key crypto.Signer
	var err error
	kind := fmt.Sprintf("RSA %d bits", o.bits)
	if o.ec {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		kind = "EC P-256"
	} else {
		key, err = rsa.GenerateKey(rand.Reader, o.bits)
	}
	if err != nil {
		return c.errorf("keygen", "generate key: %v", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return c.errorf("keygen", "encode private key: %v", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	sum, err := (&jose.JSONWebKey{Key: key.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		return c.errorf("keygen", "thumbprint: %v", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(sum)
	if o.out == "" {
		var b strings.Builder
		fmt.Fprintf(&b, "# OpenID Connect client key: %s. The JWKS route (/users/auth/oidc/jwks)\n", kind)
		fmt.Fprintf(&b, "# publishes its public half under kid %s (signing)\n# and %s-enc (encryption).\n", kid, kid)
		b.WriteString("# Paste this entry under oidc_additional_settings, indented to match; to\n")
		b.WriteString("# rotate, paste it as private_key_new first. private_key is a secret: keep it\n# out of version control.\n")
		b.WriteString("private_key: |\n")
		b.WriteString(indent(string(keyPEM), "  "))
		fmt.Fprint(c.stdout, b.String())
		return exitOK
	}
	if err := writeOIDCKey(o.out, keyPEM, o.force); err != nil {
		return c.errorf("keygen", "%v", err)
	}
	fmt.Fprintf(c.stdout, "wrote %s (OpenID Connect client key, %s, mode 0600: keep it secret)\n", filepath.Join(o.out, oidcKeyFileName), kind)
	fmt.Fprintf(c.stdout, "key ID (kid) at the JWKS route: %s\n", kid)
	fmt.Fprintf(c.stdout, "Put its contents under oidc_additional_settings as private_key: |.\n")
	return exitOK
}

func writeOIDCKey(dir string, keyPEM []byte, force bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := filepath.Join(dir, oidcKeyFileName)
	if force {
		return replaceFile(p, keyPEM, 0o600)
	}
	if _, err := os.Lstat(p); err == nil {
		return fmt.Errorf("%s exists; not replacing it without -force", p)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return createFile(p, keyPEM, 0o600)
}
