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

// oidcKeyFileName is what keygen -oidc -out writes, oidcNextKeyFileName
// what keygen -oidc -next -out writes.
const (
	oidcKeyFileName     = "oidc.key"
	oidcNextKeyFileName = "oidc-new.key"
)

// oidcKeyOptions are keygen's flags as -oidc reads them; given lists the
// flags set on the command line.
type oidcKeyOptions struct {
	oidc, ec bool
	// next makes the key of a rotation: private_key_new, oidc-new.key.
	next  bool
	bits  int
	out   string
	force bool
	name  string
	given map[string]bool
}

// given returns the flags set on the command line.
func given(f *flags) map[string]bool {
	out := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { out[fl.Name] = true })
	return out
}

// keygenOIDC generates an OpenID Connect client key: RSA of o.bits bits or
// EC P-256, PKCS #8, and prints it as oidc_additional_settings.private_key
// (private_key_new with -next) or writes it to o.out.
func (c *cli) keygenOIDC(f *flags, o oidcKeyOptions) int {
	switch {
	case !o.oidc:
		return f.fail("-ec applies to -oidc")
	case o.given["name"] || o.given["days"]:
		return f.fail("-name and -days are for the SAML certificate; an OpenID Connect client key has none")
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
	entry, file := "private_key", oidcKeyFileName
	if o.next {
		entry, file = "private_key_new", oidcNextKeyFileName
	}
	if o.out == "" {
		var b strings.Builder
		if o.next {
			fmt.Fprintf(&b, "# OpenID Connect client key: %s, the next key of a rotation. The JWKS\n", kind)
			fmt.Fprintf(&b, "# route (/users/auth/oidc/jwks) publishes its public half under kid\n# %s (signing) now, and under\n", kid)
			fmt.Fprintf(&b, "# %s-enc (encryption) once it is promoted to private_key.\n", kid)
			b.WriteString("# Paste this entry under oidc_additional_settings beside private_key,\n")
			b.WriteString("# indented to match, and deploy; once the provider has read the JWKS again,\n")
			b.WriteString("# promote it (docs/oidc.md, \"Keys, the JWKS route and rotation\").\n")
		} else {
			fmt.Fprintf(&b, "# OpenID Connect client key: %s. The JWKS route (/users/auth/oidc/jwks)\n", kind)
			fmt.Fprintf(&b, "# publishes its public half under kid %s (signing)\n# and %s-enc (encryption).\n", kid, kid)
			b.WriteString("# Paste this entry under oidc_additional_settings, indented to match; to\n")
			b.WriteString("# rotate, make the next key with -oidc -next.\n")
		}
		b.WriteString("# " + entry + " is a secret: keep it out of version control.\n")
		b.WriteString(entry + ": |\n")
		b.WriteString(indent(string(keyPEM), "  "))
		fmt.Fprint(c.stdout, b.String())
		return exitOK
	}
	if err := writeOIDCKey(filepath.Join(o.out, file), keyPEM, o.force); err != nil {
		return c.errorf("keygen", "%v", err)
	}
	fmt.Fprintf(c.stdout, "wrote %s (OpenID Connect client key, %s, mode 0600: keep it secret)\n", filepath.Join(o.out, file), kind)
	fmt.Fprintf(c.stdout, "key ID (kid) at the JWKS route: %s\n", kid)
	fmt.Fprintf(c.stdout, "Put its contents under oidc_additional_settings as %s: |.\n", entry)
	return exitOK
}

// writeOIDCKey writes keyPEM to p, in a directory it makes if need be.
func writeOIDCKey(p string, keyPEM []byte, force bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
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
