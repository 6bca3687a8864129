package extauth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// The client key rotation of docs/oidc.md through the routes, on a rolling
// deployment of two instances, against providers that cache the client's
// JWKS: it verifies our client assertions and request objects with the
// keys of the set it holds and encrypts ID tokens to the key of that set.
// Every sign-in counts; none may fail.

// clientSlots are the client keys of one secrets file: private_key (cur),
// private_key_new (next), private_key_old (old); zero keys are unset.
type clientSlots struct{ cur, next, old clientKey }

// rotatingOIDCApp is a fleet that signs in with OpenID Connect at op.
type rotatingOIDCApp struct {
	*fleet
	op *oidcop.OP
}

// oidcRotationEnc is the encryption the provider applies to ID tokens.
var oidcRotationEnc = oidcop.Encryption{Alg: "RSA-OAEP-256", Enc: "A256GCM"}

func newRotatingOIDCApp(t *testing.T, instances int, edit func(*oidcop.Config)) *rotatingOIDCApp {
	t.Helper()
	a := &rotatingOIDCApp{}
	opSrv, opPtr := opServer(t)
	a.fleet = newFleet(t, instances, func(base string) {
		oc := oidcop.Config{
			Issuer: opSrv.URL + "/op", ClientID: oidcClientID, AuthMethod: "private_key_jwt",
			RedirectURIs: []string{base + "/users/auth/oidc/callback"}, ClientJWKSURI: base + "/users/auth/oidc/jwks",
			AutoApprove: true, Keys: opKeys()["RS256"][:1],
			RequirePAR: true, RequireRequestObject: true, IDTokenEncryption: oidcRotationEnc,
		}
		if edit != nil {
			edit(&oc)
		}
		op, err := oidcop.New(oc)
		if err != nil {
			t.Fatal(err)
		}
		opPtr.Store(op)
		a.op = op
	})
	return a
}

// deploy restarts instance i with the client keys s.
func (a *rotatingOIDCApp) deploy(i int, s clientSlots) {
	a.t.Helper()
	a.fleet.deploy(i, &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: oidcClientID, Issuer: a.op.Issuer(),
		Additional: extauth.OIDCAdditionalSettings{
			ClientAuthMethod: "private_key_jwt", RequestObject: true, PushedAuthorizationRequests: true,
			IDTokenEncryptedResponseAlg: oidcRotationEnc.Alg, IDTokenEncryptedResponseEnc: oidcRotationEnc.Enc,
			PrivateKey:    extauth.NewSecret(s.cur.pem),
			PrivateKeyNew: extauth.NewSecret(s.next.pem),
			PrivateKeyOld: extauth.NewSecret(s.old.pem),
		}}})
}

// jwks is the JWKS instance i publishes, as "use kid" lines.
func (a *rotatingOIDCApp) jwks(i int) []string {
	a.t.Helper()
	a.jwksRoute.Store(int32(i))
	resp := harness.NewBrowser(a.t).Get(a.URL + "/users/auth/oidc/jwks")
	var set struct{ Keys []struct{ Use, Kid string } }
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &set) != nil {
		a.t.Fatalf("jwks: %d %s", resp.StatusCode, resp.Body)
	}
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.Use+" "+k.Kid)
	}
	return out
}

// read has the provider read the JWKS again, from instance i.
func (a *rotatingOIDCApp) read(i int) {
	a.t.Helper()
	a.jwksRoute.Store(int32(i))
	if err := a.op.RefreshClientJWKS(); err != nil {
		a.t.Fatal(err)
	}
}

// oidcStarted is a sign-in the provider has answered, on its way back to
// the callback; failed says why it could not get that far.
type oidcStarted struct {
	b        *harness.Browser
	callback string
	failed   string
}

// start begins a sign-in at instance i (which pushes a request object
// under a client assertion), the provider's reads of the JWKS answered
// by instance m, and has the provider approve it.
func (a *rotatingOIDCApp) start(i, m int) oidcStarted {
	a.t.Helper()
	a.route.Store(int32(i))
	a.jwksRoute.Store(int32(m))
	b := harness.NewBrowser(a.t).NoFollow()
	resp := b.Get(a.URL + "/users/auth/oidc")
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		return oidcStarted{failed: fmt.Sprintf("authorize at instance %d: %d %s", i, resp.StatusCode, resp.Body)}
	}
	resp = b.Get(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound {
		return oidcStarted{failed: fmt.Sprintf("the provider refused the request of instance %d: %d %s", i, resp.StatusCode, resp.Body)}
	}
	return oidcStarted{b: b, callback: resp.Header.Get("Location")}
}

// finish follows the provider's redirect to instance i (which redeems the
// code under a client assertion and decrypts the ID token), the
// provider's reads of the JWKS answered by m, and counts the sign-in.
func (a *rotatingOIDCApp) finish(step string, s oidcStarted, i, m int) {
	a.t.Helper()
	why := s.failed
	if why == "" {
		a.route.Store(int32(i))
		a.jwksRoute.Store(int32(m))
		resp := s.b.Get(s.callback)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Body, "signed in as ") {
			why = fmt.Sprintf("callback at instance %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	a.count(step, why)
}

// round signs in once for each instance that starts, each that finishes
// and each that answers the provider's reads of the JWKS.
func (a *rotatingOIDCApp) round(step string) {
	a.t.Helper()
	n := len(a.instances)
	for i := range n * n * n {
		m := i / (n * n)
		a.finish(step, a.start(i/n%n, m), i%n, m)
	}
}

// rollOut deploys s to each instance in turn, with a sign-in in flight
// across each restart and a round while the instances differ.
func (a *rotatingOIDCApp) rollOut(step string, s clientSlots) {
	a.t.Helper()
	a.fleet.rollOut(step, func(i int) { a.deploy(i, s) }, func(i int) func(string) {
		s := a.start(i, i)
		return func(step string) { a.finish(step, s, i, i) }
	}, a.round)
}

// opBehaviour is how a provider caches the client's JWKS.
type opBehaviour struct {
	name string
	edit func(*oidcop.Config)
	// beforePromotion: it reads the JWKS when the procedure waits for it,
	// after private_key_new is deployed.
	beforePromotion bool
	// usesRetiring: after the promotion, until it reads the JWKS again,
	// it encrypts to the retiring key.
	usesRetiring bool
}

// TestOIDCKeyRotationThroughRoutes plays docs/oidc.md's client key
// rotation through the routes, on two instances deployed one after the
// other, with a provider that takes private_key_jwt only, pushed and
// signed requests, and encrypts ID tokens to the client: one that caches
// the JWKS and reads it when the procedure waits and late after the
// promotion, one that reads it again for a kid it does not know, one that
// reads it at every use. Not one sign-in fails; the JWKS publishes at each
// step what the procedure says.
func TestOIDCKeyRotationThroughRoutes(t *testing.T) {
	kA, kB := clientKeys()["RSA"][0], clientKeys()["RSA"][1]
	behaviours := []opBehaviour{
		{name: "caches the JWKS, reads it when the procedure waits and late after the promotion",
			edit: func(c *oidcop.Config) { c.CacheClientJWKS = true }, beforePromotion: true, usesRetiring: true},
		{name: "caches the JWKS, reads it again for a kid it does not know",
			edit: func(c *oidcop.Config) { c.CacheClientJWKS, c.RefetchUnknownKid = true, true }},
		{name: "reads the JWKS at every use"},
	}
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			a := newRotatingOIDCApp(t, 2, b.edit)
			want := func(step string, keys ...string) {
				t.Helper()
				for i := range a.instances {
					if got := a.jwks(i); !slices.Equal(got, keys) {
						t.Fatalf("%s: instance %d publishes %v, want %v", step, i, got, keys)
					}
				}
			}

			// Before: the key A on both instances; the provider reads the
			// JWKS on its first use.
			a.deploy(0, clientSlots{cur: kA})
			a.deploy(1, clientSlots{cur: kA})
			a.round("before")

			// 1. private_key_new: published for signing, not for
			// encryption.
			a.rollOut("step 1", clientSlots{cur: kA, next: kB})
			want("step 1", "sig "+kA.kid(), "enc "+kA.kid()+"-enc", "sig "+kB.kid())
			// 2. The provider reads the JWKS, if it does when asked.
			if b.beforePromotion {
				a.read(1)
			}
			a.round("step 2")
			// 3. Promotion: B signs; A retires, decrypts, is published for
			// signing only.
			a.rollOut("step 3", clientSlots{cur: kB, old: kA})
			want("step 3", "sig "+kB.kid(), "enc "+kB.kid()+"-enc", "sig "+kA.kid())
			a.round("step 3, the provider has not read the JWKS since the promotion")
			if b.usesRetiring && !strings.Contains(a.logs.String(), "oidc: the provider encrypted to the retiring key") {
				t.Errorf("no log line says the provider still encrypts to private_key_old:\n%s", a.logs)
			}
			// 4. The provider reads the JWKS, late.
			if b.edit != nil {
				a.read(0)
			}
			a.round("step 4")
			// 5. private_key_old goes.
			a.rollOut("step 5", clientSlots{cur: kB})
			want("step 5", "sig "+kB.kid(), "enc "+kB.kid()+"-enc")
			a.round("after")

			a.noFailures(40)
		})
	}

	// The promotion without private_key_old, as this page said before: a
	// provider that has not read the JWKS since encrypts to the key that
	// is gone.
	t.Run("promoted without private_key_old", func(t *testing.T) {
		a := newRotatingOIDCApp(t, 1, func(c *oidcop.Config) { c.CacheClientJWKS = true })
		a.deploy(0, clientSlots{cur: kA})
		a.round("before")
		a.deploy(0, clientSlots{cur: kA, next: kB})
		a.read(0)
		a.deploy(0, clientSlots{cur: kB})
		a.finish("promoted", a.start(0, 0), 0, 0)
		if len(a.failures) != 1 || !strings.Contains(a.failures[0], "invalid_response") {
			t.Fatalf("failures %q", a.failures)
		}
	})
}
